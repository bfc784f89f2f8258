"""The question port: how a run asks the human anything (ask_user, permission prompts).

A host that has a human in the loop implements `QuestionPort` and passes it to
`Runtime.open_run(..., question_port=port)`. Both ask_user questions and the approval
guardrail's "may I do this?" prompts arrive at `ask` as a numbered `Card` (SPEC.md: the
same kind of card); `card.kind` tells them apart.

    class MyPort:
        def human_connected(self) -> bool: return self.ws.open
        def has_target_space(self) -> bool: return True       # where cards are shown
        def ask(self, card: Card, timeout: float) -> Answer:
            ...show card, wait at most `timeout` seconds...
            return Answer.answered(["Postgres"])               # or Answer.skipped()

Fail-closed rules live in tether, not in the port: with no human connected a question is
refused at once instead of blocking, and a permission prompt counts as "deny". A port that
overstays `timeout` (or raises) is treated as a timeout; the call never hangs on it.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from tether.call_scope import CancelHandle
from tether.json_types import JSONObject


class CardKind(enum.Enum):
    QUESTION = "question"  # from ask_user
    PERMISSION = "permission"  # from the approval guardrail


@dataclass(frozen=True)
class Option:
    label: str
    description: str = ""


@dataclass(frozen=True)
class Card:
    """One numbered card shown in the conversation."""

    number: int  # 1, 2, 3 ... per run
    kind: CardKind
    question: str
    context: str = ""
    header: str = ""  # a short chip label (AskUserQuestion's header, <= 12 chars)
    options: tuple[Option, ...] = ()
    allow_free_text: bool = False
    multi_select: bool = False
    tool: str = ""  # permission cards: the tool that wants to run
    arguments: JSONObject = field(default_factory=dict)  # permission cards: its arguments

    def as_ask_user_question(self) -> JSONObject:
        """The card in the shape of Claude Code's AskUserQuestion tool input, for agent UIs
        that already render that: {"questions": [{question, header, options: [{label,
        description}], multiSelect}]}. Context goes in front of the question; a card that
        allows free text says so (those UIs always offer "Other")."""
        question = f"{self.context}\n\n{self.question}" if self.context else self.question
        return {
            "questions": [
                {
                    "question": question,
                    "header": (self.header or _default_header(self))[:HEADER_CHARS],
                    "options": [
                        {"label": o.label, "description": o.description} for o in self.options
                    ],
                    "multiSelect": self.multi_select,
                }
            ]
        }

    def allows(self, answer: Answer) -> str:
        """Why `answer` does not fit this card ("" when it does)."""
        if answer.status is not AnswerStatus.ANSWERED:
            return ""
        labels = {o.label for o in self.options}
        unknown = [c for c in answer.choices if c not in labels]
        if unknown and not self.allow_free_text:
            return f"{', '.join(map(repr, unknown))} is not an option of card #{self.number}"
        if len(answer.choices) > 1 and not self.multi_select:
            return f"card #{self.number} takes one option, got {len(answer.choices)}"
        if answer.text and not self.allow_free_text:
            return f"card #{self.number} takes no typed answer"
        return ""


HEADER_CHARS = 12


def _default_header(card: Card) -> str:
    return "Permission" if card.kind is CardKind.PERMISSION else "Question"


# The options of every permission card.
ALLOW = "allow"
DENY = "deny"


class AnswerStatus(enum.Enum):
    ANSWERED = "answered"
    SKIPPED = "skipped"
    TIMED_OUT = "timed_out"
    WITHDRAWN = "withdrawn"  # the call that asked was cancelled: the card is taken back


@dataclass(frozen=True)
class Answer:
    status: AnswerStatus
    choices: tuple[str, ...] = ()  # labels of the picked options
    text: str = ""  # a typed answer, when the card allows free text

    @classmethod
    def answered(cls, choices: list[str] | tuple[str, ...] = (), text: str = "") -> Answer:
        return cls(AnswerStatus.ANSWERED, tuple(choices), text)

    @classmethod
    def skipped(cls) -> Answer:
        return cls(AnswerStatus.SKIPPED)

    @classmethod
    def timed_out(cls, why: str = "") -> Answer:
        return cls(AnswerStatus.TIMED_OUT, text=why)

    @classmethod
    def withdrawn(cls, why: str = "") -> Answer:
        return cls(AnswerStatus.WITHDRAWN, text=why)

    @property
    def empty(self) -> bool:
        """An "answer" with no choice and no text: counted as a skip, never as ""."""
        return self.status is AnswerStatus.ANSWERED and not self.choices and not self.text.strip()


@runtime_checkable
class QuestionPort(Protocol):
    def human_connected(self) -> bool:
        """Whether someone can answer right now (else asking fails at once)."""

    def has_target_space(self) -> bool:
        """Whether there is a place to show cards (ask_user is registered only then)."""

    def ask(self, card: Card, timeout: float) -> Answer:
        """Show `card` and wait at most `timeout` seconds for the answer."""


def ask_bounded(
    port: QuestionPort, card: Card, timeout: float, cancel: CancelHandle | None = None
) -> Answer:
    """`port.ask` with a hard deadline: a port that overstays, raises or returns something
    other than an Answer reads as a timeout (with the reason in `text`). A `cancel` that
    fires first (the call that asked was cancelled) withdraws the card: the port's
    `withdraw(number, reason)`, where it has one, takes it off the human's screen.

    The port runs in a daemon thread, so a misbehaving host cannot hang a tool call.
    """
    box: list[Answer] = []
    errors: list[BaseException] = []
    settled = threading.Event()

    def target() -> None:
        try:
            box.append(port.ask(card, timeout))
        except BaseException as e:  # noqa: BLE001 - a host bug must not escape as a crash
            errors.append(e)
        finally:
            settled.set()

    thread = threading.Thread(target=target, name=f"tether-card-{card.number}", daemon=True)
    thread.start()
    unregister = cancel.on_cancel(lambda _why: settled.set()) if cancel is not None else None
    settled.wait(timeout + 1.0)
    if unregister is not None:
        unregister()
    if cancel is not None and cancel.cancelled and not box and not errors:
        withdraw = getattr(port, "withdraw", None)
        if callable(withdraw):
            with contextlib.suppress(Exception):  # (a host bug: the card is gone for us)
                withdraw(card.number, cancel.reason)
        return Answer.withdrawn(cancel.reason)
    if box and isinstance(box[0], Answer):
        return Answer.skipped() if box[0].empty else box[0]
    if errors:
        return Answer(AnswerStatus.TIMED_OUT, text=f"the question port failed: {errors[0]!r}")
    if box:
        return Answer(AnswerStatus.TIMED_OUT, text=f"the question port returned {box[0]!r}")
    return Answer.timed_out()


class OneCardAtATime:
    """One question card outstanding per run: a second waits its turn (bounded by its own
    timeout) rather than being refused, so a worker's permission prompt that arrives while
    the model's question is open is asked next, not silently denied."""

    def __init__(self) -> None:
        self._asking = threading.Lock()

    def ask(
        self, port: QuestionPort | None, card: Card, timeout: float, cancel: CancelHandle
    ) -> Answer:
        """Show `card` through `port` and wait, at most `timeout` seconds in all (waiting
        for an earlier card included), for the human's typed answer."""
        if port is None:
            return Answer.timed_out("this run has no question port")
        started = time.monotonic()
        if not self._asking.acquire(timeout=timeout):
            return Answer.timed_out(
                f"another question of this run stayed open for all of the {timeout:g} s"
            )
        try:
            remaining = max(timeout - (time.monotonic() - started), 0.01)
            return ask_bounded(port, card, remaining, cancel)
        finally:
            self._asking.release()
