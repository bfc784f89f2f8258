"""Benchmark: the lsp tool through tether vs a raw LSP client talking to the same server.

Project: a copy of an installed package nobody here wrote (hypothesis, ~43k lines of
Python) in a temp dir with a pyproject.toml marker. Server: basedpyright-langserver, one
process behind tether (host -> LanguageServerActor, found through its supervisor) and one
behind a minimal synchronous raw client in this process, same binary, same settings,
same client capabilities, same run of this script.

Measured per call, raw and tether back to back at each position (who goes first alternates:
the second call of a pair can meet the first one's server still busy), `--rounds` passes after a warm-up
pass over the same positions on both sides:
- hover / definition / references at call sites found with `ast` (p50, p99, ratio, added);
- write -> folded diagnostics: tether's `write` call (write the file, didChange + didSave,
  pull fresh diagnostics of the file and of the open files importing it, fold into the
  ledger, render) vs the raw client's didChange + didSave + the same pulls, pipelined,
  alternately introducing and removing an error. The target is a module with 1 to
  MAX_OTHER_PULLS open importers, so both sides pull the same files.

Targets (issue #5): <= 2 ms added at p50 for queries; <= 50 ms added for diagnostics on write.

    python benchmarks/lsp.py [--queries 40] [--references 24] [--rounds 3] [--writes 20]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tether.lsp.servers import BY_NAME  # noqa: E402
from tether.lsp.session import client_capabilities  # noqa: E402
from tether.lsp.session.freshness import (  # noqa: E402
    MAX_OTHER_PULLS,
    importers,
)
from tether.protocol import FrameDecoder, encode  # noqa: E402


def make_project(dest: Path) -> Path:
    import hypothesis

    src = Path(hypothesis.__file__).parent
    root = dest / "hypothesis-src"
    shutil.copytree(src, root / "hypothesis", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "pyproject.toml").write_text('[project]\nname = "hypothesis-copy"\nversion = "0"\n')
    return root


def count_lines(root: Path) -> int:
    return sum(sum(1 for _ in p.open(errors="replace")) for p in root.rglob("*.py"))


def call_sites(root: Path, n: int) -> list[tuple[str, int, str, int]]:
    """(rel path, 1-based line, name, 0-based column) of calls to plain names, spread over files."""
    files = sorted(root.rglob("*.py"))
    per_file: list[list[tuple[str, int, str, int]]] = []
    for f in files:
        try:
            tree = ast.parse(f.read_text())
        except SyntaxError:
            continue
        sites = []
        text_lines = f.read_text().split("\n")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and len(node.func.id) > 3
            ):
                line = text_lines[node.lineno - 1]
                # the first whole-word occurrence must be this one (tether resolves by symbol)
                if line.find(node.func.id) == node.func.col_offset and line.isascii():
                    sites.append(
                        (str(f.relative_to(root)), node.lineno, node.func.id, node.func.col_offset)
                    )
        sites.sort(key=lambda s: s[1])
        if sites:
            per_file.append(sites)
    out: list[tuple[str, int, str, int]] = []
    i = 0
    while len(out) < n and per_file:
        bucket = per_file[i % len(per_file)]
        if bucket:
            out.append(bucket.pop(len(bucket) // 2))
        else:
            per_file.remove(bucket)
        i += 1
    return out


class RawClient:
    """A minimal synchronous LSP client: the anchor."""

    def __init__(self, root: Path) -> None:
        row = BY_NAME["basedpyright"]
        self.row = row
        self.proc = subprocess.Popen(
            [shutil.which(row.binaries[0]) or row.binaries[0], *row.args],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.dec = FrameDecoder()
        self.queue: list[dict[str, Any]] = []
        self.next_id = 1
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}  # open documents, in the order they were opened
        self.responses: dict[int, dict[str, Any]] = {}
        self.pull_registered = False
        self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                "capabilities": client_capabilities(),
            },
        )
        self.notify("initialized", {})
        self.notify("workspace/didChangeConfiguration", {"settings": dict(row.settings)})
        deadline = time.monotonic() + 10
        while not self.pull_registered and time.monotonic() < deadline:
            self._pump_one()

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(encode(msg))
        self.proc.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def _pump_one(self) -> None:
        while not self.queue:
            assert self.proc.stdout
            data = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not data:
                raise RuntimeError("raw server exited")
            self.queue += self.dec.feed(data)
        msg = self.queue.pop(0)
        if "method" in msg and "id" in msg:  # server -> client request
            m = msg["method"]
            if m == "workspace/configuration":
                res: Any = [
                    self.row.settings.get((it.get("section") or "").split(".")[0])
                    for it in msg["params"]["items"]
                ]
            else:
                res = None
                if m == "client/registerCapability":
                    for r in msg["params"]["registrations"]:
                        if r["method"] == "textDocument/diagnostic":
                            self.pull_registered = True
            self._send({"jsonrpc": "2.0", "id": msg["id"], "result": res})
        elif "id" in msg:
            self.responses[msg["id"]] = msg

    def request(self, method: str, params: Any) -> Any:
        rid = self.next_id
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while rid not in self.responses:
            self._pump_one()
        return self.responses.pop(rid).get("result")

    def open(self, path: Path) -> None:
        uri = path.as_uri()
        if uri not in self.versions:
            self.versions[uri] = 1
            self.texts[uri] = path.read_text()
            self.notify(
                "textDocument/didOpen",
                {
                    "textDocument": {
                        "uri": uri,
                        "languageId": "python",
                        "version": 1,
                        "text": self.texts[uri],
                    }
                },
            )

    def change_and_diagnose(self, path: Path, text: str, importers: list[str]) -> list[Any]:
        """Change, save, then pull the file and the open files that import it, pipelined
        (the same requests tether's write sends), and wait for every answer."""
        uri = path.as_uri()
        self.versions[uri] += 1
        self.texts[uri] = text
        path.write_text(text)
        self.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": self.versions[uri]},
                "contentChanges": [{"text": text}],
            },
        )
        self.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        ids = []
        for u in [uri, *importers]:
            ids.append(self.next_id)
            params = {"textDocument": {"uri": u}, "identifier": "basedpyright"}
            self._send({"jsonrpc": "2.0", "id": self.next_id, "method": "textDocument/diagnostic", "params": params})  # fmt: skip
            self.next_id += 1
        while not all(i in self.responses for i in ids):
            self._pump_one()
        return [self.responses.pop(i).get("result") for i in ids][0].get("items", [])

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait(5)


