"""The usage record: what one resource costs and whether it may be stopped to make room.

Every health node of an actor carries one (`health_node()["usage"]`), built here and only
here, so the governor (tether.capacity.policy) reads the same fields whoever reports them:

    kind         the resource kind ("language_server", "kernel", "kernel_pool", ...)
    bytes        the proportional set size (PSS) of the actor's process and of every
                 process it owns: shared pages split between their sharers, so the sum
                 over the tree is the tree's charge without double counting (the OOM
                 killer charges a process its resident pages; a cgroup its pages, once)
    last_use     time.monotonic() of its last call (CLOCK_MONOTONIC is machine-wide on
                 Linux, so the host compares it with its own clock)
    holds_state  stopping it loses a conversation's state (a kernel, a debug session)
    busy         a call is in flight (or queued): it is never stopped then
    spare        it holds started spares only (the kernel pool): the first to go
    evictable    it may be stopped at all (a vibe worker is running work; a supervisor
                 is the tree itself)
    stopping     its health node says it is stopping (set by `records` from the node's
                 state, not by the actor): an evicted resource still listed, not yet a
                 successor under its name

The traits (holds_state, spare, evictable) and a kind's expected size are data, in
`KIND_TRAITS`; a kind's config may override them (`KindSpec.config["capacity"]`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass

import psutil

from tether.health_node import HealthNode, NodeState
from tether.json_types import JSONObject, JSONValue

MIB = 2**20
# the first words of an evicted resource's end (Start.previous_end); its successor's first
# result carries `evicted_note` (tether.capacity.governor stops it with these words)
EVICTED = "stopped to keep the tree's memory budget"


@dataclass(frozen=True)
class KindTraits:
    """What the governor must know of a kind before it has seen one: its expected size
    (admission reserves it) and whether stopping one loses state, frees a spare, or may
    be done at all."""

    expected_bytes: int
    holds_state: bool = False
    spare: bool = False
    evictable: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.expected_bytes, int) or self.expected_bytes < 0:
            raise ValueError(
                f"KindTraits.expected_bytes must be an int >= 0, got {self.expected_bytes!r}"
            )

    def override(self, given: Mapping[str, JSONValue] | None) -> KindTraits:
        """These traits with a kind config's `capacity` entries applied (expected_mb,
        holds_state, spare, evictable); an unknown entry is an error that names it."""
        if not given:
            return self
        known = {"expected_mb", "holds_state", "spare", "evictable"}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValueError(
                f"unknown capacity setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        mb = given.get("expected_mb")
        if mb is not None and not isinstance(mb, int | float):
            raise ValueError(f"capacity setting expected_mb must be a number, got {mb!r}")
        return KindTraits(
            expected_bytes=int(mb * MIB) if mb is not None else self.expected_bytes,
            holds_state=bool(given.get("holds_state", self.holds_state)),
            spare=bool(given.get("spare", self.spare)),
            evictable=bool(given.get("evictable", self.evictable)),
        )


# Expected sizes measured on examples/sample_project (PSS of the actor process and what it
# owns, after a hover or a cell; issue 23, benchmarks/capacity.py reprints them): a
# language server is its actor plus the server (basedpyright ~190 MiB, tsserver ~190 MiB).
KIND_TRAITS: dict[str, KindTraits] = {
    "language_server": KindTraits(200 * MIB),
    "checker": KindTraits(150 * MIB),
    "parser": KindTraits(40 * MIB),
    "git": KindTraits(20 * MIB),
    "kernel": KindTraits(100 * MIB, holds_state=True),
    "kernel_pool": KindTraits(90 * MIB, spare=True),
    "debug_session": KindTraits(80 * MIB, holds_state=True),
    "vibe_worker": KindTraits(60 * MIB, evictable=False),
}
DEFAULT_TRAITS = KindTraits(30 * MIB)  # a kind not in the table (the test kinds)
TREE_TRAITS = KindTraits(10 * MIB, evictable=False)  # root, supervisors, runs: the tree itself


def traits_of(kind: str, config: Mapping[str, JSONValue] | None = None) -> KindTraits:
    """The traits of `kind`, with its config's `capacity` overrides."""
    base = KIND_TRAITS.get(kind, DEFAULT_TRAITS)
    given = (config or {}).get("capacity")
    return base.override(given if isinstance(given, Mapping) else None)


