"""The calls a session serves: each one's `Op`, the table that holds them by our own op id,
and how a call settles - exactly once, answered or failed, through the io port.

The parts that hold calls elsewhere (readiness: the calls before ready or warm; freshness:
the calls waiting for diagnostics) say so with `on_settle`, so a call that settles - a
deadline, a cancel, the server's death - leaves every list it was in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from tether.lsp.session.timers import SessionTimer
from tether.messages.calls import Call
from tether.messages.language_server_ops import (
    Hierarchy,
    LanguageServerOp,
    LanguageServerReply,
    Navigate,
)
from tether.messages.ops import op_name

REPLY_MARGIN = 0.05  # s: settle a call this long before its deadline so the reply arrives


class SessionIO(Protocol):
    """What the session's owner does for it (the actor, or a test's harness)."""

    def write(self, data: bytes) -> None: ...
    def after(self, seconds: float, tag: SessionTimer) -> None: ...
    def done(self, token: Call, reply: LanguageServerReply) -> None: ...
    def error(self, token: Call, code: str, message: str) -> None: ...


@dataclass
class Op:
    """One call being served: its op (`request`) and what serving it has learnt."""

    oid: int
    token: Call  # the call it serves, handed back to the io port when it settles
    request: LanguageServerOp
    deadline: float
    retried: bool = False
    server_s: float = 0.0  # time its requests spent with the server (write to parsed answer)
    server_edits: list[str] = field(default_factory=list)  # files the server changed meanwhile
    prepared: bool = False  # a rename: prepareRename said yes
    epoch: int = 0  # a rename: the edit_epoch the server computed it against
    deleted: list[str] = field(default_factory=list)  # a sync: written paths that are gone
    skipped: dict[str, str] = field(default_factory=dict)  # a sync: files refused, and why

    @property
    def op(self) -> str:
        """The op's name, for messages (a navigation: its action; a hierarchy: its action
        and direction)."""
        req = self.request
        if isinstance(req, Hierarchy):
            return f"{req.action} {req.direction}"
        return req.action if isinstance(req, Navigate) else op_name(req)


class OpTable:
    """The calls in progress; each settles once."""

    def __init__(self, io: SessionIO) -> None:
        self.io = io
        self.ops: dict[int, Op] = {}
        self._next_oid = 1
        self._settle_hooks: list[Callable[[Op], None]] = []

    def on_settle(self, forget: Callable[[Op], None]) -> None:
        """Call `forget(op)` whenever a call settles (a part that holds calls drops it)."""
        self._settle_hooks.append(forget)

    def add(self, request: LanguageServerOp, token: Call, deadline: float) -> Op:
        """A new call, due `REPLY_MARGIN` before the caller's own `deadline`."""
        op = Op(self._next_oid, token, request, deadline - REPLY_MARGIN)
        self._next_oid += 1
        self.ops[op.oid] = op
        return op

    def live(self, op: Op) -> bool:
        return op.oid in self.ops

    def of_token(self, token: Call) -> list[Op]:
        return [o for o in self.ops.values() if o.token is token]

    def due(self, now: float) -> list[Op]:
        return [o for o in self.ops.values() if o.deadline <= now]

    def earliest(self) -> float | None:
        return min((o.deadline for o in self.ops.values()), default=None)

    def done(self, op: Op, reply: LanguageServerReply) -> None:
        if self._settle(op):
            if op.server_s:  # how much of the call was the server's own time
                reply = replace(reply, server_ms=round(op.server_s * 1e3, 3))
            self.io.done(op.token, reply)

    def fail(self, op: Op, code: str, message: str) -> None:
        if self._settle(op):
            self.io.error(op.token, code, message)

    def fail_all(self, code: str, message: Callable[[Op], str]) -> None:
        for op in list(self.ops.values()):
            self.fail(op, code, message(op))

    def _settle(self, op: Op) -> bool:
        if self.ops.pop(op.oid, None) is None:
            return False  # settled already (a late answer, a second timer)
        for forget in self._settle_hooks:
            forget(op)
        return True
