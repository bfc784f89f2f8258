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

import enum
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


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
    options: tuple[Option, ...] = ()
    allow_free_text: bool = False
    multi_select: bool = False
    tool: str = ""  # permission cards: the tool that wants to run
    arguments: dict[str, Any] = field(default_factory=dict)  # permission cards: its arguments


# The options of every permission card.
ALLOW = "allow"
DENY = "deny"


class AnswerStatus(enum.Enum):
    ANSWERED = "answered"
    SKIPPED = "skipped"
    TIMED_OUT = "timed_out"


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
    def timed_out(cls) -> Answer:
        return cls(AnswerStatus.TIMED_OUT)


@runtime_checkable
class QuestionPort(Protocol):
    def human_connected(self) -> bool:
        """Whether someone can answer right now (else asking fails at once)."""

    def has_target_space(self) -> bool:
        """Whether there is a place to show cards (ask_user is registered only then)."""

    def ask(self, card: Card, timeout: float) -> Answer:
        """Show `card` and wait at most `timeout` seconds for the answer."""


def ask_bounded(port: QuestionPort, card: Card, timeout: float) -> Answer:
    """`port.ask` with a hard deadline: a port that overstays, raises or returns something
    other than an Answer reads as a timeout (with the reason in `text`).

    The port runs in a daemon thread, so a misbehaving host cannot hang a tool call.
    """
    box: list[Answer] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(port.ask(card, timeout))
        except BaseException as e:  # noqa: BLE001 - a host bug must not escape as a crash
            errors.append(e)

    thread = threading.Thread(target=target, name=f"tether-card-{card.number}", daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    if box and isinstance(box[0], Answer):
        return box[0]
    if errors:
        return Answer(AnswerStatus.TIMED_OUT, text=f"the question port failed: {errors[0]!r}")
    if box:
        return Answer(AnswerStatus.TIMED_OUT, text=f"the question port returned {box[0]!r}")
    return Answer.timed_out()
