"""Parked calls: how a 2026-07-28 tool call asks the client's human (MCP `input_required`).

A 2026-07-28 request has no back channel: the server cannot send `elicitation/create` in
the middle of a call. Instead (SEP-2322, multi-round-trip requests) the call's response is
an `InputRequiredResult` carrying the question (`input_requests`) and an opaque
`requestState`; the client asks its human and sends the same `tools/call` again with the
answers (`input_responses`) and that state echoed back.

Two ways to serve that: re-run the tool from the start on every retry, answering its
questions from the state (the SDK's `MCPServer` resolvers do this), or keep the call
running and park it until the retry. Our calls cannot be re-run: a cell that asked from
inside its code has already run half its code, a write may have been half decided. So the
call keeps running on its thread, blocked in the question port, and this module holds it:
a `Park` per such call, found again by the id in its `requestState`.

Why the state cannot be forged or replayed: it is sealed by the SDK's `RequestStateBoundary`
(AES-256-GCM under a key derived from the server's secret, so authenticated as an HMAC
would be, and unreadable too) and bound to the method, the tool and a digest of the
arguments, which include the conversation's handle: a state minted for one conversation's
call does not open another's, a forged one does not open at all. What the seal cannot
stop - the same state sent twice - the park stops: each card is one round, and a round is
answered once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import secrets
import threading
import time
from dataclasses import dataclass, field

import mcp_types as types
from mcp.shared.exceptions import MCPError

from tether.call_scope import CallScope
from tether.json_types import JSONObject
from tether.questions import Answer, Card
from tether.serve.elicit import answer, form
from tether.tools.results import ToolResult

KEEP_FINISHED = 600.0  # a finished call waits this long for its retry (the SDK's state TTL)


@dataclass
class Pending:
    """One card of a parked call, waiting for the client's retry to answer it."""

    key: str  # its key in input_requests / input_responses
    card: Card
    answer: concurrent.futures.Future[Answer] = field(default_factory=concurrent.futures.Future)

    def settle(self, value: Answer) -> bool:
        """Answer the card once (a retry, a withdrawal, a timeout: whichever comes first)."""
        try:
            self.answer.set_result(value)
        except concurrent.futures.InvalidStateError:
            return False
        return True

    def request(self) -> types.ElicitRequest:
        message, schema = form(self.card)
        params = types.ElicitRequestFormParams(message=message, requested_schema=dict(schema))
        return types.ElicitRequest(params=params)


class Park:
    """A 2026-07-28 call that may stop to ask: it runs on, its cards wait for retries."""

    def __init__(
        self, conversation: str, tool: str, scope: CallScope, args: JSONObject | None = None
    ) -> None:
        self.id = "p-" + secrets.token_urlsafe(12)
        self.conversation = conversation
        self.tool = tool
        self.args: JSONObject = args or {}
        self.scope = scope
        self.loop = asyncio.get_running_loop()
        self.task: asyncio.Task[ToolResult] | None = None
        self.finished_at: float | None = None
        self._cards: asyncio.Queue[Pending] = asyncio.Queue()
        self._lock = threading.Lock()
        self.round = 0
        self.pending: Pending | None = None

    # ---- the question port's side (a call thread) ---------------------------------
    def ask(self, card: Card, timeout: float) -> Answer:
        pending = Pending(f"card-{card.number}", card)
        self.loop.call_soon_threadsafe(self._cards.put_nowait, pending)
        try:
            return pending.answer.result(timeout)
        except concurrent.futures.TimeoutError:
            pending.settle(Answer.timed_out("the client did not retry the call with an answer"))
            return pending.answer.result()

    def withdraw(self, number: int, reason: str) -> None:
        pending = self.pending
        if pending is not None and pending.card.number == number:
            pending.settle(Answer.withdrawn(reason))

    # ---- the handler's side (the event loop) --------------------------------------
    def state(self) -> str:
        """The plaintext of this round's requestState (the SDK's boundary seals it)."""
        return json.dumps({"park": self.id, "round": self.round, "conversation": self.conversation})

    async def next(self) -> ToolResult | Pending:
        """The call's result, or the next card it waits on (a new round)."""
        assert self.task is not None
        getter = asyncio.ensure_future(self._cards.get())
        try:
            await asyncio.wait({self.task, getter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
        if self.task.done():  # (a card raced with the end: the call no longer waits on it)
            return self.task.result()
        pending = getter.result()
        with self._lock:
            self.round += 1
            self.pending = pending
        return pending

    def answer_round(self, round_: int, response: types.ElicitResult | None) -> None:
        """The retry's answer to round `round_`; a round already answered is a replay."""
        with self._lock:
            pending = self.pending
            if pending is None or round_ != self.round or response is None:
                raise MCPError(
                    code=types.INVALID_PARAMS,
                    message=(
                        f"this requestState (round {round_}) was already answered: retry with "
                        "the requestState of the latest input_required result"
                    ),
                )
            self.pending = None
        pending.settle(answer(pending.card, response))

    def input_required(self, pending: Pending) -> types.InputRequiredResult:
        return types.InputRequiredResult(
            input_requests={pending.key: pending.request()}, request_state=self.state()
        )


class Parking:
    """The parked calls of one server, by id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parks: dict[str, Park] = {}

    def add(self, park: Park) -> None:
        now = time.monotonic()
        with self._lock:
            stale = [
                p.id
                for p in self._parks.values()
                if p.finished_at is not None and now - p.finished_at > KEEP_FINISHED
            ]
            for key in stale:
                del self._parks[key]
            self._parks[park.id] = park

    def drop(self, park: Park) -> None:
        with self._lock:
            self._parks.pop(park.id, None)

    def find(self, state: str, conversation: str, tool: str) -> tuple[Park, int]:
        """The park and round a (verified) requestState names, for this call."""
        try:
            claims = json.loads(state)
            park_id, round_, owner = claims["park"], int(claims["round"]), claims["conversation"]
        except (ValueError, KeyError, TypeError):
            raise _refused("it is not one this server minted") from None
        with self._lock:
            park = self._parks.get(park_id)
        if park is None:
            raise _refused("its call is no longer parked here (answered, or the server restarted)")
        if owner != conversation or park.conversation != conversation or park.tool != tool:
            raise _refused("it belongs to another conversation's call")
        return park, round_

    def __len__(self) -> int:
        return len(self._parks)


def _refused(why: str) -> MCPError:
    return MCPError(
        code=types.INVALID_PARAMS,
        message=(
            f"requestState refused: {why}; call the tool again without requestState to start "
            "a new call"
        ),
    )
