"""CPU weight between places: one conversation's busy loops leave another's calls their
latency, because each place is a cgroup with its own `cpu.shares` (v1) / `cpu.weight`
(v2) from `Limits.cpu_weight` (`tether.cgroups`), and the scheduler divides the CPU
between those groups by weight, not between their processes.

Three sandboxed conversations on one runtime, each with a real kernel: B times a fixed
CPU-bound loop inside its cell (one core's work); A (the default weight, like B's) and H
(ten times B's weight) each hold 8 busy processes, started from a cell and stopped
(SIGSTOP) between the measurements. B's loop is timed with no hog running, then with A's
running, then alone; then a quarter of the loop (H's hogs stall the whole machine while
it runs) alone, with H's running, alone; five rounds: each loaded time is set against the
unloaded ones of the same loop just before and after it, as the other engineers' load
moves from second to second; the median of the rounds' ratios is asserted.

The bounds, for a 2-core machine shared with others. Let S be what the tether cgroup gets
of the CPU B runs on. Alone, B gets min(1 core, S). Against A at an equal weight, B's group
gets at least half of S (and all it asks when S is 2 cores): its time grows at most 2x,
whatever else loads the machine, plus a little for the two cores' split; the assertion
allows 3x. Against H at ten times B's weight, B's group gets S/11: at least 5.5x (2 cores
free) and ~11x when S is one core or less; the assertion asks for more than 4x and more
than 1.5 times the equal-weight ratio, so the test fails if the weight does not decide
it. Each hog phase waits until the hogs are seen using CPU before B's loop is timed.
Measured at load average 9-13 (other engineers' tests), 5 rounds: against A medians
1.9-2.2x (rounds 1.5-3.0x), against H medians ~10x (rounds 3.3-13x). With 3 rounds of a
0.2 s loop one run's median against A was 3.3x (a round at 4.3x): hence 5 rounds. With
the quarter loop against H, a quiet machine (load 1): against A 1.06x, against H 5.9x
(rounds 5.4-8.1x); the test took 16 s instead of 25."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.lsp.lsp_support import health_nodes
from tests.places.test_places import needs_sandbox
from tether import cgroups
from tether.actors.kernel import kinds
from tether.places import Limits, Place

pytestmark = [pytest.mark.slow, needs_sandbox]
HOGS = 8  # busy processes in a hog's place: 4 per core
ROUNDS = 5
LOOP = 4_000_000  # B's fixed work against A: ~0.3 s of one core here
# against H a quarter of it: B's time grows ~6-10x there, and while it runs H's hogs hold
# both cores at ten times the weight of everything else the machine runs
HEAVY_LOOP = LOOP // 4
EQUAL_AT_MOST = 3.0  # B's slowdown against an equal weight (theory: at most 2x)
HEAVY_AT_LEAST = 4.0  # against ten times its weight (theory: at least 5.5x)

START_HOGS = f"""
import os, signal, subprocess, sys
hogs = [subprocess.Popen([sys.executable, "-c", "print('busy', flush=True)\\nwhile True: pass"],
                         stdout=subprocess.PIPE, text=True) for _ in range({HOGS})]
print(sum(h.stdout.readline() == "busy\\n" for h in hogs), "busy")
for h in hogs: h.send_signal(signal.SIGSTOP)
def used(pid):  # (CPU seconds of a process, from its /proc stat: utime + stime)
    fields = open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