METHOD = {
    "hover": "textDocument/hover",
    "definition": "textDocument/definition",
    "references": "textDocument/references",
}


def pick_write_target(raw: RawClient, root: Path) -> tuple[str, list[str]]:
    """A file to write whose open importers (as the queries left them open) tether pulls
    all of with the write (at most MAX_OTHER_PULLS), so the raw client can pull the same
    ones: numbers.py if it qualifies, else the first module with a class that does."""
    preferred = "hypothesis/strategies/_internal/numbers.py"
    others = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if "\nclass " in p.read_text()
    )
    for rel in [preferred, *others]:
        found = importers([root / rel], raw.texts)
        if 1 <= len(found) <= MAX_OTHER_PULLS:
            return rel, found
    return preferred, importers([root / preferred], raw.texts)[:MAX_OTHER_PULLS]


def raw_query(raw: RawClient, root: Path, action: str, site: tuple[str, int, str, int]) -> Any:
    path = root / site[0]
    raw.open(path)
    params: dict[str, Any] = {
        "textDocument": {"uri": path.as_uri()},
        "position": {"line": site[1] - 1, "character": site[3]},
    }
    if action == "references":
        params["context"] = {"includeDeclaration": True}
    return raw.request(METHOD[action], params)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def row(
    name: str, raw: list[float], teth: list[float], own: list[float] | None = None
) -> dict[str, Any]:
    """p50/p99 of each side, and the added time: `added_p50_ms` is the median of the
    per-call differences (tether - raw at the same position, measured back to back), the
    p50 of the time tether adds; `p50_diff_ms` is the difference of the two p50s, which
    over positions whose cost varies 100-fold (references: 1 to 200 ms) mostly measures
    which positions land in the middle; `own_p50_ms` is tether's time minus the server's
    own share of that same call (request written to answer parsed, measured in the actor,
    `server_ms`): what tether adds, without the server's call-to-call noise, which swamps
    the paired difference when one call takes 5 to 150 ms."""
    r50, t50 = statistics.median(raw), statistics.median(teth)
    added = [t - r for r, t in zip(raw, teth, strict=True)]
    return {
        "what": name,
        "n": len(raw),
        "raw_p50_ms": round(r50 * 1e3, 2),
        "raw_p99_ms": round(pct(raw, 99) * 1e3, 2),
        "tether_p50_ms": round(t50 * 1e3, 2),
        "tether_p99_ms": round(pct(teth, 99) * 1e3, 2),
        "ratio_p50": round(t50 / r50, 2) if r50 else None,
        "added_p50_ms": round(statistics.median(added) * 1e3, 2),
        "added_p99_ms": round(pct(added, 99) * 1e3, 2),
        "p50_diff_ms": round((t50 - r50) * 1e3, 2),
        "own_p50_ms": round(statistics.median(own) * 1e3, 2) if own else None,
        "own_p99_ms": round(pct(own, 99) * 1e3, 2) if own else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--references", type=int, default=24)
    ap.add_argument("--writes", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="measured passes over the positions")
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()

    from tether.runtime import RESOURCE_KIND_MODULES, Runtime

    load_before = os.getloadavg()[0]  # (the figures move with the machine's load: say it)
    tmp = Path(tempfile.mkdtemp(prefix="tether-lsp-bench-"))
    raw_root = make_project(tmp / "raw")
    tether_root = make_project(tmp / "tether")
    lines = count_lines(tether_root)
    sites = call_sites(tether_root, opts.queries)
    print(f"project: hypothesis source copy, {lines} lines of Python, {len(sites)} call sites")
    results = []
    raw_client = RawClient(raw_root)
    try:
        kind_modules = [*RESOURCE_KIND_MODULES, "tether.actors.echo"]  # echo: the floor anchor
        with Runtime.start(kind_modules=kind_modules) as rt:
            run = rt.open_run("bench", workdir=str(tether_root))

            def raw(action: str, site: tuple[str, int, str, int]) -> Any:
                return raw_query(raw_client, raw_root, action, site)

            def teth(action: str, site: tuple[str, int, str, int]) -> Any:
                r = run.call(
                    "lsp", {"action": action, "file": site[0], "line": site[1], "symbol": site[2]}
                )
                if r.is_error:
                    raise RuntimeError(r.text)
                return r

            for action, n in (
                ("hover", len(sites)),
                ("definition", len(sites)),
                ("references", opts.references),
            ):
                chosen = sites[:n]
                for s in chosen:  # warm-up: opens files, fills the servers' caches
                    raw_query(raw_client, raw_root, action, s)
                    teth(action, s)
                raws, teths, own = [], [], []
                for k, s in enumerate(chosen * opts.rounds):
                    # who goes first alternates: the second call of a pair runs while the
                    # first one's server may still be busy after answering
                    first, second = (raw, teth) if k % 2 == 0 else (teth, raw)
                    t0 = time.perf_counter()
                    a = first(action, s)
                    t1 = time.perf_counter()
                    b = second(action, s)
                    t2 = time.perf_counter()
                    raws.append(t1 - t0 if first is raw else t2 - t1)
                    teths.append(t2 - t1 if first is raw else t1 - t0)
                    server_ms = (b if first is raw else a).data["server_ms"]
                    own.append(teths[-1] - server_ms / 1e3)
                results.append(row(action, raws, teths, own))

            # where the added time goes, measured interleaved per position: the raw client, the
            # runtime's round trip to a trivial actor, the language-server actor asked directly
            # (no tool pipeline, no rendering), and the whole lsp tool; own: each minus its
            # server_ms, so own(direct) - echo is the actor's share, own(tool) - own(direct)
            # the host's tool pipeline (lookup, position, rendering)
            from tether.lsp.servers import make_key
            from tether.messages.language_server_ops import Navigate

            key = make_key("basedpyright", tether_root.resolve())
            raws, floor, direct, tool, direct_own, tool_own = [], [], [], [], [], []
            for _ in range(2):
                for s in sites:
                    hover = Navigate("hover", str(tether_root.resolve() / s[0]), s[1] - 1, s[3])
                    t0 = time.perf_counter()
                    raw_query(raw_client, raw_root, "hover", s)
                    t1 = time.perf_counter()
                    rt.call("bench", "echo", "floor", "echo", {}, 10)
                    t2 = time.perf_counter()
                    d = rt.call("bench", "language_server", key, hover, None, 10)  # (idempotent)
                    t3 = time.perf_counter()
                    r = teth("hover", s)
                    t4 = time.perf_counter()
                    raws.append(t1 - t0)
                    floor.append(t2 - t1)
                    direct.append(t3 - t2)
                    tool.append(t4 - t3)
                    direct_own.append(direct[-1] - d["server_ms"] / 1e3)
                    tool_own.append(tool[-1] - r.data["server_ms"] / 1e3)
            results.append(row("hover (interleaved)", raws, tool, tool_own))
            results.append(row("hover, actor direct", raws, direct, direct_own))
            results.append(
                {
                    "what": "runtime round trip (echo)",
                    "n": len(floor),
                    "tether_p50_ms": round(statistics.median(floor) * 1e3, 2),
                    "tether_p99_ms": round(pct(floor, 99) * 1e3, 2),
                }  # fmt: skip
            )

            # write -> folded diagnostics (the written file and its open importers)
            target, importing = pick_write_target(raw_client, raw_root)
            print(f"write target: {target}, imported by {len(importing)} open file(s)")
            rpath, tpath = raw_root / target, tether_root / target
            base_text = tpath.read_text()
            anchor = "\nclass "
            i = base_text.index(anchor)
            bad = base_text[:i] + "\n\n_bench_broken: int = 'not an int'" + base_text[i:]
            raw_client.open(rpath)
            run.call("lsp", {"action": "diagnostics", "file": target})
            raws, teths = [], []
            pending = 0
            after_pending = False
            for k in range(opts.writes + 2):
                text = bad if k % 2 == 0 else base_text
                t0 = time.perf_counter()
                raw_client.change_and_diagnose(rpath, text, importing)
                t1 = time.perf_counter()
                r = run.call("write", {"path": target, "content": text})
                t2 = time.perf_counter()
                if r.is_error:
                    raise RuntimeError(r.text)
                if k < 2:
                    continue  # warm-up (the first check of a big file may exceed the cap)
                folded = (r.data.get("diagnostics") or {}) if isinstance(r.data, dict) else {}
                if folded.get("pending"):
                    pending += 1
                    after_pending = True
                elif after_pending:
                    after_pending = False  # the ledger never saw the error go: not "new"
                elif k % 2 == 0 and not any(
                    "not assignable" in d["message"] for d in folded.get("new", [])
                ):
                    raise RuntimeError(f"the introduced error was not folded in: {r.text}")
                raws.append(t1 - t0)
                teths.append(t2 - t1)
            results.append(row(f"write->diagnostics (+{len(importing)} importers)", raws, teths))
            results[-1]["pending"] = pending
            run.close()
    finally:
        raw_client.close()
        shutil.rmtree(tmp, ignore_errors=True)

    load = f"load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
    print(f"{load}, on {os.cpu_count()} cores")
    if opts.json:
        print(json.dumps(results, indent=2))
    cols = [
        "what",
        "n",
        "raw_p50_ms",
        "raw_p99_ms",
        "tether_p50_ms",
        "tether_p99_ms",
        "ratio_p50",
        "added_p50_ms",
        "added_p99_ms",
        "p50_diff_ms",
        "own_p50_ms",
        "own_p99_ms",
    ]
    print(" | ".join(cols))
    for r in results:
        print(" | ".join(str(r.get(c, "")) for c in cols))
    q = [r for r in results if r["what"] in METHOD]
    echo = [r for r in results if r["what"].startswith("runtime round trip")][0]
    print(
        f"of the added time, {echo['tether_p50_ms']} ms is the runtime's own round trip "
        "(host -> actor -> host), measured on the echo actor"
    )
    inter = {r["what"]: r for r in results}
    own_tool = inter["hover (interleaved)"]["own_p50_ms"]
    own_direct = inter["hover, actor direct"]["own_p50_ms"]
    print(
        f"hover, interleaved: tether's own {own_tool} ms at p50 = the round trip "
        f"{echo['tether_p50_ms']} + the actor's share {own_direct - echo['tether_p50_ms']:.2f} "
        f"(own when asked directly: {own_direct}) + the host's lsp tool "
        f"{own_tool - own_direct:.2f} (differences of medians)"
    )
    w = [r for r in results if r["what"].startswith("write->diagnostics")][0]
    ok_own = all(r["own_p50_ms"] <= 2.0 for r in q)
    ok_paired = all(r["added_p50_ms"] <= 2.0 for r in q)
    ok_w = w["added_p50_ms"] <= 50.0
    print(
        "target queries <= 2 ms added at p50: "
        f"{'met' if ok_own else 'NOT met'} as tether's own time (own_p50_ms), "
        f"{'met' if ok_paired else 'NOT met'} as the paired difference (added_p50_ms); "
        f"write -> diagnostics <= 50 ms added: {'met' if ok_w else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
