"""The tree's charge and its budget: how much memory it holds, and how much it may.

The charge is counted the way the OOM killer will count it. Where the tree runs in a
memory cgroup with a limit (a container, a systemd unit, a cgroup made for it), that
cgroup's charge is the truth: page cache and tmpfs included, and the limit is where the
kernel starts killing (tether.cgroups). Elsewhere there is no box to read, and
the charge is the sum of the PSS of the tree's processes (shared pages split between
sharers, so nothing counts twice; page cache is not counted: the host's OOM killer takes
it back before it kills).

The budget is `Runtime.start(memory_budget=...)`: bytes (an int), or a fraction
(0 < f <= 1, a float) of the default base. The default base is the cgroup's limit where
there is one, else physical memory; with no budget given it is the cgroup's limit, or
DEFAULT_SHARE of physical memory (the host, its agent server and the kernel's caches
need the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

from tether.capacity.usage import MIB, pss_bytes
from tether.cgroups import Cgroup, CgroupError, of_process

DEFAULT_SHARE = 0.8  # of physical memory, where no cgroup limits the tree


@dataclass(frozen=True)
class Budget:
    bytes: int
    source: str  # in words: "memory_budget=2147483648", "the limit of cgroup v1 ...", ...

    def to_wire(self) -> dict[str, object]:
        return {"bytes": self.bytes, "source": self.source}


@dataclass(frozen=True)
class Charge:
    bytes: int
    source: str  # "cgroup v1 /sys/fs/cgroup/memory/x" or "PSS of 12 processes"


def tree_cgroup(pid: int | str = "self") -> Cgroup | None:
    """The memory cgroup that boxes the tree (that of `pid`, the host), if it has a limit:
    a cgroup without one is no box (every process of the machine is in some cgroup)."""
    cgroup = of_process(pid)
    if cgroup is None:
        return None
    try:
        return cgroup if cgroup.limit() is not None else None
    except (CgroupError, ValueError):
        return None


def resolve_budget(
    given: int | float | None,
    cgroup_limit: int | None,
    physical: int,
    where: str = "",
) -> Budget:
    """The budget from what the host gave (see the module doc); a bad value is a
    ValueError that shows the right forms. `where`: the cgroup, for the source's words."""
    base, base_source = (
        (cgroup_limit, f"the limit of {where or 'the cgroup'}")
        if cgroup_limit is not None
        else (physical, "physical memory")
    )
    if given is None:
        if cgroup_limit is not None:
            return Budget(cgroup_limit, base_source)
        return Budget(int(physical * DEFAULT_SHARE), f"{DEFAULT_SHARE:g} of physical memory")
    if isinstance(given, bool) or not isinstance(given, int | float):
        raise ValueError(_bad_budget(given))
    if isinstance(given, float):
        if not 0 < given <= 1:
            raise ValueError(_bad_budget(given))
        return Budget(int(base * given), f"memory_budget={given:g} of {base_source}")
    if given < 64 * MIB:
        raise ValueError(
            f"memory_budget={given!r} bytes is less than 64 MiB, too small for any tree; "
            "give bytes (e.g. 8 * 2**30) or a fraction (e.g. 0.5)"
        )
    return Budget(given, f"memory_budget={given}")


def _bad_budget(given: object) -> str:
    return (
        f"memory_budget must be bytes (an int, e.g. 8 * 2**30) or a fraction 0 < f <= 1 of "
        f"the cgroup's limit or physical memory (a float, e.g. 0.5), got {given!r}"
    )


def physical_memory() -> int:
    return int(psutil.virtual_memory().total)


def charge(cgroup: Cgroup | None, pids: Callable[[], Iterable[int]]) -> Charge:
    """The tree's charge now: the cgroup's, else the PSS of `pids()` (the tree's processes)."""
    if cgroup is not None:
        try:
            return Charge(cgroup.charge(), str(cgroup))
        except (CgroupError, ValueError):
            pass  # (gone, or unreadable now: fall back to counting the processes)
    listed = list(pids())
    return Charge(pss_bytes(listed), f"PSS of {len(listed)} processes")