@dataclass(frozen=True)
class UsageRecord:
    name: str
    kind: str
    bytes: int
    last_use: float
    holds_state: bool
    busy: bool
    spare: bool = False
    evictable: bool = True
    stopping: bool = False

    @classmethod
    def build(
        cls,
        name: str,
        kind: str,
        pids: Iterable[int],
        last_use: float,
        busy: bool,
        traits: KindTraits,
    ) -> UsageRecord:
        return cls(
            name=name,
            kind=kind,
            bytes=pss_bytes(pids, steady=(os.getpid(),)),  # (built in the actor's process)
            last_use=last_use,
            holds_state=traits.holds_state,
            busy=busy,
            spare=traits.spare,
            evictable=traits.evictable,
        )

    def to_wire(self) -> JSONObject:
        return asdict(self)

    @classmethod
    def from_wire(cls, data: Mapping[str, JSONValue]) -> UsageRecord:
        return cls(
            name=str(data["name"]),
            kind=str(data["kind"]),
            bytes=int(_number(data["bytes"])),
            last_use=float(_number(data["last_use"])),
            holds_state=bool(data["holds_state"]),
            busy=bool(data["busy"]),
            spare=bool(data.get("spare", False)),
            evictable=bool(data.get("evictable", True)),
            stopping=bool(data.get("stopping", False)),
        )

    @property
    def run_id(self) -> str:
        """The run it belongs to ("" for a shared resource): health names a run's
        resources "run:<id>/<kind>:<key>"."""
        head, sep, _ = self.name.partition("/")
        return head[len("run:") :] if sep and head.startswith("run:") else ""


def _number(value: JSONValue) -> int | float | str:
    """A field as int() and float() take it (the wire carries numbers); TypeError else."""
    if isinstance(value, int | float | str):
        return value
    raise TypeError(f"not a number: {value!r}")


# The tree's own processes (thespian's admin and logger, each actor's process) hold no
# resource and barely grow, and each was forked from the host: reading its smaps_rollup
# walks every mapping it inherited (~0.8 ms here, against ~0.2 for a fresh Python), at
# every sample of every actor. Their PSS is read again after STEADY_PERIOD seconds.
STEADY_PERIOD = 30.0
_steady: dict[int, tuple[float, int]] = {}  # pid -> (when read, PSS)


def pss_bytes(pids: Iterable[int], steady: Collection[int] = ()) -> int:
    """The PSS of these processes, each counted once (RSS where /proc/<pid>/smaps_rollup
    cannot be read); those in `steady` (tree processes) read at most every STEADY_PERIOD.
    Owners list their descendants themselves (ProcessActor.owned_pids): walking them
    again here would cost a scan of /proc per process (~10 ms each)."""
    total = 0
    now = time.monotonic()
    for pid in dict.fromkeys(pids):
        known = _steady.get(pid) if pid in steady else None
        if known is not None and now - known[0] < STEADY_PERIOD:
            total += known[1]
            continue
        with contextlib.suppress(psutil.Error):
            found = _pss(psutil.Process(pid))
            total += found
            if pid in steady:
                _steady[pid] = (now, found)
    if len(_steady) > 256:  # (pids of trees gone long ago)
        for pid in [p for p, (when, _) in _steady.items() if now - when >= STEADY_PERIOD]:
            del _steady[pid]
    return total


def _pss(proc: psutil.Process) -> int:
    try:
        return int(proc.memory_full_info().pss)
    except (psutil.AccessDenied, AttributeError):
        return int(proc.memory_info().rss)


def records(tree: HealthNode) -> list[UsageRecord]:
    """Every usage record of a health tree (rt.health()), depth first, each marked
    `stopping` as its node's state says."""
    found: list[UsageRecord] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        usage = node.get("usage")
        if isinstance(usage, Mapping):
            found.append(
                UsageRecord.from_wire(
                    {**usage, "stopping": node.get("state") == NodeState.STOPPING}
                )
            )
        stack.extend(reversed(node.get("children", [])))
    return found


def by_kind(found: Iterable[UsageRecord]) -> dict[str, int]:
    """Bytes per kind (the tree's own nodes as "tree")."""
    totals: dict[str, int] = {}
    for rec in found:
        kind = "tree" if rec.kind in ("root", "supervisor", "runs", "run") else rec.kind
        totals[kind] = totals.get(kind, 0) + rec.bytes
    return dict(sorted(totals.items()))


def evicted_note(name: str, previous_end: str, holds_state: bool) -> str:
    """What the first result of a resource started after its predecessor was evicted says."""
    lost = (
        "this call ran on a fresh one: its state (variables, imports, data, breakpoints) was lost"
        if holds_state
        else "this call started it again (a cold start: the first answers may be slower)"
    )
    return f"{name} was {previous_end}; {lost}"
