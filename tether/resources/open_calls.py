"""`OpenCalls`: the calls a resource actor holds, and where each one's reply goes.

A resource actor answers every call exactly once: now, later, or with an error when its
deadline passed or the actor went away. This table is what makes "once" true: a call is
entered when the actor takes it, and leaves when it is settled (the first reply wins; a
second finds nothing and is dropped). Calls that arrive before the resource is ready wait
in `queued` (delivered in order once it is), and a cancel can overtake its call (it came
on another connection, or in the same read): it is kept for that call, bounded, so a
cancel for a call that never comes cannot grow the actor.

`reply_to` is the caller's address as the actor's transport knows it (a thespian address
or a call channel's peer): the table only keeps it beside the call, so its type is the
table's parameter `R`.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from tether.messages.calls import Call

R = TypeVar("R")  # where a reply goes

CANCELS_KEPT = 64  # cancels kept for calls that have not arrived yet


class OpenCalls(Generic[R]):
    def __init__(self) -> None:
        self.open: dict[str, tuple[Call, R]] = {}  # call_id -> (call, reply_to)
        self.queued: list[tuple[Call, R]] = []  # taken before the resource was ready
        self._cancelled_ahead: dict[str, str] = {}  # call id -> why, for a call not yet here

    def __contains__(self, call_id: str) -> bool:
        return call_id in self.open

    def enter(self, call: Call, reply_to: R) -> None:
        """`call` is open: its reply goes to `reply_to`, once."""
        self.open[call.call_id] = (call, reply_to)

    def settle(self, call_id: str) -> tuple[Call, R] | None:
        """The call and its reply_to, leaving the table; None when it was settled already
        (or expired): that reply is dropped."""
        return self.open.pop(call_id, None)

    def get(self, call_id: str) -> Call | None:
        entry = self.open.get(call_id)
        return entry[0] if entry is not None else None

    def calls(self) -> list[Call]:
        return [call for call, _ in self.open.values()]

    def queue(self, call: Call, reply_to: R) -> None:
        self.queued.append((call, reply_to))

    def take_queued(self) -> list[tuple[Call, R]]:
        queued, self.queued = self.queued, []
        return queued

    def unqueue(self, call_id: str) -> bool:
        """Drop a queued call (cancelled before anything of it ran); False if none was."""
        for item in self.queued:
            if item[0].call_id == call_id:
                self.queued.remove(item)
                return True
        return False

    def cancel_ahead(self, call_id: str, reason: str) -> None:
        """A cancel for a call not here yet: kept (the newest CANCELS_KEPT) for its arrival."""
        self._cancelled_ahead[call_id] = reason
        while len(self._cancelled_ahead) > CANCELS_KEPT:
            del self._cancelled_ahead[next(iter(self._cancelled_ahead))]

    def cancelled_ahead(self, call_id: str) -> str | None:
        """Why `call_id` was cancelled before it arrived (None if it was not); asked once."""
        return self._cancelled_ahead.pop(call_id, None)

    def expired(self, now: float) -> list[Call]:
        """The open calls past their deadline (the actor fails them); queued ones past it
        are dropped here, as their caller has gone and nothing of them ran."""
        self.queued = [(c, r) for c, r in self.queued if not (c.deadline and now > c.deadline)]
        return [call for call, _ in self.open.values() if call.deadline and now > call.deadline]

    @property
    def busy(self) -> bool:
        return bool(self.open or self.queued)

    @property
    def pending(self) -> int:
        return len(self.open) + len(self.queued)
