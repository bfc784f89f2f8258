"""Drives one op at a time over a DAP connection: the op is a generator of what it waits for.

Sans-io: the owner feeds what the adapter sent (`Driver.answers` / `Driver.log` are filled
by the subclass's `feed`), tells it when a timer it asked for fired (`on_timer`), and
implements `SessionIO` to write bytes, arm timers and settle calls.

An op yields what it waits for - a response (`Ask`), an event (`Until`), or nothing
(`Fire`, a request whose answer is awaited later with `Answer`) - and returns the payload
of its reply (`tether.messages.debug_ops`). When the awaited message arrives the generator is resumed with it; when its
time runs out an `Ask` gets `DebugError` thrown in and an `Until` gets None ("still
running" is an outcome, not an error). So no handler ever waits.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from tether.debug.dap import DapClient, Event, Response
from tether.json_types import JSONObject
from tether.messages.calls import Call, ErrorCode
from tether.messages.debug_ops import DebugReply


@dataclass(frozen=True)
class WaitDue:
    """Timer tag: the step waiting as `wait_id` has waited its time."""

    wait_id: int


class DebugError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class SessionIO(Protocol):
    def send_dap(self, data: bytes) -> None: ...

    def after(self, seconds: float, tag: WaitDue) -> None: ...

    def done(self, token: Call, reply: DebugReply) -> None: ...

    def error(self, token: Call, code: str, message: str) -> None: ...


# --- what an op waits for ---------------------------------------------------------------
@dataclass(frozen=True)
class Fire:
    """Send a request; the op gets its seq back at once."""

    command: str
    arguments: JSONObject | None = None


@dataclass(frozen=True)
class Answer:
    """Wait for the response to `seq`; DebugError when it failed or did not come in time."""

    seq: int
    timeout: float


@dataclass(frozen=True)
class Ask:
    """Fire + Answer."""

    command: str
    arguments: JSONObject | None
    timeout: float


@dataclass(frozen=True)
class Until:
    """Wait for one of `events` logged after index `after` (None when time runs out), or
    for the failed response to `seq` (then DebugError)."""

    events: tuple[str, ...]
    after: int
    timeout: float
    seq: int = 0


Wait = Fire | Answer | Ask | Until
# what resumes an op: Fire its seq, Ask and Answer the response, Until the event (or None)
Resumed = Response | Event | int | None
T = TypeVar("T")
Step = Generator[Wait, Resumed, T]  # a part of an op, returning T
Op = Step[DebugReply]  # an op: its reply


def ask(command: str, arguments: JSONObject | None, timeout: float) -> Step[Response]:
    """Send a request and wait for its (successful) response."""
    got = yield Ask(command, arguments, timeout)
    assert isinstance(got, Response)
    return got


def fire(command: str, arguments: JSONObject | None = None) -> Step[int]:
    """Send a request; its seq, to wait for its answer later (`answer`)."""
    seq = yield Fire(command, arguments)
    assert isinstance(seq, int)
    return seq


def answer(seq: int, timeout: float) -> Step[Response]:
    got = yield Answer(seq, timeout)
    assert isinstance(got, Response)
    return got


def until(events: tuple[str, ...], after: int, timeout: float, seq: int = 0) -> Step[Event | None]:
    """One of `events` logged after index `after`, or None when the time ran out."""
    got = yield Until(events, after, timeout, seq)
    assert got is None or isinstance(got, Event)
    return got


@dataclass
class _Current:
    op: Op
    token: Call
    wait: Wait | None = None
    wait_id: int = 0


@dataclass
class Driver:
    io: SessionIO
    client: DapClient = field(default_factory=DapClient)
    log: list[Event] = field(default_factory=list)  # initialized / stopped / exited / ...
    answers: dict[int, Response] = field(default_factory=dict)
    current: _Current | None = None
    _wait_ids: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def peer(self) -> str:
        """The adapter's name, for messages."""
        return "debug"

    # --- driving ops ---------------------------------------------------------------------
    def run(self, op: Op, token: Call) -> None:
        """Start `op` (the previous one has settled); its reply goes to io.done/error."""
        self.current = _Current(op, token)
        self._step(None, None)

    def _step(self, value: Resumed, exc: BaseException | None) -> None:
        cur = self.current
        while cur is not None and cur is self.current:
            try:
                wait = cur.op.throw(exc) if exc is not None else cur.op.send(value)
            except StopIteration as stop:
                self._settle(cur, stop.value, None)
                return
            except DebugError as e:
                self._settle(cur, None, e)
                return
            except Exception as e:  # a bug or an unexpected answer: the call gets it, not the actor
                self._settle(cur, None, DebugError(ErrorCode.FAILED, f"{type(e).__name__}: {e}"))
                return
            value, exc = None, None
            if isinstance(wait, Fire):
                value = self._send(wait.command, wait.arguments)
                continue
            if isinstance(wait, Ask):
                wait = Answer(self._send(wait.command, wait.arguments), wait.timeout)
            cur.wait = wait
            cur.wait_id = next(self._wait_ids)
            ready = self._satisfied(wait)
            if ready is None:
                self.io.after(max(wait.timeout, 0.001), WaitDue(cur.wait_id))
                return
            cur.wait = None
            value, exc = ready

    def _satisfied(self, wait: Wait) -> tuple[Resumed, BaseException | None] | None:
        """What resumes the op waiting on `wait` now, or None when nothing does yet."""
        if isinstance(wait, Answer):
            resp = self.answers.pop(wait.seq, None)
            if resp is None:
                return None
            return (None, _refused(resp)) if not resp.success else (resp, None)
        if isinstance(wait, Until):
            for ev in self.log[wait.after :]:
                if ev.event in wait.events:
                    return ev, None
            resp = self.answers.get(wait.seq) if wait.seq else None
            if resp is not None and not resp.success:
                self.answers.pop(wait.seq, None)
                return None, _refused(resp)
        return None

    def _resume_if_ready(self) -> None:
        cur = self.current
        if cur is None or cur.wait is None:
            return
        ready = self._satisfied(cur.wait)
        if ready is not None:
            cur.wait = None
            self._step(*ready)

    def on_timer(self, tag: WaitDue) -> None:
        cur = self.current
        if cur is None or cur.wait is None or tag != WaitDue(cur.wait_id):
            return
        wait, cur.wait = cur.wait, None
        if isinstance(wait, Until):
            self._step(None, None)
            return
        assert isinstance(wait, Answer)
        command = self.client.pending.get(wait.seq, "request")
        self.client.forget(wait.seq)
        self._step(
            None,
            DebugError(
                ErrorCode.DEADLINE,
                f"the {self.peer} adapter did not answer {command} within {wait.timeout:g} s",
            ),
        )

    def _settle(self, cur: _Current, reply: DebugReply | None, err: DebugError | None) -> None:
        self.current = None
        if err is not None:
            self.io.error(cur.token, err.code, err.message)
        else:
            assert reply is not None  # (every op returns its reply)
            self.io.done(cur.token, reply)

    def interrupt(self, err: DebugError) -> None:
        """The adapter is gone: nothing more will arrive. An op waiting for a response gets
        `err` thrown in (it may catch it), one waiting for events gets None, as when its
        time runs out."""
        cur = self.current
        if cur is not None and cur.wait is not None:
            wait, cur.wait = cur.wait, None
            self._step(None, None if isinstance(wait, Until) else err)

    def fail_current(self, code: str, message: str) -> None:
        """The op in flight (if any) fails now, whatever it waits for."""
        cur = self.current
        if cur is not None:
            self.current = None
            self.io.error(cur.token, code, message)

    def _send(self, command: str, arguments: JSONObject | None) -> int:
        seq, data = self.client.request(command, arguments)
        self.io.send_dap(data)
        return seq


def _refused(resp: Response) -> DebugError:
    return DebugError(
        ErrorCode.FAILED,
        f"the adapter refused {resp.command}: {resp.message or 'no reason given'}",
    )