"""
# the hogs' CPU seconds since this was last run
CPU_OF_HOGS = """
now = sum(used(h.pid) for h in hogs)
print(now - globals().get("_was", now)); _was = now
"""
TIMED_LOOP = """
import time
t0 = time.perf_counter(); s = 0
for i in range({loop}): s += i
print(f"{{time.perf_counter() - t0:.4f}}")
"""


def _ev(run: Any, code: str) -> str:
    res = run.call(
        "eval", {"code": code, "description": "measure how CPU weight divides the machine"}
    )
    assert not res.is_error, res.text
    return res.text


def _signal_hogs(run: Any, sig: str) -> None:
    _ev(run, f"for h in hogs: h.send_signal(signal.{sig})")


def _busy(run: Any) -> bool:
    """The hogs are running: they used a tenth of a CPU second since the last look."""
    return float(_ev(run, CPU_OF_HOGS).split()[-1]) > 0.1


def _timed(run: Any, loop: int = LOOP) -> float:
    return float(_ev(run, TIMED_LOOP.format(loop=loop)).split()[-1])


def _loaded(hog: Any, b: Any, loop: int) -> float:
    """B's loop time while `hog`'s processes run."""
    _ev(hog, CPU_OF_HOGS)
    _signal_hogs(hog, "SIGCONT")
    try:
        wait_until(lambda: _busy(hog), timeout=30, interval=0.2)
        return _timed(b, loop)
    finally:
        _signal_hogs(hog, "SIGSTOP")


def _cpu_shares(rt: Any, run_id: str) -> int:
    """The cpu.shares (v1) or cpu.weight (v2, as shares) of the cgroup `run_id`'s kernel runs
    in, read from the host."""
    (node,) = [n for n in health_nodes(rt, "kernel") if n["name"].startswith(f"run:{run_id}/")]
    pid = node["pids"][1]["pid"]  # (the first is the actor, then bwrap)
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    mounts = cgroups.read_mounts()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") and "cpu" in mounts.v1:
            return int((mounts.v1["cpu"] / path.lstrip("/") / "cpu.shares").read_text())
    v2 = next(p for _, c, p in (x.split(":", 2) for x in lines) if c == "")
    assert mounts.v2 is not None
    weight = int((mounts.v2 / v2.lstrip("/") / "cpu.weight").read_text())
    return int(weight * cgroups.CPU_SHARES_PER_WEIGHT)


def test_a_busy_place_leaves_another_its_share_and_the_weight_decides(
    runtime_factory: Any, tmp_path: Path
) -> None:
    if cgroups.rlimits_only() or cgroups.missing(Limits()):
        pytest.skip("no cgroup is delegated here: places fall back to rlimits, no CPU weight")
    rt = runtime_factory(kinds=kinds(spares=0))
    runs = {}
    for name, weight in (("b", 100), ("a", 100), ("h", 1000)):
        (tmp_path / name).mkdir()
        place = Place.sandbox(limits=Limits(cpu_weight=weight))
        runs[name] = rt.open_run(name, workdir=tmp_path / name, place=place)
    b, a, h = runs["b"], runs["a"], runs["h"]
    for hog in (a, h):
        assert f"{HOGS} busy" in _ev(hog, START_HOGS)
    _timed(b)  # (B's kernel starts; the first run warms)
    assert [_cpu_shares(rt, n) for n in "bah"] == [1024, 1024, 10240]
    equal, heavy, figures = [], [], []
    for _ in range(ROUNDS):  # (each loaded time against the unloaded ones either side)
        by_a = [_timed(b), _loaded(a, b, LOOP), _timed(b)]  # (alone, loaded, alone)
        by_h = [_timed(b, HEAVY_LOOP), _loaded(h, b, HEAVY_LOOP), _timed(b, HEAVY_LOOP)]
        equal.append(by_a[1] / statistics.mean([by_a[0], by_a[2]]))
        heavy.append(by_h[1] / statistics.mean([by_h[0], by_h[2]]))
        figures.append([round(t, 3) for t in (*by_a, *by_h)])
    said = (
        f"B's loop in s (alone, against A, alone; its quarter alone, against H, alone): {figures}"
    )
    assert statistics.median(equal) < EQUAL_AT_MOST, said
    assert statistics.median(heavy) > HEAVY_AT_LEAST, said
    assert statistics.median(heavy) > 1.5 * statistics.median(equal), said
