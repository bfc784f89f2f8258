"""places: what the sandbox place costs against the host place, same run of this script.

    python benchmarks/places.py [--starts 10] [--cells 200] [--json]

1. Start cost: spawn to exit of `/bin/true`, the host (the anchor) against the same command
   wrapped for a sandbox (bubblewrap: namespaces, binds, cgroup join), interleaved.
   Target: <= 30 ms added to any start.
2. The first cell of a new conversation, no spare kernel: a host run against a sandbox run
   (bwrap + the conversation's layer over the interpreter + ipykernel's start); and a
   sandbox run whose kernel was started at open_run (`eval.prepare(run,
   start_kernels=True)`). Target: <= 60 ms for that one.
3. A call's round trip once started: a trivial eval cell ("1"), host run against sandbox
   run, interleaved in blocks of 20. Target: <= 0.05 ms added per call (the kernel is
   reached over the same ipc sockets, bound into the place).
4. A debugpy launch to its first stop, host against sandbox.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tether.actors.debug_session import KINDS as DEBUG_KINDS  # noqa: E402
from tether.actors.kernel import kinds  # noqa: E402
from tether.places import Place, wrap  # noqa: E402
from tether.runtime import Runtime  # noqa: E402
from tether.tools import eval as eval_tool  # noqa: E402

DESCRIPTION = "a trivial cell for the benchmark"


def pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def ms(x: float) -> float:
    return round(x * 1000, 3)


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": ms(pct(xs, 0.5)), "p99_ms": ms(pct(xs, 0.99)), "n": len(xs)}


def start_cost(starts: int, workdir: str) -> dict[str, Any]:
    host: list[float] = []
    boxed: list[float] = []
    for _ in range(starts):
        for place, out in ((Place.host(), host), (Place.sandbox(), boxed)):
            began = time.perf_counter()
            w = wrap(place, ["/bin/true"], cwd=workdir, workspace=workdir, group="bench")
            subprocess.run(w.argv, env=w.env, cwd=w.cwd, check=True)
            out.append(time.perf_counter() - began)
            w.release()
    return {
        "host": summary(host),
        "sandbox": summary(boxed),
        "added_p50_ms": ms(pct(boxed, 0.5) - pct(host, 0.5)),
    }


def cell(run: Any, code: str) -> float:
    began = time.perf_counter()
    res = run.call("eval", {"code": code, "description": DESCRIPTION})
    took = time.perf_counter() - began
    if res.is_error:
        raise SystemExit(f"eval failed in the benchmark: {res.text}")
    return took


def kernels(rt: Runtime, starts: int, cells: int, workdir: str) -> dict[str, Any]:
    first: dict[str, list[float]] = {"host": [], "sandbox": []}
    runs: dict[str, Any] = {}
    for n in range(starts):
        for name in ("host", "sandbox"):
            run = rt.open_run(f"{name}-{n}", workdir=workdir, place=name)
            first[name].append(cell(run, "1"))
            if n == starts - 1:
                runs[name] = run
            else:
                run.close()
    ahead: list[float] = []  # a sandboxed run whose kernel was started at open_run
    for n in range(starts):
        run = rt.open_run(f"ahead-{n}", workdir=workdir, place="sandbox")
        eval_tool.prepare(run, start_kernels=True)
        ahead.append(cell(run, "1"))
        run.close()
    trips: dict[str, list[float]] = {"host": [], "sandbox": []}
    for _ in range(max(cells // 20, 1)):
        for name in ("host", "sandbox"):
            trips[name].extend(cell(runs[name], "1") for _ in range(20))
    for run in runs.values():
        run.close()
    return {
        "first_cell": {k: summary(v) for k, v in first.items()},
        "first_cell_added_p50_ms": ms(pct(first["sandbox"], 0.5) - pct(first["host"], 0.5)),
        "first_cell_sandbox_opened_ahead": summary(ahead),
        "round_trip": {k: summary(v) for k, v in trips.items()},
        "round_trip_added_p50_ms": ms(pct(trips["sandbox"], 0.5) - pct(trips["host"], 0.5)),
    }


def debug_launch(rt: Runtime, starts: int, workdir: str) -> dict[str, Any]:
    Path(workdir, "pyproject.toml").write_text("[project]\nname = 'bench'\n")
    Path(workdir, "prog.py").write_text("x = 1\nprint(x)\n")
    took: dict[str, list[float]] = {"host": [], "sandbox": []}
    for n in range(starts):
        for name in ("host", "sandbox"):
            run = rt.open_run(f"dbg-{name}-{n}", workdir=workdir, place=name)
            run.call("debug", {"op": "breakpoints", "file": "prog.py", "lines": [2]})
            began = time.perf_counter()
            res = run.call("debug", {"op": "launch", "program": "prog.py"})
            took[name].append(time.perf_counter() - began)
            if not res.text.startswith("stopped at prog.py:2"):
                raise SystemExit(f"debug launch did not stop in the benchmark: {res.text}")
            run.call("debug", {"op": "terminate"})
            run.close()
    return {
        "launch_to_stop": {k: summary(v) for k, v in took.items()},
        "added_p50_ms": ms(pct(took["sandbox"], 0.5) - pct(took["host"], 0.5)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as workdir:
        report["start"] = start_cost(args.starts * 3, workdir)
        with Runtime.start(kinds=[*kinds(spares=0), *DEBUG_KINDS]) as rt:
            report["eval"] = kernels(rt, args.starts, args.cells, workdir)
            report["debug"] = debug_launch(rt, max(args.starts // 2, 2), workdir)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    s, e, d = report["start"], report["eval"], report["debug"]
    print(
        f"start /bin/true    host p50 {s['host']['p50_ms']} ms, sandbox p50 "
        f"{s['sandbox']['p50_ms']} ms: +{s['added_p50_ms']} ms (target <= 30)"
    )
    print(
        f"first cell         host p50 {e['first_cell']['host']['p50_ms']} ms, sandbox p50 "
        f"{e['first_cell']['sandbox']['p50_ms']} ms: +{e['first_cell_added_p50_ms']} ms"
    )
    print(
        "first cell, sandbox opened ahead p50 "
        f"{e['first_cell_sandbox_opened_ahead']['p50_ms']} ms (target <= 60)"
    )
    print(
        f"cell round trip    host p50 {e['round_trip']['host']['p50_ms']} ms, sandbox p50 "
        f"{e['round_trip']['sandbox']['p50_ms']} ms: +{e['round_trip_added_p50_ms']} ms "
        "(target <= 0.05)"
    )
    print(
        f"debug launch->stop host p50 {d['launch_to_stop']['host']['p50_ms']} ms, sandbox "
        f"p50 {d['launch_to_stop']['sandbox']['p50_ms']} ms: +{d['added_p50_ms']} ms"
    )


if __name__ == "__main__":
    main()
