"""What one conversation costs, per kind: the workload of the capacity issue (a hover in
Python, a hover in TypeScript, an eval cell with pandas) on its own copy of the sample
project, then each process of the tree measured as the OOM killer's cgroup would charge it
(USS: pages only it holds) and shared fairly (PSS), summed per kind.

    python benchmarks/conversation_memory.py [--conversations N] [--no-file-cancellation]

Prints one row per kind (MiB USS / PSS, summed over the N conversations and divided by
N) and the total per conversation; the first conversation pays for the tree itself
(thespian's admin, supervisors, parser pool), so with N > 1 the last column is the
marginal cost: what each conversation after the first added, measured in the same run.
--no-file-cancellation runs the language servers with the kind config's
`file_cancellation` false (`tether.lsp.cancellation`: basedpyright without its checker
thread).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil

from tether import Runtime
from tether.lsp import cancellation
from tether.runtime import load_kinds

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample_project"
MIB = 2**20
CELL = "import pandas as pd\ndf = pd.DataFrame({'a': range(1000)})\ndf.describe()"


def conversation(rt: Runtime, base: Path, i: int) -> None:
    root = base / f"c{i}"
    shutil.copytree(SAMPLE, root)
    run = rt.open_run(f"mem-{i}", workdir=str(root))
    for args in (
        {"action": "hover", "file": "inventory/main.py", "line": 3, "symbol": "Stock"},
        {"action": "hover", "file": "web/cart.ts", "line": 3, "symbol": "Line"},
    ):
        deadline = time.monotonic() + 120
        while (res := run.call("lsp", args)).is_error:
            assert time.monotonic() < deadline, res.text  # (indexing: "pending" for a while)
            time.sleep(0.5)
    res = run.call("eval", {"code": CELL, "description": "describe a small pandas frame now"})
    assert not res.is_error, res.text


def kind_of(health: dict, pid: int) -> str:
    """The health name's kind for the node that owns `pid` (its process or a child)."""

    def walk(node: dict) -> str | None:
        for child in node.get("children", []):
            found = walk(child)
            if found:
                return found
        pids = [p.get("pid") for p in node.get("pids", [])]
        if pid in pids:
            name = node.get("name", "")
            local = name.split("/", 1)[1] if name.startswith("run:") and "/" in name else name
            parts = local.split(":")
            kind = ":".join(parts[:2]) if parts[0] == "language_server" else parts[0]
            own = pids and pids[0] == pid
            return kind if own or kind in ("run", "supervisor", "root") else f"{kind} (process)"
        return None

    return walk(health) or "thespian / other"


def measure(rt: Runtime) -> tuple[dict[str, float], dict[str, float]]:
    """USS and PSS (MiB) of every process of the tree, summed per kind."""
    health = rt.health()
    uss: dict[str, float] = defaultdict(float)
    pss: dict[str, float] = defaultdict(float)
    for proc in rt.processes():
        try:
            info = proc.memory_full_info()
        except psutil.Error:
            continue
        kind = kind_of(health, proc.pid)
        if kind == "thespian / other":  # (a kernel its actor's health does not list)
            with contextlib.suppress(psutil.Error):
                if "kernel" in " ".join(proc.cmdline()):
                    kind = "kernel (process, by its command line)"
        uss[kind] += info.uss / MIB
        pss[kind] += info.pss / MIB
    return uss, pss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=2)
    # a language server keeps working after its answer (basedpyright's background
    # indexing, V8's next major GC): measured at once, a server's figure depends on when
    ap.add_argument("--settle", type=float, default=15.0, help="s to wait before measuring")
    ap.add_argument("--no-file-cancellation", action="store_true")
    opts = ap.parse_args()
    n, settle = opts.conversations, opts.settle
    kinds = load_kinds()
    if opts.no_file_cancellation:
        off = {cancellation.OPTION: False}
        kinds = [
            dataclasses.replace(k, config={**k.config, **off}) if k.kind == "language_server" else k
            for k in kinds
        ]
    base = Path(tempfile.mkdtemp(prefix="tether-mem-"))
    try:
        with Runtime.start(kinds=kinds) as rt:
            conversation(rt, base, 0)
            time.sleep(settle)
            first, _ = measure(rt)
            for i in range(1, n):
                conversation(rt, base, i)
            time.sleep(settle)
            uss, pss = measure(rt)
            # marginal: what each conversation after the first added (the tree is paid once)
            head = f"{'kind':34} {'USS MiB':>9} {'PSS MiB':>9} {'marginal':>9}"
            print(f"{head}   (per conversation, n={n}; marginal USS over the first)")
            for kind in sorted(uss, key=lambda k: -uss[k]):
                more = (uss[kind] - first.get(kind, 0.0)) / (n - 1) if n > 1 else float("nan")
                print(f"{kind:34} {uss[kind] / n:9.1f} {pss[kind] / n:9.1f} {more:9.1f}")
            marginal = (sum(uss.values()) - sum(first.values())) / (n - 1) if n > 1 else 0.0
            print(
                f"{'total':34} {sum(uss.values()) / n:9.1f} {sum(pss.values()) / n:9.1f} "
                f"{marginal:9.1f}"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
