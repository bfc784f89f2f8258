"""places: what the sandbox and prefix places cost against the host place, same run of this
script (the host is the anchor of every figure).

    python benchmarks/places.py [--starts 6] [--cells 200] [--json]

The prefix place is the Debian root of tether.places.rootfs (mmdebstrap, entered through
bubblewrap); where it is not built its figures are skipped and the reason printed.

1. Start: spawn to exit of `/bin/true` on the host, in a sandbox whose place is open (its
   cgroup made: a run's second process), in a new sandbox place (the cgroup made too: a
   run's first process), and in the prefix; interleaved. Target: <= 30 ms added.
2. Kernel first cell of a new conversation, no spare: host, sandbox, prefix (the kernel's
   start in the place); and opened ahead (`eval.prepare(run, start_kernels=True)` at
   open_run, counted in the capacity budget like any kernel), sandbox and prefix. Target:
   <= 60 ms for a place opened ahead.
3. A cell's round trip once started ("1"), host against each place, interleaved in blocks
   of 20. Target: <= 0.05 ms added per call.
4. Language server first answer: a hover on a new root (basedpyright's start and first
   analysis), host against sandbox.
5. Debug launch to its first stop (debugpy), host against sandbox. Not in the prefix: the
   adapter is the host's debugpy, which the root does not have.
6. Worker spawn to first output (`vibe_spawn` + `vibe_wait` of the scripted worker),
   host against sandbox and prefix (there on the root's python3).

Its last run here (2026-12-01, --starts 4, load 14-17 on 2 cores shared with seven other
engineers; p50, added to the same run's host): start +80 ms (sandbox, place open), +91 ms
(new place), +48 ms (prefix); first cell cold: host 4583 ms, sandbox +1499 ms, prefix
+204 ms; first cell opened ahead: sandbox 23 ms, prefix 48 ms (target <= 60); round trip:
host 29.1 ms, sandbox -2.2 ms, prefix -3.1 ms (noise at that load: within it); LS first
hover: host 8550 ms, sandbox -2036 ms (n=2, noise); debug launch to stop: host 4485 ms,
sandbox -782 ms (n=2, noise); worker spawn to output: host 216 ms, sandbox +295 ms,
prefix +59 ms. A second run (--starts 6, load 17-18): start +36.6 ms (sandbox, place
open), +37.7 ms (new place), +27.9 ms (prefix); first cell cold +1545 ms (sandbox), +1482
ms (prefix) on the host's 3625 ms; opened ahead: sandbox 66.2 ms, prefix 45.4 ms, against
the host's own round trip of 39.2 ms at that load (sandbox -3.5 ms, prefix -2.8 ms); LS
first hover +3865 ms on 12392; debug launch +6181 ms on 7753 (n=3); worker +102 ms
(sandbox), -6 ms (prefix) on 211 ms. At load 9, interleaved (/tmp scripts, not this one): /bin/true on the host
3.8 ms, sandbox without a cgroup 36.2 ms, in its run's cgroup 39.8 ms, in a new cgroup
51.7 ms; bare bwrap 8-16 ms, its namespaces +4-7 ms, `--dev` +15 ms (a new devpts: kept,
IPython's `!cmd` runs under a pty), about 1 ms a bind mount; the first join of a new
cgroup +15 ms. None of the argv is worth cutting: the cost is the kernel's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tether.actors.debug_session import KINDS as DEBUG_KINDS  # noqa: E402
from tether.actors.kernel import kinds  # noqa: E402
from tether.actors.language_server import KINDS as LSP_KINDS  # noqa: E402
from tether.actors.vibe import KINDS as VIBE_KINDS  # noqa: E402
from tether.places import Place, PlaceError, wrap  # noqa: E402
from tether.places.rootfs import debian_root, rootfs_place  # noqa: E402
from tether.runtime import Runtime  # noqa: E402
from tether.tools import eval as eval_tool  # noqa: E402
from tether.tools.vibe_workers import CommandBackend, VibeConfig  # noqa: E402

DESCRIPTION = "a trivial cell for the benchmark"
WORKER = Path(__file__).resolve().parent.parent / "tests" / "vibe" / "worker.py"


def pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def ms(x: float) -> float:
    return round(x * 1000, 3)


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": ms(pct(xs, 0.5)), "p99_ms": ms(pct(xs, 0.99)), "n": len(xs)}


def versus(took: dict[str, list[float]]) -> dict[str, Any]:
    """Each place's summary, and its p50 added to the host's (the same run's anchor)."""
    out: dict[str, Any] = {k: summary(v) for k, v in took.items() if v}
    for name, xs in took.items():
        if name != "host" and xs and took.get("host"):
            out[f"{name}_added_p50_ms"] = ms(pct(xs, 0.5) - pct(took["host"], 0.5))
    return out


class Places:
    """The places of this run, and how to open a run in each."""

    def __init__(self, rt: Runtime, base: Path) -> None:
        self.rt, self.base, self.n = rt, base, 0
        try:
            self.root: Path | None = debian_root()
            self.why = ""
        except PlaceError as exc:
            self.root, self.why = None, str(exc)

    @property
    def names(self) -> list[str]:
        return ["host", "sandbox", *(["prefix"] if self.root else [])]

    def workspace(self) -> Path:
        self.n += 1
        ws = self.base / f"ws{self.n}"
        ws.mkdir()
        return ws

    def place(self, name: str, ws: Path) -> Any:
        if name != "prefix":
            return name
        assert self.root is not None
        return rootfs_place(self.root, {str(ws): "/srv/ws"}, self.rt.state_dir / "kernels" / "px")

    def open(self, name: str, ws: Path | None = None, **options: Any) -> Any:
        ws = ws or self.workspace()
        return self.rt.open_run(
            f"{name}-{self.n}", workdir=ws, place=self.place(name, ws), **options
        )


def start_cost(starts: int, places: Places) -> dict[str, Any]:
    work = str(places.workspace())
    took: dict[str, list[float]] = {"host": [], "sandbox": [], "sandbox_new_place": []}
    entries = {
        "host": Place.host(),
        "sandbox": Place.sandbox(),
        "sandbox_new_place": Place.sandbox(),
    }
    if places.root:
        took["prefix"] = []
        entries["prefix"] = places.place("prefix", Path(work))
    kept = wrap(Place.sandbox(), ["/bin/true"], cwd=work, workspace=work, group="bench-open")
    for n in range(starts):
        for name, place in entries.items():
            group = {"sandbox": "bench-open", "sandbox_new_place": f"bench-{n}"}.get(name, "")
            began = time.perf_counter()
            w = wrap(place, ["/bin/true"], cwd=work, workspace=work, group=group)
            subprocess.run(w.argv, env=w.env, cwd=w.cwd, check=True)
            took[name].append(time.perf_counter() - began)
            if name == "sandbox_new_place":
                w.release()
    kept.release()
    return versus(took)


def cell(run: Any, code: str) -> float:
    began = time.perf_counter()
    res = run.call("eval", {"code": code, "description": DESCRIPTION})
    took = time.perf_counter() - began
    if res.is_error:
        raise SystemExit(f"eval failed in the benchmark: {res.text}")
    return took


def kernels(places: Places, starts: int, cells: int) -> dict[str, Any]:
    first: dict[str, list[float]] = {name: [] for name in places.names}
    runs: dict[str, Any] = {}
    for n in range(starts):
        for name in places.names:
            run = places.open(name)
            first[name].append(cell(run, "1"))
            if n == starts - 1:
                runs[name] = run
            else:
                run.close()
    ahead: dict[str, list[float]] = {name: [] for name in places.names if name != "host"}
    for _ in range(starts):
        for name in ahead:
            run = places.open(name)
            eval_tool.prepare(run, start_kernels=True)
            ahead[name].append(cell(run, "1"))
            run.close()
    trips: dict[str, list[float]] = {name: [] for name in places.names}
    for _ in range(max(cells // 20, 1)):
        for name in places.names:
            trips[name].extend(cell(runs[name], "1") for _ in range(20))
    for run in runs.values():
        run.close()
    return {
        "first_cell": versus(first),
        "first_cell_opened_ahead": {k: summary(v) for k, v in ahead.items()},
        "round_trip": versus(trips),
    }


def lsp_first_answer(places: Places, starts: int) -> dict[str, Any]:
    if shutil.which("basedpyright-langserver") is None:
        return {"skipped": "basedpyright-langserver is not on PATH"}
    took: dict[str, list[float]] = {"host": [], "sandbox": []}
    for _ in range(starts):
        for name in took:
            ws = places.workspace()
            (ws / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
            (ws / "shapes.py").write_text("def total_area(n: int) -> int:\n    return n * 2\n")
            (ws / "report.py").write_text("from shapes import total_area\nprint(total_area(3))\n")
            run = places.open(name, ws)
            began = time.perf_counter()
            res = run.call(
                "lsp", {"action": "hover", "file": "report.py", "line": 2, "symbol": "total_area"}
            )
            took[name].append(time.perf_counter() - began)
            if res.is_error or "total_area" not in res.text:
                raise SystemExit(f"hover failed in the benchmark: {res.text}")
            run.close()
    return versus(took)


def debug_launch(places: Places, starts: int) -> dict[str, Any]:
    took: dict[str, list[float]] = {"host": [], "sandbox": []}
    for _ in range(starts):
        for name in took:
            ws = places.workspace()
            (ws / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
            (ws / "prog.py").write_text("x = 1\nprint(x)\n")
            run = places.open(name, ws)
            run.call("debug", {"op": "breakpoints", "file": "prog.py", "lines": [2]})
            began = time.perf_counter()
            res = run.call("debug", {"op": "launch", "program": "prog.py"})
            took[name].append(time.perf_counter() - began)
            if not res.text.startswith("stopped at prog.py:2"):
                raise SystemExit(f"debug launch did not stop in the benchmark: {res.text}")
            run.call("debug", {"op": "terminate"})
            run.close()
    return versus(took)


def worker_first_output(places: Places, starts: int) -> dict[str, Any]:
    took: dict[str, list[float]] = {name: [] for name in places.names}
    for _ in range(starts):
        for name in places.names:
            ws = places.workspace()
            shutil.copy(WORKER, ws / "worker.py")
            python = "python3" if name == "prefix" else sys.executable  # (the root's own)
            config = VibeConfig(backends={"fast": CommandBackend([python, str(ws / "worker.py")])})
            run = places.open(name, ws, vibe=True, vibe_config=config)
            began = time.perf_counter()
            res = run.call("vibe_spawn", {"brief": "echo first", "label": "bench"})
            wid = res.data["worker_id"] if res.data else None
            done = run.call("vibe_wait", {"worker_id": wid, "timeout_seconds": 30})
            took[name].append(time.perf_counter() - began)
            if "first" not in done.text:
                raise SystemExit(
                    f"the worker did not print in the benchmark: {res.text} {done.text}"
                )
            run.close()
    return versus(took)


def line(label: str, figures: dict[str, Any], target: str = "") -> str:
    parts = [f"{k} p50 {v['p50_ms']} ms" for k, v in figures.items() if isinstance(v, dict)]
    added = [f"{k[: -len('_added_p50_ms')]} +{v} ms" for k, v in figures.items() if "added" in k]
    if "skipped" in figures:
        parts = [f"skipped: {figures['skipped']}"]
    tail = f" (added: {', '.join(added)})" if added else ""
    return f"{label:26s} {', '.join(parts)}{tail}{f' target {target}' if target else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=6)
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--only", choices=("start", "eval"), help="measure this section alone (the others skipped)"
    )
    args = parser.parse_args()
    report: dict[str, Any] = {}
    skipped = {"skipped": f"--only {args.only}"}
    with tempfile.TemporaryDirectory(prefix="tether-places-bench-") as base:
        all_kinds = [*kinds(spares=0), *DEBUG_KINDS, *VIBE_KINDS, *LSP_KINDS]
        with Runtime.start(kinds=all_kinds) as rt:
            places = Places(rt, Path(base))
            report["prefix"] = "the Debian root" if places.root else f"skipped: {places.why}"
            want = {args.only} if args.only else {"start", "eval", "lsp", "debug", "worker"}
            report["start"] = start_cost(args.starts * 4, places) if "start" in want else skipped
            report["eval"] = kernels(places, args.starts, args.cells) if "eval" in want else {}
            n = max(args.starts // 2, 2)
            report["lsp"] = lsp_first_answer(places, n) if "lsp" in want else skipped
            report["debug"] = debug_launch(places, n) if "debug" in want else skipped
            report["worker"] = (
                worker_first_output(places, args.starts) if "worker" in want else skipped
            )
    if args.json:
        print(json.dumps(report, indent=2))
        return
    e = report["eval"] or {
        k: skipped for k in ("first_cell", "first_cell_opened_ahead", "round_trip")
    }
    print(f"prefix place: {report['prefix']}")
    print(line("start /bin/true", report["start"], "<= 30 ms added"))
    print(line("kernel first cell, cold", e["first_cell"]))
    print(line("first cell, opened ahead", e["first_cell_opened_ahead"], "<= 60 ms"))
    print(line("cell round trip", e["round_trip"], "<= 0.05 ms added"))
    print(line("LS first answer (hover)", report["lsp"]))
    print(line("debug launch -> stopped", report["debug"]))
    print(line("worker spawn -> output", report["worker"]))


if __name__ == "__main__":
    main()
