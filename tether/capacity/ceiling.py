"""A memory ceiling the kernel enforces for one resource's processes (a kernel's, first).

The governor samples every SAMPLE_PERIOD s; a cell that allocates gigabytes in a second
outruns any sampling (and a kernel actor's own polled limit). So a resource that can grow
on its own gets a ceiling the Linux kernel keeps, of one of two kinds:

- a child memory cgroup (`tether.cgroups`, the one module that makes cgroups), where
  the tree runs in a memory cgroup with a limit (its box: `tether.capacity.measure`) that
  this user may divide. At the ceiling the OOM killer acts inside that child only: the
  runaway kernel dies, and nothing else in the tree is touched. A tree without a box of
  its own never divides the cgroup it happens to be in (it is someone else's).
- RLIMIT_DATA otherwise, set on the running process with prlimit(2) (its children
  inherit it): private writable memory past it fails to allocate (Python raises
  MemoryError in the cell; the kernel lives on). RLIMIT_DATA, not RLIMIT_AS: V8 (Deno,
  node) reserves tens of GiB of address space it never touches, which RLIMIT_AS counts
  and RLIMIT_DATA (Linux >= 4.7: writable private mappings) does not. V8 still maps
  its code range writable: `deno eval` fails to start ("Failed to reserve virtual memory
  for CodeRange") at 500 MiB of RLIMIT_DATA and starts at 600, and a `deno jupyter`
  kernel limited to 300 + 512 MiB after its start died (SIGTRAP) on its first cell while
  300 + 1024 MiB runs it (measured here, Deno 2), so a V8 process gets V8_SLACK on top
  (any other DATA_SLACK: an ipykernel's threads and malloc arenas map more than it uses).

A resource that also polls its own size (a kernel: `memory_limit_mb`) gets a ceiling of
OVER_POLLED times that limit: growth the poll sees in time ends in its graceful restart,
and only what outruns it meets the ceiling.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import psutil

from tether import cgroups
from tether.capacity.measure import tree_cgroup
from tether.capacity.usage import MIB
from tether.cgroups import Cgroup, CgroupError
from tether.places.place import Limits

OVER_POLLED = 2  # a resource's ceiling, as a multiple of the limit it polls itself
# what RLIMIT_DATA counts beyond a process's resident memory (address space it maps
# writable and never touches: thread stacks, malloc arenas), added to an rlimit only
DATA_SLACK = 512 * MIB
V8_SLACK = 1024 * MIB  # RLIMIT_DATA V8 maps for itself (its code range) beyond the heap


@dataclass
class Ceiling:
    limit: int  # bytes
    how: str  # "cgroup v1 /sys/fs/cgroup/memory/.../tether/kernel-123", "RLIMIT_DATA", ""
    cgroup: Cgroup | None = None
    baseline: int = 0  # its OOM kills when the ceiling was set

    def hit(self) -> bool:
        """Did the kernel's OOM killer act at this ceiling (a cgroup ceiling only: an
        rlimit makes the allocation fail instead, and the process says so itself)?"""
        return self.cgroup is not None and self.cgroup.oom_kills() > self.baseline

    def death_note(self) -> str:
        """What a death of the resource says about its ceiling ("" if it had nothing to do
        with it, as far as anyone can tell)."""
        if self.hit():
            return (
                f"it went over its memory limit (a ceiling of {self.limit // MIB} MiB) and "
                f"the kernel's OOM killer stopped it ({self.how})"
            )
        return ""

    def release(self) -> None:
        """The resource ended: remove its cgroup (if its processes are gone; else the next
        start's reaper removes it once empty)."""
        if self.cgroup is not None:
            self.cgroup.remove()

    def to_wire(self) -> dict[str, Any]:
        return {"limit": self.limit, "how": self.how or "none"}


def apply(
    pids: list[int], limit: int, name: str, use_cgroup: bool = True, slack: int = 0
) -> Ceiling:
    """Put `pids` (a resource's processes, its leader first) under a ceiling of `limit`
    bytes: a cgroup `name` where the tree has a box of its own (and `use_cgroup`), else
    RLIMIT_DATA on each, `slack` bytes higher (V8_SLACK for a V8 process)."""
    if use_cgroup and tree_cgroup() is not None:
        ceiling = _in_cgroup(pids, limit, name)
        if ceiling is not None:
            return ceiling
    data = limit + slack
    for pid in pids:
        with contextlib.suppress(psutil.Error, OSError, ValueError):
            psutil.Process(pid).rlimit(psutil.RLIMIT_DATA, (data, data))
    return Ceiling(limit, f"RLIMIT_DATA {data // MIB} MiB")


def _in_cgroup(pids: list[int], limit: int, name: str) -> Ceiling | None:
    # the memory controller only: in v1 the processes stay in their place's pids and cpu
    # cgroups (and under its limits); v2 has one directory for all of them
    wanted = Limits(memory_mb=max(limit // MIB, 1), pids=None, cpu_weight=None)
    try:
        made = cgroups.make(name, wanted, controllers=("memory",))
    except (OSError, ValueError):
        return None
    if made is None:
        return None
    try:
        for pid in pids:
            made.add(pid)
    except CgroupError:
        made.remove()
        return None
    return Ceiling(limit, str(made), made, made.oom_kills())
