"""The conversations of one `tether serve`: server-minted handles, each a `Run`.

A conversation is not an MCP session. On MCP 2026-07-28 there may be no session at all
(every request stands alone), and one 2025-11-25 session may drive several conversations
(or a conversation may outlive the HTTP session that opened it: a reconnect keeps it). So
the handle is ours: `open_conversation` mints it (unguessable, `c-` + 96 random bits),
binds it to one allowlisted workdir (`config.Workdir`: its path, place and surface), and
every later call names it. It is also what a load balancer keys affinity on (the
`Mcp-Param-Conversation` header a 2026-07-28 client mirrors from the argument).

Calls in flight are tracked here, by their `CallScope`, so a drain can wait for them and
then cancel what is left, and the in-flight count is one number for /metrics and /readyz.

A conversation outlives its server where it can: the open handles are kept in the state dir
(`serve-conversations`), and what each run holds host-side (staged edits, the diagnostics
ledger, breakpoints, its cards) in a file of its own (`run_state`), saved after each call
that may change it. A server started on the same state dir opens the handles again and puts
that state back; what did not survive is said in the conversation's next results.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict, Unpack

from tether.call_scope import CallScope
from tether.json_types import JSONValue
from tether.messages.calls import ErrorCode, ResourceError
from tether.questions import Answer, Card
from tether.serve import resume_notes, run_state, run_store
from tether.serve.config import ServeConfig, Workdir
from tether.serve.elicit import ElicitPort
from tether.serve.run_state import CardLog, RunStateError
from tether.tools.results import ToolResult

if TYPE_CHECKING:
    from tether.questions import QuestionPort
    from tether.run import Run
    from tether.runtime_port import RunOptions
    from tether.tools.spec import Surface

STORE = "serve-conversations"  # (no .json: older runtimes reaped every *.json as a port file)
STORE_BYTES = 16 << 20  # the handles of max_conversations fit many times over
KEEP_FLUSH = 10.0  # s a shutdown waits for the saves under way before its own last ones


class ConversationError(ValueError):
    """A handle that is not (or no longer) open, a refused open: said to the client."""


class Full(ConversationError):
    """No room for another conversation now: try later (HTTP: 503 with Retry-After)."""

    retry_after = 30


class OpensRuns(Protocol):
    """What `Conversations` needs of a runtime (`tether.runtime.Runtime`): runs (and, when
    it has one, its memory budget's word: `capacity()`, read with getattr)."""

    def open_run(
        self,
        run_id: str,
        workdir: str | os.PathLike[str] | None = ...,
        surface: Surface | str | None = ...,
        question_port: QuestionPort | None = ...,
        vibe: bool = ...,
        **options: Unpack[RunOptions],
    ) -> Run: ...


class OpenRun(Protocol):
    """`OpensRuns.open_run`, or another way to open a conversation's run (tests)."""

    def __call__(
        self,
        run_id: str,
        workdir: str | os.PathLike[str] | None = ...,
        surface: Surface | str | None = ...,
        question_port: QuestionPort | None = ...,
        vibe: bool = ...,
        **options: Unpack[RunOptions],
    ) -> Run: ...


class ConversationInfo(TypedDict):
    """What `open_conversation` says of a new conversation (its result's data)."""

    conversation: str  # the handle
    workdir: str  # its name
    path: str
    place: str
    surface: str
    tools: list[str]


class KeptPort(ElicitPort):
    """The conversation's question port, which also logs its cards (numbers, approvals)."""

    def __init__(self, cards: CardLog):
        super().__init__()
        self.cards = cards

    def ask(self, card: Card, timeout: float) -> Answer:
        answer = super().ask(card, timeout)
        self.cards.saw(card, answer)
        return answer


@dataclass
class Conversation:
    handle: str
    workdir: Workdir
    run: Run
    port: ElicitPort = field(default_factory=ElicitPort)  # its cards go to the client
    opened: float = field(default_factory=time.time)
    calls: int = 0
    note: str = ""  # said once, in front of the conversation's next result
    notes: dict[str, str] = field(default_factory=dict)  # tool -> said once, on its next result
    cards: CardLog = field(default_factory=CardLog)
    kept: bytes | None = None  # the run state as last saved
    keeping: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    def take_note(self) -> str:
        """What to say once in front of the conversation's next result."""
        note, self.note = self.note, ""
        return note

    def take_tool_note(self, tool: str) -> str:
        """What to say once in front of the next result of `tool` (what it had is gone)."""
        if not self.notes:
            return ""
        own = self.notes.pop(tool, "")
        if own:  # (one note may stand for several tools: vibe_*'s gone workers)
            self.notes = {t: n for t, n in self.notes.items() if n != own}
        return own

    def describe(self) -> ConversationInfo:
        return ConversationInfo(
            conversation=self.handle,
            workdir=self.workdir.name,
            path=str(self.workdir.path),
            place=self.workdir.place,
            surface=self.workdir.surface.value,
            tools=[t.name for t in self.run.tools()],
        )


class Conversations:
    """Open conversations and the calls in flight on them (thread-safe)."""

    def __init__(self, runtime: OpensRuns, config: ServeConfig, state_dir: Path | None = None):
        self.runtime = runtime
        self.config = config
        # the handles and their workdirs, so a restarted server answers the same handles
        self._store = state_dir / STORE if state_dir is not None else None
        # what each run holds host-side (run_state), saved after the calls that change it
        self._runs = run_store.Store(state_dir) if state_dir is not None else None
        self._saver = run_store.Saver(self._keep)
        # every run's calls pass `_kept_call` first (the outermost wrapper): the per-tool
        # notes of a resumed conversation, and the save after a call that changes its state
        self._registry = run_store.keeping_registry(self._kept_call)
        self._lock = threading.Lock()
        self._open: dict[str, Conversation] = {}
        self._opening = 0  # counted against the limit while open_run runs
        self._in_flight: dict[str, CallScope] = {}
        self._idle = threading.Condition(self._lock)
        self.draining = False

    # ---- room ---------------------------------------------------------------------
    def room(self) -> str:
        """Empty when a new conversation can be opened, else why not (for /readyz too)."""
        if self.draining:
            return "the server is draining (shutting down): open a conversation elsewhere"
        if len(self._open) + self._opening >= self.config.max_conversations:
            return (
                f"the server holds {self.config.max_conversations} conversations, its limit "
                "(max_conversations): close one, or retry later"
            )
        return self._runtime_room()

    def _runtime_room(self) -> str:
        """The memory budget's word (`rt.capacity()`: how many more conversations of the
        average size fit); `open_run` itself refuses too, this only says so ahead."""
        capacity = getattr(self.runtime, "capacity", None)
        if capacity is None:
            return ""
        try:
            report = capacity()
        except Exception:  # noqa: BLE001 - a capacity that cannot say does not refuse
            return ""
        if int(report.get("fit", 1)) >= 1:
            return ""
        room = int(report.get("free", 0)) + int(report.get("evictable", 0))
        return (
            f"the runtime's memory budget is full ({room >> 20} MiB free or freeable by "
            "stopping idle servers and spare kernels, a conversation takes "
            f"~{report.get('average_conversation', 0) >> 20} MiB): close one, or retry later"
        )

    # ---- lifetime -----------------------------------------------------------------
    def open(self, name: str, open_run: OpenRun | None = None, handle: str = "") -> Conversation:
        """A new conversation on the workdir `name` (blocking: starts its run actor)."""
        workdir = self.config.workdir(name)
        with self._lock:
            why = self.room()
            if why:
                raise Full(why)
            self._opening += 1
        handle = handle or "c-" + secrets.token_urlsafe(12)
        cards = CardLog()
        port = KeptPort(cards)
        try:
            run = (open_run or self.runtime.open_run)(
                handle,
                workdir=str(workdir.path),
                surface=workdir.surface,
                place=workdir.place,
                question_port=port,
                approval=workdir.approval,
                registry=self._registry,
            )
        except ResourceError as e:
            if e.code == ErrorCode.CAPACITY:
                raise Full(str(e)) from None
            raise ConversationError(f"could not open a conversation on {name!r}: {e}") from None
        finally:
            with self._lock:
                self._opening -= 1
        conversation = Conversation(handle=handle, workdir=workdir, run=run, port=port, cards=cards)
        with self._lock:
            self._open[handle] = conversation
            self._save()
        return conversation

    def resume(self) -> list[str]:
        """Open again the conversations a previous server on this state dir held (their
        workdir still allowed); each says so in front of its next result. Returns a line
        per handle (resumed, or why not)."""
        try:
            data = run_store.read_private(self._store, STORE_BYTES) if self._store else None
            saved = json.loads(data) if data else {}
        except (OSError, ValueError) as e:  # (RunStateError too) said, and started afresh
            _log(f"{self._store} was not read, no conversation is resumed: {e}")
            saved = {}
        resumed = []
        for handle, entry in saved.items() if isinstance(saved, dict) else ():
            name = entry.get("workdir") if isinstance(entry, dict) else None
            if not run_state.HANDLE.fullmatch(handle):
                resumed.append(f"{handle[:40]!r} not resumed: not a handle this server mints")
                continue
            if not isinstance(name, str) or name not in self.config.workdirs:
                continue
            try:
                conversation = self.open(name, handle=handle)
            except (ConversationError, ValueError) as e:  # said by the server, not fatal
                resumed.append(f"{handle} not resumed: {e}")
                continue
            refused = self._restore(conversation)
            resumed.append(
                f"{handle} resumed, its kept state refused: {refused}" if refused else handle
            )
        with self._lock:
            self._save()
            open_now = set(self._open)
        runs = self._runs
        for handle in runs.handles() if runs is not None else []:
            if handle not in open_now and runs is not None:  # no server will resume it
                runs.remove(handle)
        return resumed

    def _restore(self, conversation: Conversation) -> str:
        """Put back what the conversation's run held (run_state) and set the notes that say
        what came back and what did not. Returns why its state file was refused, or ""."""
        handle = conversation.handle
        try:
            data = self._runs.load(handle) if self._runs is not None else None
            workdir = conversation.run.workdir
            assert workdir is not None  # (a served run has one: `open` passes it)
            doc = run_state.decode(data, handle, workdir) if data else None
        except RunStateError as e:
            path = self._runs.path(handle) if self._runs is not None else handle
            aside = self._runs.set_aside(handle) if self._runs is not None else None
            why = f"{path}: {e}" + (f" (set aside as {aside.name})" if aside else "")
            conversation.note = resume_notes.refused_note(why)
            return why
        restored = run_state.restore(conversation.run, doc, conversation.cards) if doc else None
        conversation.kept = data if doc else None
        conversation.note, conversation.notes = resume_notes.resumed_notes(restored)
        return ""

    # ---- keeping the run state --------------------------------------------------------
    def _kept_call(self, handle: str, tool: str, result: ToolResult) -> ToolResult:
        """(On the call's thread, after the call.) The tool's note of a resumed
        conversation in front of its result; a save queued when the call may have changed
        what is kept."""
        with self._lock:
            conversation = self._open.get(handle)
        if conversation is None:
            return result
        if tool in run_state.KEPT_TOOLS:
            self._saver.mark(handle)
        note = conversation.take_tool_note(tool)
        if not note:
            return result
        return ToolResult(f"{note}\n{result.text}", result.is_error, result.data, result.images)

    def _keep(self, handle: str) -> None:
        """Save the conversation's run state if it changed (on the saver thread, and at
        shutdown). A save that fails is said in the conversation's next result."""
        with self._lock:
            conversation = self._open.get(handle)
        if conversation is None or self._runs is None:
            return
        with conversation.keeping:
            if conversation.closed:
                return
            try:
                doc = run_state.snapshot(
                    conversation.run, handle, conversation.cards, dict(conversation.notes)
                )
                data = run_state.encode(doc)
            except RuntimeError:  # a dict reshaped under the snapshot: try again
                self._saver.mark(handle)
                return
            if data == conversation.kept:
                return
            try:
                self._runs.save(handle, data)
            except (OSError, RunStateError) as e:
                conversation.note = (
                    f"(this server could not keep the conversation's state in its state dir "
                    f"({e}): a restart now would lose its staged edits and breakpoints)"
                )
                _log(f"{handle}: its run state was not saved: {e}")
                return
            conversation.kept = data

    def _save(self) -> None:
        """(Under the lock.) The open handles, 0600, replaced whole."""
        if self._store is None:
            return
        data = {h: {"workdir": c.workdir.name, "opened": c.opened} for h, c in self._open.items()}
        run_store.write_private(self._store, json.dumps(data).encode())

    def get(self, handle: JSONValue) -> Conversation:
        if not isinstance(handle, str) or not handle:
            raise ConversationError(
                "every tool call names its conversation: pass the 'conversation' argument "
                "(the handle open_conversation returned)"
            )
        with self._lock:
            conversation = self._open.get(handle)
        if conversation is None:
            raise ConversationError(
                f"no open conversation {handle!r} on this server (closed, or never opened "
                "here): call open_conversation for a new one"
            )
        return conversation

    def close(self, handle: str) -> Conversation:
        """End a conversation: its run closes, and nothing of it is kept for a restart."""
        conversation = self.get(handle)
        with self._lock:
            self._open.pop(handle, None)
            self._save()
        with conversation.keeping:
            conversation.closed = True
            if self._runs is not None:
                self._runs.remove(handle)
        conversation.run.close()
        return conversation

    def close_all(self) -> int:
        """Close every run (shutdown), each saved first: the store keeps their handles and
        their run state for the next server."""
        self._saver.stop(KEEP_FLUSH)
        for conversation in self.list():
            self._keep(conversation.handle)
        with self._lock:
            conversations, self._open = list(self._open.values()), {}
        for conversation in conversations:
            conversation.run.close()
        return len(conversations)

    def __len__(self) -> int:
        return len(self._open)

    def list(self) -> list[Conversation]:
        with self._lock:
            return list(self._open.values())

    # ---- calls in flight ------------------------------------------------------------
    def begin(self, conversation: Conversation, scope: CallScope) -> None:
        with self._lock:
            self._in_flight[scope.call_id] = scope
            conversation.calls += 1

    def end(self, scope: CallScope) -> None:
        with self._lock:
            self._in_flight.pop(scope.call_id, None)
            if not self._in_flight:
                self._idle.notify_all()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def wait_idle(self, timeout: float) -> bool:
        """Block until no call is in flight (True) or `timeout` passed (False)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def cancel_all(self, reason: str) -> int:
        with self._lock:
            scopes = list(self._in_flight.values())
        return sum(1 for scope in scopes if scope.cancel(reason))


def _log(message: str) -> None:
    print(f"tether serve: {message}", file=sys.stderr, flush=True)
