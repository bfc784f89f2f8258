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
and only what outruns it meets the ceiling. The others (a language server, a project
checker, a vibe worker, a debug adapter and the program it debugs) poll nothing: their ceiling is their kind
config's `memory_ceiling_mb` (`configured`, DEFAULT_MB otherwise; 0: none). A node
process under a ceiling also gets a V8 heap limit inside it (`node_heap_mb`): V8 then
fails its own allocation ("JavaScript heap out of memory") before the kernel has to act.

What the resource says after such a death is `Ceiling.death_note(output)`: the OOM kill
the cgroup counted, or (an rlimit, a V8 heap limit) the out-of-memory words the process
printed as its allocation failed. Every note starts with OVER_WORDS, so a successor (a
restarted language server) can find it in its predecessor's end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

from tether import cgroups
from tether.capacity.measure import tree_cgroup
from tether.capacity.usage import MIB
from tether.cgroups import Cgroup, CgroupError
from tether.json_types import JSONObject, JSONValue
from tether.places.place import Limits

OVER_POLLED = 2  # a resource's ceiling, as a multiple of the limit it polls itself
# what RLIMIT_DATA counts beyond a process's resident memory (address space it maps
# writable and never touches: thread stacks, malloc arenas), added to an rlimit only
DATA_SLACK = 512 * MIB
V8_SLACK = 1024 * MIB  # RLIMIT_DATA V8 maps for itself (its code range) beyond the heap
# the ceilings of the kinds that poll nothing themselves, MiB (a kind config's
# memory_ceiling_mb overrides): generous, since they are a runaway's bound, not a budget
# (a language server on a large project holds 1-2 GiB; tsserver's own default
# maxTsServerMemory is 3072 MiB; a worker runs builds and test suites)
DEFAULT_MB = {
    "language_server": 4096,
    "checker": 4096,
    "vibe_worker": 8192,
    "debug_session": 8192,
}
MIN_MB = 16  # below it nothing starts at all (a ceiling of 1 is a typo for 1024)
HEAP_SHARE = 0.75  # of a node process's ceiling, its V8 old-space limit
OVER_WORDS = "it went over its memory limit"  # the first words of every death note
# what a process prints as an allocation fails at an rlimit or a V8 heap limit (Python,
# node/V8, glibc's strerror, C++, Go; node's worker thread at its heap limit, which ends
# the thread and not the process: ServerRow.broken_log)
OOM_WORDS = (
    "MemoryError",
    "out of memory",
    "Cannot allocate memory",
    "bad_alloc",
    "Allocation failed",
    "ERR_WORKER_OUT_OF_MEMORY",
)


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

    def death_note(self, output: str = "") -> str:
        """What a death of the resource says about its ceiling ("" if it had nothing to do
        with it, as far as anyone can tell). `output`: what the process printed last (its
        stderr tail), where an allocation that failed at an rlimit or a V8 heap limit says so."""
        if self.hit():
            return (
                f"{OVER_WORDS} (a ceiling of {self.limit // MIB} MiB) and "
                f"the kernel's OOM killer stopped it ({self.how})"
            )
        said = out_of_memory_line(output)
        if said and self.limit:
            return (
                f"{OVER_WORDS} (a ceiling of {self.limit // MIB} MiB, {self.how}) and an "
                f"allocation past it failed: {said}"
            )
        return ""

    def release(self) -> None:
        """The resource ended: remove its cgroup (if its processes are gone; else the next
        start's reaper removes it once empty)."""
        if self.cgroup is not None:
            self.cgroup.remove()

    def to_wire(self) -> JSONObject:
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


def out_of_memory_line(output: str) -> str:
    """The last line of `output` that says an allocation failed (OOM_WORDS), cut to 200
    characters; "" if none does."""
    for line in reversed(output.splitlines()):
        if any(word in line for word in OOM_WORDS):
            return line.strip()[:200]
    return ""


def configured(kind: str, config: Mapping[str, JSONValue]) -> int:
    """The ceiling in bytes that a kind's config asks for (`memory_ceiling_mb`, else
    DEFAULT_MB[kind]; 0: no ceiling). A bad value is a ValueError saying what to write."""
    mb = config.get("memory_ceiling_mb", DEFAULT_MB.get(kind, 0))
    if isinstance(mb, bool) or not isinstance(mb, int | float) or (mb and mb < MIN_MB):
        raise ValueError(
            f"{kind}: memory_ceiling_mb must be 0 (no ceiling) or a number of MiB >= {MIN_MB}, "
            f"got {mb!r}; e.g. {{'memory_ceiling_mb': {DEFAULT_MB.get(kind, 4096)}}}"
        )
    return int(mb * MIB)


def node_heap_mb(limit: int) -> int:
    """The V8 old-space limit (`--max-old-space-size`, MiB) for a node process under a
    ceiling of `limit` bytes: HEAP_SHARE of it, so V8's code, its young generation and the
    buffers outside its heap still fit under the ceiling. The limit is per isolate: a
    server with a worker thread (basedpyright's checker) has two such heaps, and what
    bounds their sum is the ceiling itself (the rlimit, with V8_SLACK, or the cgroup)."""
    return max(int(limit * HEAP_SHARE) // MIB, 8)


class ResourceCeiling:
    """The ceiling of one resource that polls nothing itself (a language server, a project
    checker, a vibe worker, a debug adapter and its program), across the processes it starts in turn: the
    kind config's limit (`configured`), put on each new process (`put`), released when that
    process is replaced or the resource ends. Off the host (a sandbox or prefix place)
    nothing is put: the place's own cgroup bounds the whole run."""

    def __init__(self, kind: str, config: Mapping[str, JSONValue]) -> None:
        self.kind = kind
        self.limit = configured(kind, config)
        self.current: Ceiling | None = None

    def node_options(self) -> list[str]:
        """The V8 heap flag for a node process under this ceiling ([] without one)."""
        return [f"--max-old-space-size={node_heap_mb(self.limit)}"] if self.limit else []

    def put(self, pids: list[int], name: str, v8: bool = False, on_host: bool = True) -> None:
        """Put the processes just started (leader first) under the ceiling; `v8`: a node
        (or Deno) process, which maps V8_SLACK more than its heap."""
        self.release()
        if self.limit and pids and on_host:
            slack = V8_SLACK if v8 else DATA_SLACK
            self.current = apply(pids, self.limit, name, slack=slack)

    def note(self, output: str = "") -> str:
        """The death note of the current process (see Ceiling.death_note)."""
        return self.current.death_note(output) if self.current is not None else ""

    def how(self) -> str:
        """For health: the ceiling's kind and where ("" without one)."""
        return self.current.how if self.current is not None else ""

    def release(self) -> None:
        if self.current is not None:
            self.current.release()
            self.current = None
