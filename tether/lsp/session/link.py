"""The wire to the server: our requests and their continuations, one deadline timer, and
the stall watch (`budgets.RequestWatch`).

`request` sends one JSON-RPC request for a call (or for the session itself: op None) with
a continuation run on its answer - unless the call settled meanwhile. Every request's
deadline is its call's, capped by the per-request budget; one timer (`Deadline`) is armed
for the earliest deadline of a request or a call (`OpTable.earliest`), and `expire`
abandons the requests past theirs (telling the server). A second timer (`Stall`) looks
whether the server still answers anyone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from tether.json_types import JSONValue
from tether.lsp.jsonrpc import JsonRpcClient, Notification, Pending, Response, ServerRequest
from tether.lsp.limits import LspLimits
from tether.lsp.session.budgets import Canceller, RequestWatch
from tether.lsp.session.table import Op, OpTable, SessionIO
from tether.lsp.session.timers import Deadline, Stall
from tether.protocol import FrameDecoder


class Sent(NamedTuple):
    """A request's context: the call it serves (None: the session's own), what runs on its
    answer, and when it was sent."""

    op: Op | None
    cont: Callable[[Response[Sent]], None]
    at: float


Answer = Response[Sent]  # a server's answer to one of our requests
Continuation = Callable[[Answer], None]  # what runs on it (the call it serves: its closure's)


class ServerLink:
    def __init__(
        self,
        io: SessionIO,
        now: Callable[[], float],
        limits: LspLimits,
        table: OpTable,
        canceller: Canceller | None = None,
    ) -> None:
        self.io, self.now, self.limits, self.table = io, now, limits, table
        self.rpc: JsonRpcClient[Sent] = JsonRpcClient()
        self.decoder = FrameDecoder()
        self.watch = RequestWatch(limits, now(), canceller)  # budgets, stalls
        self._armed: float | None = None
        self._stall_armed = False

    # --- out ------------------------------------------------------------------------------
    def request(
        self, method: str, params: JSONValue, deadline: float, op: Op | None, cont: Continuation
    ) -> int:
        sent = self.now()
        deadline = self.watch.deadline(method, sent, deadline)
        rid, data = self.rpc.request(
            method, params, deadline=deadline, context=Sent(op, cont, sent)
        )
        self.io.write(data)
        self.arm_before(deadline)
        self.arm_stall(sent + self.limits.stall_timeout)
        return rid

    def notify(self, method: str, params: JSONValue) -> None:
        self.io.write(self.rpc.notify(method, params))

    def cancel(self, rid: int) -> None:
        """Abandon one of our requests (it is no longer wanted) and tell the server."""
        p = self.rpc.pending.pop(rid, None)
        if p is not None:
            sent = p.context.at if p.context else self.now()
            self.io.write(self.watch.abandon(rid, p.method, sent))

    def cancel_op(self, op: Op) -> None:
        """Abandon every request of `op`."""
        for rid, p in list(self.rpc.pending.items()):
            if p.context and p.context.op is op:
                self.cancel(rid)

    def drain(self) -> None:
        self.rpc.drain()

    # --- in -------------------------------------------------------------------------------
    def receive(self, data: bytes) -> list[ServerRequest | Notification]:
        """Feed the server's bytes: answers run their continuations; the server's own
        requests and notifications are returned, in order. FramingError on corrupt bytes."""
        out: list[ServerRequest | Notification] = []
        for msg in self.decoder.feed(data):
            if isinstance(msg, dict) and "method" not in msg:
                self.watch.answered(msg.get("id"), self.now())
            ev = self.rpc.receive(msg)
            if isinstance(ev, Response):
                if ev.context is not None:
                    op, cont, sent = ev.context
                    if op is not None:
                        op.server_s += self.now() - sent
                    if op is None or self.table.live(op):
                        cont(ev)
            elif isinstance(ev, ServerRequest | Notification):
                out.append(ev)
        return out

    # --- deadlines ------------------------------------------------------------------------
    def arm_before(self, when: float) -> None:
        """Make sure the deadline timer fires by `when`."""
        if self._armed is None or when < self._armed:
            self._arm_at(when)

    def _arm_at(self, when: float) -> None:
        self._armed = when
        self.io.after(max(0.0, when - self.now()) + 0.001, Deadline())

    def rearm(self) -> None:
        """Arm the timer for the earliest deadline left, if any."""
        nxt = [d for d in (self.rpc.next_deadline(), self.table.earliest()) if d is not None]
        if nxt:
            self._arm_at(min(nxt))

    def fired(self) -> None:
        self._armed = None

    def expire(self, now: float) -> list[tuple[Pending[Sent], Op | None]]:
        """Abandon the requests past their deadline (telling the server); the others'
        budgets are renewed. Returns the abandoned ones, with their calls."""
        expired = self.rpc.expired(now)
        if expired:
            self._renew_budgets(now)
        out = []
        for p in expired:
            ctx = p.context
            op, sent = (ctx.op, ctx.at) if ctx else (None, now)
            self.io.write(self.watch.abandon(p.id, p.method, sent))
            out.append((p, op))
        return out

    def _renew_budgets(self, now: float) -> None:
        """Requests were just abandoned: those still pending were queued behind them in a
        server that answers in order, so their budgets count from now (never past their
        call's deadline) - one slow request must not use up everyone's budget."""
        for p in self.rpc.pending.values():
            op = p.context.op if p.context else None
            cap = op.deadline if op is not None else p.deadline
            p.deadline = max(p.deadline, self.watch.deadline(p.method, now, cap))

    # --- stalls ---------------------------------------------------------------------------
    def stalled(self) -> tuple[str, float | None]:
        """(why the server is stuck, or ""; when to look again, or None: nothing waits)."""
        waiting = [(p.context.at, p.method) for p in self.rpc.pending.values() if p.context]
        return self.watch.check(waiting, self.now())

    def on_stall_timer(self) -> None:
        self._stall_armed = False

    def arm_stall(self, at: float) -> None:
        if not self._stall_armed:
            self._stall_armed = True
            self.io.after(max(0.0, at - self.now()) + 0.01, Stall())
