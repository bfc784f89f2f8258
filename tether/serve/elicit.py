"""`ask_user` and permission cards over MCP: a question port that asks by elicitation.

Each conversation's run gets an `ElicitPort`. While a call of that conversation is being
served on a 2025-11-25 session whose client declared the `elicitation` capability, the
port holds that call's session: a card raised during the call (ask_user, a permission
prompt, a card from inside a running cell) becomes an `elicitation/create` request on it
(related to the call, so it rides the call's stream) and the client's reply is the answer.

A 2026-07-28 request has no back channel: there, while a call of a client that declared
`elicitation` runs, the port holds that call's `parking.Park`, and a card is handed to it
(the call answers `input_required`, parked until the client retries with the answer).

With neither in flight - a client without elicitation, a card raised between calls - no
human is connected: ask_user fails at once and an approval is denied (tether.questions:
fail closed), never blocking on nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, TypedDict

import mcp_types as types
from mcp.server.session import ServerSession

from tether.questions import ALLOW, DENY, Answer, Card, CardKind

NO_CHOICE = "(none of these)"


class CallContext(Protocol):
    """What this module reads of a call's context (the SDK's `ServerRequestContext`)."""

    @property
    def session(self) -> ServerSession: ...

    @property
    def protocol_version(self) -> str: ...

    @property
    def request_id(self) -> types.RequestId | None: ...


@dataclass
class _Channel:
    session: ServerSession  # the call's
    request_id: types.RequestId | None
    loop: asyncio.AbstractEventLoop


class Parked(Protocol):
    """A 2026-07-28 call that hands its cards to the client's retry (`parking.Park`)."""

    def ask(self, card: Card, timeout: float) -> Answer: ...

    def withdraw(self, number: int, reason: str) -> None: ...


# what a client declares to be asked (checked on every call: built once)
ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())
MODERN = "2026-07-28"  # the first protocol version without server-to-client requests


def can_park(ctx: CallContext) -> bool:
    """Whether this call may answer `input_required`: a 2026-07-28 request of a client that
    declared elicitation (its capabilities ride every request there)."""
    session = ctx.session
    return (
        str(ctx.protocol_version) >= MODERN
        and not session.can_send_request
        and session.check_client_capability(ELICITATION)
    )


def can_be_asked(ctx: CallContext) -> bool:
    """Whether a card raised in this client's calls reaches a human: a session that can send
    `elicitation/create` to a client that declared it, or a call that may park. SPEC lists
    `ask_user` only where a port can answer, so a client that can do neither is not shown it."""
    return can_park(ctx) or can_elicit(ctx.session)


def can_elicit(session: ServerSession) -> bool:
    """Whether this request's session can send `elicitation/create` to a client that
    declared it (2025-11-25)."""
    return bool(session.can_send_request and session.check_client_capability(ELICITATION))


class ElicitPort:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: list[_Channel | Parked] = []

    @contextlib.contextmanager
    def serving(self, ctx: CallContext) -> Iterator[None]:
        """While a call is served: its session is where this conversation's cards go."""
        session = ctx.session
        if not can_elicit(session):
            yield
            return
        channel = _Channel(session, ctx.request_id, asyncio.get_running_loop())
        with self._lock:
            self._channels.append(channel)
        try:
            yield
        finally:
            with self._lock:
                self._channels.remove(channel)

    @contextlib.contextmanager
    def parking(self, park: Parked) -> Iterator[None]:
        """While a parked call runs (its rounds and the gaps between them): its cards go
        to it."""
        with self._lock:
            self._channels.append(park)
        try:
            yield
        finally:
            with self._lock:
                self._channels.remove(park)

    def _channel(self) -> _Channel | Parked | None:
        with self._lock:
            return self._channels[-1] if self._channels else None

    # ---- QuestionPort -------------------------------------------------------------
    def human_connected(self) -> bool:
        return self._channel() is not None

    def has_target_space(self) -> bool:
        return True  # the MCP host's UI; whether someone is there is human_connected

    def ask(self, card: Card, timeout: float) -> Answer:
        channel = self._channel()
        if channel is None:
            return Answer.timed_out("no MCP client that can answer is connected")
        if not isinstance(channel, _Channel):
            return channel.ask(card, timeout)
        message, schema = form(card)
        coroutine = channel.session.elicit_form(message, dict(schema), channel.request_id)
        future = asyncio.run_coroutine_threadsafe(coroutine, channel.loop)
        try:
            result = future.result(timeout)
        except Exception as e:  # noqa: BLE001 - a timeout, a closed stream: not answered
            future.cancel()
            return Answer.timed_out(f"the MCP client did not answer ({type(e).__name__})")
        return answer(card, result)

    def withdraw(self, number: int, reason: str) -> None:
        """The call that asked was cancelled: a parked card is taken back (an elicitation
        in a session ends with its call's stream)."""
        with self._lock:
            parks = [c for c in self._channels if not isinstance(c, _Channel)]
        for park in parks:
            park.withdraw(number, reason)


class FormField(TypedDict, total=False):
    type: str
    title: str
    enum: list[str]
    description: str


class FormSchema(TypedDict):
    """An elicitation's `requestedSchema`: a flat object of primitive fields."""

    type: str
    properties: dict[str, FormField]
    required: list[str]


def form(card: Card) -> tuple[str, FormSchema]:
    """The card as an elicitation message and its (flat, primitive-only) schema."""
    message = f"{card.context}\n\n{card.question}" if card.context else card.question
    if card.kind is CardKind.PERMISSION:
        message = f"{message}\n\n(tool {card.tool}: {card.arguments})"
    properties: dict[str, FormField] = {}
    required: list[str] = []
    if card.options:
        labels = [o.label for o in card.options]
        hints = "; ".join(f"{o.label}: {o.description}" for o in card.options if o.description)
        choice = FormField(
            type="string",
            title="Choice",
            enum=labels if not card.allow_free_text else [*labels, NO_CHOICE],
        )
        if hints:
            choice["description"] = hints
        properties["choice"] = choice
        if not card.allow_free_text:
            required.append("choice")
    if card.allow_free_text or not card.options:
        properties["text"] = FormField(type="string", title="Answer")
    return message, FormSchema(type="object", properties=properties, required=required)


def answer(card: Card, result: types.ElicitResult) -> Answer:
    """The client's reply as an Answer. Declining a permission is a deny; declining or
    dismissing a question is a skip (SPEC: go on under a stated assumption)."""
    if result.action != "accept":
        return Answer.answered([DENY]) if card.kind is CardKind.PERMISSION else Answer.skipped()
    content = result.content or {}
    choice = content.get("choice")
    choices = [str(choice)] if choice and choice != NO_CHOICE else []
    if card.kind is CardKind.PERMISSION and not choices:
        choices = [ALLOW if str(content.get("text", "")).lower().startswith("y") else DENY]
    return Answer.answered(choices, text=str(content.get("text", "") or ""))
