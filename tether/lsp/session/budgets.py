"""Per-request budgets, cancellation, and the stall detector of one session (sans-io).

A language server actor is shared by every run on its root, and the servers here answer
one request at a time: a request that runs for a minute holds up everyone queued behind
it. So every request we send gets a budget (`LspLimits.request_budget`, or its call's own
deadline when that comes first); past it the request is abandoned: the server is told
(`$/cancelRequest`, plus a cancellation file for servers that poll one, see
`tether.lsp.cancellation`) and the call fails saying so.

A server that answers nothing at all - no response to any request, late ones included -
for `LspLimits.stall_timeout` while a request has waited that long is stuck for everyone:
`check` says so, and the session fails its calls and asks to be restarted. Abandoned
requests count as waiting until the next answer of any kind: the LSP says every request
gets an answer, cancelled or not, and a server that skips the cancelled ones still answers
the others, which clears them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from tether.lsp.jsonrpc import JsonRpcClient
from tether.lsp.limits import LspLimits

MAX_UNANSWERED = 1024  # abandoned requests remembered while nothing answers
EXEMPT = frozenset({"initialize"})  # bounded by the row's startup_timeout instead


class Canceller(Protocol):
    """What a server that polls for cancellation needs besides the message."""

    def cancel(self, rid: int) -> None: ...
    def forget(self, rid: int) -> None: ...


@dataclass
class RequestWatch:
    limits: LspLimits
    last_answer: float
    canceller: Canceller | None = None
    # abandoned requests not answered since: id -> (sent, method)
    unanswered: dict[int, tuple[float, str]] = field(default_factory=dict)
    cancelled: int = 0  # requests abandoned over the session's life

    def deadline(self, method: str, sent: float, deadline: float) -> float:
        """The request's own deadline: its call's, capped by the budget."""
        if method in EXEMPT:
            return deadline
        return min(deadline, sent + self.limits.request_budget)

    def abandon(self, rid: int, method: str, sent: float) -> bytes:
        """Give up on a request: what to write to the server to cancel it."""
        self.cancelled += 1
        if len(self.unanswered) < MAX_UNANSWERED:
            self.unanswered[rid] = (sent, method)
        if self.canceller is not None:
            self.canceller.cancel(rid)
        return JsonRpcClient.notify("$/cancelRequest", {"id": rid})

    def answered(self, rid: object, now: float) -> None:
        """Any response arrived (to a live request or an abandoned one)."""
        self.last_answer = now
        self.unanswered.clear()  # all were sent before now: the server is alive after them
        if self.canceller is not None and isinstance(rid, int):
            self.canceller.forget(rid)

    def check(self, waiting: Iterable[tuple[float, str]], now: float) -> tuple[str, float | None]:
        """(why the server is stuck, or ""; when to check again, or None: nothing waits).
        `waiting`: (sent, method) of the requests still pending."""
        waits = [*waiting, *self.unanswered.values()]
        if not waits:
            return "", None
        sent, method = min(waits)
        quiet_since = max(sent, self.last_answer)
        silent = now - quiet_since
        if silent < self.limits.stall_timeout:
            return "", quiet_since + self.limits.stall_timeout
        return (
            f"it stopped answering: no response to any request for {silent:.0f} s while "
            f"{len(waits)} waited (the oldest, {method}, sent {now - sent:.0f} s ago)",
            None,
        )
