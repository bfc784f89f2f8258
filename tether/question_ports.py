"""The question ports tether ships (tether.questions.QuestionPort):

- `CallbackPort`: for embedding servers. Each card is handed to `on_card` (push it to the
  UI) and queued (`next_card()` pulls it); the server answers with `answer(n, Answer)` /
  `skip(n)` from any thread. `disconnect()` fails open questions at once.
- `AsyncioPort`: for asyncio servers. `ask` runs `await handler(card)` on the server's
  loop, bounded by the card's timeout.
- `TerminalPort`: for the `tether` command. A numbered card on a text stream, answered by
  typing a number (several: "1,3"), an option's label, free text when the card takes it,
  or "s" to skip. No arrow keys, no terminal modes: it works the same over a plain pipe.

Every port returns a typed `Answer` (answered / skipped / timed out), never a bare string.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import re
import select
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from tether.questions import Answer, Card


@dataclass
class _Open:
    card: Card
    done: threading.Event = field(default_factory=threading.Event)
    answer: Answer | None = None


class CallbackPort:
    """A port an embedding server drives: cards out by callback and queue, answers in by
    card number. Thread-safe."""

    def __init__(
        self,
        on_card: Callable[[Card], object] | None = None,  # (its result is ignored)
        connected: bool = True,
        target_space: bool = True,
        on_withdraw: Callable[[int, str], object] | None = None,
    ):
        self.on_card = on_card
        self.on_withdraw = on_withdraw
        self._connected = connected
        self._target_space = target_space
        self._lock = threading.Lock()
        self._open: dict[int, _Open] = {}
        self._queue: queue.Queue[Card] = queue.Queue()

    def human_connected(self) -> bool:
        return self._connected

    def has_target_space(self) -> bool:
        return self._target_space

    def connect(self) -> None:
        self._connected = True

    def disconnect(self) -> None:
        """Nobody is there any more: every open card ends now as timed out (fail closed)."""
        self._connected = False
        with self._lock:
            for slot in self._open.values():
                slot.answer = Answer.timed_out("the human disconnected")
                slot.done.set()

    def ask(self, card: Card, timeout: float) -> Answer:
        slot = _Open(card)
        with self._lock:
            self._open[card.number] = slot
        try:
            self._queue.put(card)
            if self.on_card is not None:
                self.on_card(card)
            if not slot.done.wait(timeout):
                return Answer.timed_out()
            return slot.answer or Answer.timed_out()
        finally:
            with self._lock:
                self._open.pop(card.number, None)

    def pending(self) -> list[Card]:
        """The cards waiting for an answer, oldest first (not one answered or withdrawn a
        moment ago, whose asker has not woken yet)."""
        with self._lock:
            waiting = [s for s in self._open.values() if not s.done.is_set()]
            return [s.card for s in sorted(waiting, key=lambda s: s.card.number)]

    def next_card(self, timeout: float | None = None) -> Card | None:
        """The next card still waiting for an answer (None when none came in `timeout`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                card = self._queue.get(timeout=remaining)
            except queue.Empty:
                return None
            with self._lock:
                if card.number in self._open:
                    return card

    def answer(self, number: int, answer: Answer) -> None:
        """Answer card `number`. ValueError when it is not waiting or the answer does not fit
        it (an option it does not have, several for a single choice, text it does not take)."""
        with self._lock:
            slot = self._open.get(number)
            if slot is None or slot.done.is_set():
                raise ValueError(
                    f"card #{number} is not waiting for an answer (answered, timed out or "
                    f"never asked); waiting: {sorted(self._open) or 'none'}"
                )
            problem = slot.card.allows(answer)
            if problem:
                raise ValueError(problem)
            slot.answer = answer
            slot.done.set()

    def skip(self, number: int) -> None:
        self.answer(number, Answer.skipped())

    def withdraw(self, number: int, reason: str = "") -> None:
        """Take card `number` back (the call that asked it was cancelled): it is no longer
        pending, and `on_withdraw(number, reason)`, when given, tells the UI to remove it."""
        with self._lock:
            slot = self._open.get(number)
            if slot is None or slot.done.is_set():
                return
            slot.answer = Answer.withdrawn(reason)
            slot.done.set()
        if self.on_withdraw is not None:
            self.on_withdraw(number, reason)


class AsyncioPort:
    """A port whose human is an async handler on the server's event loop:
    `AsyncioPort(loop, handler)` with `async def handler(card) -> Answer`. The handler is
    cancelled when the card times out. `connected` is a bool or a callable returning one."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        handler: Callable[[Card], Awaitable[Answer]],
        connected: bool | Callable[[], bool] = True,
        target_space: bool = True,
    ):
        self.loop = loop
        self.handler = handler
        self._connected = connected
        self._target_space = target_space

    def human_connected(self) -> bool:
        connected = self._connected
        return bool(connected() if callable(connected) else connected) and not self.loop.is_closed()

    def has_target_space(self) -> bool:
        return self._target_space

    def ask(self, card: Card, timeout: float) -> Answer:
        if getattr(self.loop, "_thread_id", None) == threading.get_ident():  # would deadlock
            return Answer.timed_out("asked from the event loop's own thread")

        async def bounded() -> Answer:
            return await asyncio.wait_for(self.handler(card), timeout)

        try:
            future = asyncio.run_coroutine_threadsafe(bounded(), self.loop)
        except RuntimeError as exc:  # the loop is closed
            return Answer.timed_out(f"the server's event loop is gone: {exc}")
        try:
            return future.result(timeout + 0.5)
        except (TimeoutError, concurrent.futures.TimeoutError):
            future.cancel()
            return Answer.timed_out()
        except concurrent.futures.CancelledError:
            return Answer.timed_out("the question was cancelled")


SKIP_WORDS = ("s", "skip")
NUMBERS = re.compile(r"^\d+(\s*[,\s]\s*\d+)*$")


def render_card(card: Card) -> str:
    """The card as numbered text (what TerminalPort prints)."""
    header = f" {card.header}" if card.header else ""
    lines = [f"[#{card.number}{header}] {card.question}"]
    if card.context:
        lines.append(f"  {card.context}")
    for i, option in enumerate(card.options, 1):
        desc = f" - {option.description}" if option.description else ""
        lines.append(f"  {i}. {option.label}{desc}")
    how = []
    if card.options:
        how.append("a number" + (" (several: 1,3)" if card.multi_select else ""))
    if card.allow_free_text:
        how.append("your answer")
    how.append('"s" to skip')
    lines.append(f"Type {', or '.join(how)}, then Enter:")
    return "\n".join(lines) + "\n"


def parse_reply(card: Card, line: str) -> tuple[Answer | None, str]:
    """A typed line as an Answer, or (None, what to type instead)."""
    text = line.strip()
    if not text:
        return None, 'nothing typed; type an answer, or "s" to skip'
    if text.lower() in SKIP_WORDS:
        return Answer.skipped(), ""
    labels = [o.label for o in card.options]
    if card.options and NUMBERS.match(text):
        picks = [int(n) for n in re.split(r"[,\s]+", text)]
        bad = [n for n in picks if not 1 <= n <= len(labels)]
        if bad:
            return None, f"no option {bad[0]}: pick 1 to {len(labels)}"
        if len(picks) > 1 and not card.multi_select:
            return None, "pick one option only"
        return Answer.answered([labels[n - 1] for n in dict.fromkeys(picks)]), ""
    by_label = {label.lower(): label for label in labels}
    if text.lower() in by_label:
        return Answer.answered([by_label[text.lower()]]), ""
    if card.allow_free_text:
        return Answer.answered(text=text), ""
    return None, f"type a number from 1 to {len(labels)}, or an option's name"


class _HasFileno(Protocol):  # (a file, a socket: only its descriptor is read)
    def fileno(self) -> int: ...


class TerminalPort:
    """A port on a text terminal or pipe: the card goes to `output`, the answer is the
    next line of `input`. End of input means nobody is there any more."""

    def __init__(self, input: _HasFileno | int | None = None, output: TextIO | None = None):
        source = sys.stdin if input is None else input
        self._fd = source if isinstance(source, int) else source.fileno()
        self.output = output if output is not None else sys.stderr
        self._buffer = b""
        self._eof = False

    def human_connected(self) -> bool:
        return not self._eof

    def has_target_space(self) -> bool:
        return True

    def ask(self, card: Card, timeout: float) -> Answer:
        self._say(render_card(card))
        deadline = time.monotonic() + timeout
        while True:
            line = self._readline(deadline)
            if line is None:
                if self._eof:
                    return Answer.timed_out("the terminal closed (end of input)")
                self._say(f"(no answer to #{card.number} within {timeout:g} s)\n")
                return Answer.timed_out()
            answer, problem = parse_reply(card, line)
            if answer is not None:
                return answer
            self._say(f"{problem}\n")

    def _say(self, text: str) -> None:
        self.output.write(text)
        self.output.flush()

    def _readline(self, deadline: float) -> str | None:
        while b"\n" not in self._buffer:
            if self._eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self._fd, 4096)
            if not chunk:
                self._eof = True
                if self._buffer:  # a last line without a newline still counts
                    self._buffer += b"\n"
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace")
