"""Vibe workers: what the actor, the tree and the tools add to starting and killing a worker,
against the same scripted command (tests/vibe/worker.py) started with `subprocess` in the
same run of this script.

    python benchmarks/vibe.py [--rounds 30]

spawn -> first output: a worker whose brief prints one line and ends. tether: `vibe_spawn`,
then `vibe_wait` (held on the actor, answered when the process ends) and its output holds
the line; the anchor: Popen, the line read from the stdout pipe, wait. Both sides block
rather than poll: a host polling the actor every 0.5 ms kept two processes busy on a
2-core machine while the worker's Python started, and added 10-20 ms of its own to what it
measured. The difference is what tether adds.
kill -> gone: `vibe_kill` of a worker that streams and has a grandchild, until neither
process exists (psutil); the anchor is killpg + wait of the same command.
Targets (issue #15): <= 20 ms added to spawn; kill leaves nothing within 100 ms.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tether.actors.vibe import KINDS  # noqa: E402
from tether.messages.worker_ops import Status  # noqa: E402
from tether.runtime import Runtime  # noqa: E402
from tether.tools.vibe_workers import CommandBackend, VibeConfig  # noqa: E402

WORKER = [sys.executable, str(ROOT / "tests" / "vibe" / "worker.py")]
FIRST = "echo first"
STREAM = "child\nstream 100000 0.01"


def gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


def until(predicate, timeout: float = 10.0, interval: float = 0.0005):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout} s")
        time.sleep(interval)
    return value


def raw_first_output() -> float:
    started = time.perf_counter()
    proc = subprocess.Popen([*WORKER, FIRST], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"first\n"
    proc.wait()
    took = time.perf_counter() - started
    proc.stdout.close()
    return took


def raw_kill() -> float:
    proc = subprocess.Popen([*WORKER, STREAM], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    child = int(re.search(rb"child (\d+)", proc.stdout.readline()).group(1))  # type: ignore[union-attr]
    started = time.perf_counter()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    until(lambda: gone([proc.pid, child]))
    return time.perf_counter() - started


def status(rt: Runtime, run_id: str, worker_id: str) -> dict:
    return rt._call(run_id, "vibe_worker", worker_id, Status(), None, 5.0)


def tether_first_output(run) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    res = run.call("vibe_spawn", {"brief": FIRST, "label": "bench"})
    done = run.call("vibe_wait", {"worker_id": res.data["worker_id"], "timeout_seconds": 10})
    took = time.perf_counter() - started
    assert "first" in done.text, done.text
    return took


def tether_kill(rt: Runtime, run) -> float:  # type: ignore[no-untyped-def]
    worker_id = run.call("vibe_spawn", {"brief": STREAM, "label": "bench"}).data["worker_id"]
    snap = until(
        lambda: (
            (s := status(rt, run.run_id, worker_id))
            and re.search(r"child (\d+)", s["output"])
            and s
        )
    )
    pids = [int(snap["pid"]), int(re.search(r"child (\d+)", snap["output"]).group(1))]
    started = time.perf_counter()
    run.call("vibe_kill", {"worker_id": worker_id})
    until(lambda: gone(pids))
    return time.perf_counter() - started


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(int(len(ordered) * 0.9), len(ordered) - 1)]
    return f"p50 {statistics.median(samples) * 1000:6.1f} ms  p90 {p90 * 1000:6.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    config = VibeConfig(
        backends={"fast": CommandBackend(WORKER)}, max_per_run=64, max_per_runtime=64, reap_after=1
    )
    samples: dict[str, list[float]] = {k: [] for k in ("raw", "tether", "raw_kill", "tether_kill")}
    with Runtime.start(kinds=KINDS) as rt, tempfile.TemporaryDirectory() as workdir:
        run = rt.open_run("bench", workdir=workdir, vibe=True, vibe_config=config)
        tether_first_output(run)  # warm: the RunActor and the host's routes
        for _ in range(args.rounds):  # interleaved, so machine load hits both alike
            samples["raw"].append(raw_first_output())
            samples["tether"].append(tether_first_output(run))
            samples["raw_kill"].append(raw_kill())
            samples["tether_kill"].append(tether_kill(rt, run))
        run.close()
    added = statistics.median(samples["tether"]) - statistics.median(samples["raw"])
    print(f"spawn -> first output  subprocess {ms(samples['raw'])}")
    print(f"                       vibe_spawn {ms(samples['tether'])}")
    print(f"  added by tether (p50): {added * 1000:.1f} ms  (target <= 20 ms)")
    print(f"kill -> all gone       killpg     {ms(samples['raw_kill'])}")
    print(f"                       vibe_kill  {ms(samples['tether_kill'])}  (target <= 100 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
