"""The timers of a resource actor: what each wakeup is for, and that each is set once.

Thespian hands a wakeup's payload back as it was given, so a timer is a typed tag (a
frozen dataclass) dispatched with `match`; a subclass defines its own tags the same way
and arms them with `ResourceActor.after()`. The base's periodic timers (the deadline
sweep, the idle check, the retry of a call channel's writes) each need at most one
wakeup pending at a time, however often they are asked for: `Armed` keeps that.
"""

from __future__ import annotations

from dataclasses import dataclass

SWEEP_PERIOD = 0.5  # seconds between sweeps of open calls past their deadline
FLUSH_RETRY = 0.005  # seconds until a write a pipe or socket did not take is tried again


@dataclass(frozen=True)
class Sweep:
    """Fail the open calls past their deadline."""


@dataclass(frozen=True)
class Idle:
    """Stop if nothing came for the kind's idle_ttl."""


@dataclass(frozen=True)
class ChannelFlush:
    """Retry the replies a call channel's socket did not take."""


@dataclass(frozen=True)
class Delayed:
    """An injected delay is over: deliver the call now."""

    call_id: str


class Armed:
    """Which once-at-a-time timers have a wakeup pending."""

    def __init__(self) -> None:
        self._pending: set[type] = set()

    def arm(self, tag: Sweep | Idle | ChannelFlush) -> bool:
        """True when the actor should ask for a wakeup: none of this kind is pending."""
        if type(tag) in self._pending:
            return False
        self._pending.add(type(tag))
        return True

    def fired(self, tag: Sweep | Idle | ChannelFlush) -> None:
        self._pending.discard(type(tag))
