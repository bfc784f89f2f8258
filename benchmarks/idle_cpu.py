"""What an idle tree costs in CPU: N conversations of the capacity workload (a hover in
Python, one in TypeScript, a pandas cell: benchmarks/conversation_memory.py), then nothing,
and the CPU each process of the runtime used over a window, as a share of one core.

    python benchmarks/idle_cpu.py [--conversations N] [--settle S] [--window W]

The anchor, measured in the same window: the components themselves (language servers,
kernels), idle as they are. What is left is tether's own: its actor processes, thespian's
admin and logger, and the host's threads (the governor's samples, the tree watch). The
window starts `--settle` s after the last call: past RESERVE_TTL (30 s), so the governor
samples at the pace of a tree well inside its budget (tether.capacity.governor).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import psutil
from conversation_memory import conversation

from tether import Runtime
from tether.capacity import governor


def cpu_seconds(proc: psutil.Process) -> float:
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def is_tethers(proc: psutil.Process) -> bool:
    """An actor or thespian's own process (titled by tether), not a server or kernel."""
    try:
        return proc.cmdline()[0].startswith(("tether:", "tether-"))
    except (psutil.Error, IndexError):
        return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument("--settle", type=float, default=35.0, help="s after the last call")
    ap.add_argument("--window", type=float, default=30.0, help="s measured")
    opts = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tether-idle-"))
    host = psutil.Process()
    try:
        with Runtime.start() as rt:
            for i in range(opts.conversations):
                conversation(rt, base, i)
            time.sleep(opts.settle)  # (the window starts once the tree is idle)
            procs = [p for p in rt.processes() if p.pid != host.pid]
            ours = {p.pid: is_tethers(p) for p in procs}
            titles = {p.pid: " ".join(p.cmdline())[:60] for p in procs if ours[p.pid]}
            before = {p.pid: cpu_seconds(p) for p in procs}
            host_before = cpu_seconds(host)
            period = rt.governor.period() if rt.governor else 0.0
            time.sleep(opts.window)
            used = {p.pid: cpu_seconds(p) - before[p.pid] for p in procs}
            host_used = cpu_seconds(host) - host_before
    finally:
        shutil.rmtree(base, ignore_errors=True)
    share = lambda seconds: 100 * seconds / opts.window  # noqa: E731
    own = sum(used[pid] for pid, mine in ours.items() if mine) + host_used
    anchor = sum(used[pid] for pid, mine in ours.items() if not mine)
    n = opts.conversations
    print(
        f"{n} idle conversation(s), {opts.window:g} s window, governor sampling every "
        f"{period:g} s (SAMPLE_PERIOD {governor.SAMPLE_PERIOD:g}, IDLE_PERIOD "
        f"{governor.IDLE_PERIOD:g}); % of one core:"
    )
    print(
        f"  components (servers, kernels: the anchor) {share(anchor):6.2f}  {len(ours) - len(titles)} processes"
    )
    print(
        f"  tether's actors and thespian              {share(own - host_used):6.2f}  {len(titles)} processes"
    )
    print(f"  the host's threads                        {share(host_used):6.2f}")
    print(f"  tether's own, per conversation            {share(own) / n:6.2f}")
    for pid in sorted(titles, key=lambda pid: -used[pid])[:5]:
        print(f"    {share(used[pid]):5.2f}  {titles[pid]}")


if __name__ == "__main__":
    main()
