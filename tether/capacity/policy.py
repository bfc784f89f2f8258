"""The governor's decision, as a pure function: what to stop to free `need` bytes.

Supervision keeps restarts in one table (tether.supervisors.policy); capacity keeps its
evictions in one too. From the usage records of the tree (tether.capacity.usage):

    decide(records, need, now, settings) -> Plan(stop, freed, enough)

in this order, each tier least recently used first:
1. spares (the kernel pool): nobody's, and started again when one is taken;
2. stateless resources (language servers, checkers, parsers, git): a call restarts them,
   and that call's result says it was a cold start;
3. resources that hold a conversation's state (kernels, debug sessions), only if the host
   opted in (`evict_idle_kernels_after`) and only those idle at least that long: their
   next result says the state was lost.
Never a resource with a call in flight (`busy`), never one that is not `evictable`
(vibe workers are running work; supervisors are the tree), never one just used
(`min_idle`: stopping a server that answered a moment ago only makes it start again).
What stopping a resource frees is what it holds (its record's bytes) and what is still
reserved for its start beyond that (`reserved`: the governor's admission holds a new
resource's expected size until it is seen to hold it), which goes with it.
A plan that cannot free `need` says so (`enough` False): admission refuses the new
resource rather than stopping half of what it would have to; a tree already over its
budget (`partial`) stops all it may.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from tether.capacity.usage import UsageRecord

MIN_IDLE = 0.5  # s since its last call before a stateless resource may be stopped


@dataclass(frozen=True)
class Settings:
    """evict_idle_kernels_after: seconds a state-holding resource must be idle before it
    may be stopped to make room (None: never; `Runtime.start(evict_idle_kernels_after=N)`
    takes minutes). min_idle: seconds since a stateless resource's last call."""

    evict_idle_kernels_after: float | None = None
    min_idle: float = MIN_IDLE

    def __post_init__(self) -> None:
        after = self.evict_idle_kernels_after
        if after is not None and (
            isinstance(after, bool) or not isinstance(after, int | float) or after < 0
        ):
            raise ValueError(
                f"evict_idle_kernels_after must be a number of minutes >= 0, or None to "
                f"never stop a conversation's state, got {after!r}"
            )


@dataclass(frozen=True)
class Plan:
    stop: tuple[UsageRecord, ...]
    freed: int
    enough: bool


def tier(rec: UsageRecord, now: float, settings: Settings) -> int | None:
    """Which tier `rec` is in (0 first), or None if it must not be stopped now."""
    if rec.busy or not rec.evictable:
        return None
    idle = now - rec.last_use
    if rec.spare:
        return 0
    if not rec.holds_state:
        return 1 if idle >= settings.min_idle else None
    after = settings.evict_idle_kernels_after
    return 2 if after is not None and idle >= after else None


def candidates(
    records: Iterable[UsageRecord], now: float, settings: Settings, protect: Collection[str] = ()
) -> list[UsageRecord]:
    """Everything that may be stopped now, in the order it should go."""
    ranked = []
    for rec in records:
        rank = tier(rec, now, settings)
        if rank is not None and rec.name not in protect:
            ranked.append((rank, rec.last_use, rec.name, rec))
    return [rec for *_, rec in sorted(ranked, key=lambda r: r[:3])]


def decide(
    records: Iterable[UsageRecord],
    need: int,
    now: float,
    settings: Settings,
    protect: Collection[str] = (),
    partial: bool = False,
    reserved: Mapping[str, int] | None = None,
) -> Plan:
    """The fewest stops, in candidate order, that free `need` bytes (none if need <= 0).
    `protect`: names that must stay (the resource the call is for). `reserved`: by name,
    what is still held for a resource's start beyond its bytes (stopping it frees both).
    Where not enough may go: no stops (admission refuses instead), or with `partial` all
    that may (the tree is over its budget already: whatever helps)."""
    if need <= 0:
        return Plan((), 0, True)
    held_for = reserved or {}
    stop: list[UsageRecord] = []
    freed = 0
    for rec in candidates(records, now, settings, protect):
        if freed >= need:
            break
        stop.append(rec)
        freed += rec.bytes + held_for.get(rec.name, 0)
    if freed < need:
        return Plan(tuple(stop), freed, False) if partial else Plan((), 0, False)
    return Plan(tuple(stop), freed, True)
