"""One debug session's client state, and the ops of the `debug` tool as DAP exchanges.

Sans-io: the session never reads a pipe, writes one or looks at a clock of its own. The
owner (the DebugSessionActor, or a test) feeds it the adapter's bytes (`feed`), tells it
when a timer it asked for fired (`on_timer`) and when the adapter died (`adapter_gone`),
and implements `SessionIO` to write bytes, arm timers and settle calls.

Each op is a generator of what it waits for, driven by `tether.debug.driver` one at a
time (calls within a session are serialised by the actor), so a launch reads top to
bottom like the handshake in DESIGN.md "Debug adapters": initialize -> launch (not
awaited) -> initialized -> breakpoints -> configurationDone -> launch response -> a stop,
an exit, or still running.

What a stopped program shows (stack, scopes, variables, evaluations, and the ids valid at
this stop) is a part of its own, `tether.debug.inspection`, held as `self.inspection`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from tether.debug import inspection
from tether.debug.adapters import AdapterRow, initialize_arguments
from tether.debug.dap import AdapterRequest, Event, Response, as_int, as_list, as_obj
from tether.debug.driver import DebugError, Op, Step, answer, ask, fire, until
from tether.debug.inspection import MAX_FRAMES, Inspection
from tether.debug.output import OutputTail
from tether.debug.session_breakpoints import SessionBreakpoints
from tether.json_types import JSONObject
from tether.messages.calls import ErrorCode
from tether.messages.debug_ops import (
    Exited,
    Outcome,
    Restored,
    Running,
    StackReply,
    Started,
    StatusReply,
    Stopped,
    TerminateReply,
)

OUTPUT_TAIL = 2000  # characters of output in an exit outcome
TOP_FRAMES = 5  # frames in a stop outcome
STOP_EVENTS = ("stopped", "exited", "terminated")
EXIT_GRACE = 0.5  # s to wait for an exit code after `terminated` (delve prints it late)
# s for delve's answer to the disconnect that makes it print the exit code: the program
# has ended, so this only bounds a slow adapter (a loaded machine, a sandbox's relay)
DISCONNECT_WAIT = 5.0


@dataclass
class Session(SessionBreakpoints):
    program: str = ""
    output: OutputTail = field(default_factory=OutputTail)  # the debuggee's, its tail
    exit_code: int | None = None
    end_reason: str = ""
    last_stop: Stopped | None = None
    thread_id: int | None = None
    inspection: Inspection = field(default_factory=Inspection)  # the ids valid at this stop
    process_started: bool = False  # a `process` event came: the owner reports its pids
    attached: bool = False  # the program was running before us: terminate detaches from it
    restored: Restored | None = None  # breakpoints set again at start
    _exit_re: re.Pattern[str] | None = None

    @property
    def peer(self) -> str:
        return self.row.name if self.row else "debug"

    # --- the session ends --------------------------------------------------------------------
    def adapter_gone(self, why: str) -> None:
        """The adapter died (or was killed): the op in flight fails, the session is over."""
        self.state = "ended"
        self.end_reason = why
        self.client.pending.clear()
        self.fail_current(ErrorCode.RESOURCE_DIED, why)

    # --- what arrives ----------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        for item in self.client.feed(data):
            if isinstance(item, Response):
                self.answers[item.request_seq] = item
            elif isinstance(item, Event):
                self._on_event(item)
            elif isinstance(item, AdapterRequest):
                # runInTerminal / startDebugging: we run no terminal and no child sessions
                self.io.send_dap(
                    self.client.respond(item, False, message=f"tether does not do {item.command}")
                )
        self._resume_if_ready()

    def _on_event(self, ev: Event) -> None:
        name = ev.event
        if name == "output":
            self._on_output(ev.body)
            return
        if name == "breakpoint":
            self._on_breakpoint_event(ev.body)
            return
        if name == "process":
            self.process_started = True
            return
        if name == "continued":
            self._moved()
            self.state = "running"
            return
        if name == "initialized":
            self.log.append(ev)
        elif name == "stopped":
            self._moved()
            self.state = "stopped"
            self.thread_id = _thread(ev.body, self.thread_id)
            self.log.append(ev)
        elif name == "exited":
            self._moved()
            self.exit_code = as_int(ev.body.get("exitCode"))
            self.state = "exited"
            self.log.append(ev)
        elif name == "terminated":
            self._moved()
            if self.state not in ("ended",):
                self.state = "exited"
            self.log.append(ev)

    def _moved(self) -> None:
        """The program moved: every frame id and reference handed out is stale."""
        self.inspection.moved()
        self.last_stop = None

    def _on_output(self, body: JSONObject) -> None:
        category = body.get("category", "console")
        text = str(body.get("output", ""))
        if category == "telemetry":
            return
        if self._exit_re is not None and category == "console":
            m = self._exit_re.search(text)
            if m:
                self.exit_code = int(m.group(1))
                self.log.append(Event("exited", {"exitCode": self.exit_code}))
            return
        if category in ("stdout", "stderr") or (category == "console" and self._console_kept()):
            self.output.add(text)

    def _console_kept(self) -> bool:
        """Console output is the adapter's own talk, except where logpoints write there
        (lldb-dap): then it is kept with the program's, as logpoints are."""
        if self.row is None:
            return True
        return self.row.log_category == "console" and any(
            b.log_message and b.active for bps in self.breakpoints.values() for b in bps
        )

    def _on_breakpoint_event(self, body: JSONObject) -> None:
        bp = as_obj(body.get("breakpoint"))
        path = as_obj(bp.get("source")).get("path")
        bp_id, bp_line = as_int(bp.get("id")), as_int(bp.get("line"))
        for known in self.breakpoints.get(str(path), []):
            if known.id is not None and bp_id is not None:
                same = known.id == bp_id  # an id names it exactly
            else:
                same = bp_line in (known.line, known.actual_line) or bp_id is None
            if same and known.active:
                known.verified = bool(bp.get("verified", known.verified))
                if "line" in bp:
                    known.actual_line = bp_line

    # --- ops -------------------------------------------------------------------------------
    def launch(
        self,
        row: AdapterRow,
        program: str,
        config: JSONObject,
        request: str,
        wait: float,
        now: float = 0.0,
        built_at: float = 0.0,
    ) -> Op:
        """The handshake, then the first outcome (a stop, the exit, or still running)."""
        self.row = row
        self.program = program
        self.attached = request == "attach"
        self.state = "starting"
        self._exit_re = re.compile(row.exit_console) if row.exit_console else None
        init = yield from ask("initialize", initialize_arguments(row), row.startup_timeout)
        self.capabilities = init.body
        mark = len(self.log)
        seq = yield from fire(request, config)
        initialized = yield from until(("initialized",), mark, row.launch_timeout, seq)
        if initialized is None:
            raise DebugError(
                ErrorCode.DEADLINE,
                f"{row.name} did not get ready (no 'initialized' event) within "
                f"{row.launch_timeout:g} s",
            )
        # the files as the program loads them: each breakpoint follows its text there first
        self.anchor_at_launch(built_at)
        self.launched_at = now
        yield from self.send_all()
        if self.capabilities.get("supportsConfigurationDoneRequest"):
            yield from ask("configurationDone", None, self._timeout())
        yield from answer(seq, row.launch_timeout)
        if self.state == "starting":
            self.state = "running"
        outcome = yield from self._outcome(mark, wait)
        lines, fns = self.all_breakpoints()
        feats = self.features()
        return Started(
            outcome,
            lines,
            fns,
            self.exception_report(),
            feats.report() if feats is not None else None,
            self.restored or None,
        )

    def resume(self, command: str, thread_id: int | None, wait: float) -> Op:
        """continue / next / stepIn / stepOut, then the outcome."""
        if self.state != "stopped":
            raise DebugError(ErrorCode.BAD_REQUEST, self._not_stopped())
        thread = thread_id if thread_id is not None else self.thread_id
        mark = len(self.log)
        self._moved()
        self.state = "running"
        yield from ask(command, {"threadId": thread}, self._timeout())
        return (yield from self._outcome(mark, wait))

    def pause_now(self) -> bool:
        """Ask the adapter to pause the running program outside any op (the caller of a
        `continue` gave up on it, tether.call_scope): the op still waiting for a stop takes
        that stop as its outcome, and the next call finds the program stopped. False when
        it is not running."""
        if self.state != "running":
            return False
        self._send("pause", {"threadId": self.thread_id or 1})
        return True

    def pause(self, thread_id: int | None, wait: float) -> Op:
        if self.state == "stopped":
            last = self.last_stop or Stopped("", "", None, [], 0)
            return dataclasses.replace(last, note="it was already stopped; nothing was sent")
        if self.state != "running":
            raise DebugError(ErrorCode.BAD_REQUEST, self._not_stopped())
        mark = len(self.log)
        thread = thread_id if thread_id is not None else (self.thread_id or 1)
        yield from ask("pause", {"threadId": thread}, self._timeout())
        return (yield from self._outcome(mark, wait))

    def _outcome(self, mark: int, wait: float) -> Step[Outcome]:
        ev = yield from until(STOP_EVENTS, mark, wait)
        if ev is None:
            return Running(wait, self.output.text(OUTPUT_TAIL))
        if ev.event == "terminated" and self.exit_code is None:
            since = len(self.log)
            if self.row is not None and self.row.exit_console:
                # delve says the exit code only while it disconnects (a joined multi-client
                # server is left running: it is not ours to end)
                args: JSONObject = {"terminateDebuggee": not self.attached}
                try:
                    yield from ask("disconnect", args, DISCONNECT_WAIT)
                except DebugError:
                    pass
            yield from until(("exited",), since, EXIT_GRACE)
        if ev.event == "stopped":
            return (yield from self._stopped(ev))
        self.state = "exited"
        return Exited(self.exit_code, self.output.text(OUTPUT_TAIL))

    def _stopped(self, ev: Event) -> Step[Stopped]:
        body = ev.body
        thread = _thread(body, self.thread_id)
        reason = str(body.get("reason", ""))
        frames, total = yield from self.inspection.stack(thread, self._timeout(), self.line_text)
        breakpoint = ""
        if frames and "breakpoint" in reason:
            hit_ids = [
                i for i in map(as_int, as_list(body.get("hitBreakpointIds"))) if i is not None
            ]
            lines, fns = self.stop_causes(hit_ids, frames[0])
            breakpoint = self.describe(lines, fns)
            yield from self.spend_hit_once(lines, fns)
        changed = sorted({f.file for f in frames if self.changed_since_launch(f.file)})
        exception = None
        if reason in ("exception", "panic"):
            exception = yield from inspection.exception(
                thread, body, self.capabilities, self._timeout()
            )
        top = (
            (yield from self.inspection.top_locals(frames[0].id, self._timeout()))
            if frames
            else None
        )
        self.last_stop = Stopped(
            reason,
            str(body.get("description", "") or body.get("text", "")),
            thread,
            frames[:TOP_FRAMES],
            total,
            breakpoint,
            changed,
            exception,
            top,
        )
        return self.last_stop

    def stack(self, thread_id: int | None) -> Op:
        self._require_stopped()
        thread = thread_id if thread_id is not None else self.thread_id
        frames, total = yield from self.inspection.stack(thread, self._timeout(), self.line_text)
        return StackReply(thread, frames, total, MAX_FRAMES)

    def threads(self) -> Op:
        if not self.live:
            raise DebugError(ErrorCode.BAD_REQUEST, self._not_stopped())
        return (yield from inspection.threads(self._timeout()))

    def scopes(self, frame_id: int) -> Op:
        self._require_stopped()
        return (yield from self.inspection.scopes(frame_id, self._timeout()))

    def variables(self, reference: int) -> Op:
        self._require_stopped()
        return (yield from self.inspection.variables(reference, self._timeout()))

    def evaluate(self, expression: str, frame_id: int | None) -> Op:
        self._require_stopped()
        if frame_id is None and not self.inspection.frames:
            yield from self.inspection.stack(self.thread_id, self._timeout(), self.line_text)
        context = "repl" if self.row is not None and self.row.name == "debugpy" else "watch"
        return (yield from self.inspection.evaluate(expression, frame_id, context, self._timeout()))

    def disconnect(self) -> Op:
        """End the session: a launched program is killed; an attached one is left running
        as it was found (no breakpoints, not stopped), and the adapter detaches."""
        detach = self.attached and self.live
        if self.state not in ("none", "ended"):
            if detach:
                yield from self._release_program()
            try:
                yield from ask("disconnect", {"terminateDebuggee": not detach}, 1.5)
            except DebugError:
                pass  # the owner kills the process tree anyway
        self.state = "ended"
        self.end_reason = "terminated by the terminate op"
        return TerminateReply(True, detach, self.output.text(OUTPUT_TAIL))

    def _release_program(self) -> Step[None]:
        """Before detaching: clear our breakpoints and let the program run (a multi-client
        delve keeps both after a client leaves, and the program would halt with nobody
        there to continue it)."""
        try:
            for path in list(self.breakpoints):
                yield from ask("setBreakpoints", {"source": {"path": path}, "breakpoints": []}, 1.5)
            if self.state == "stopped":
                yield from ask("continue", {"threadId": self.thread_id}, 1.5)
        except DebugError:
            pass  # detaching is still better than leaving it attached

    # --- checks ---------------------------------------------------------------------------
    def _require_stopped(self) -> None:
        if self.state != "stopped":
            raise DebugError(ErrorCode.BAD_REQUEST, self._not_stopped())

    def _not_stopped(self) -> str:
        if self.state == "none":
            return "no program is being debugged; call launch (or attach) first"
        if self.state == "running":
            return "the program is running; call pause to stop it first"
        if self.state == "starting":
            return "the program is still starting; call status"
        if self.state == "exited":
            return (
                f"the program exited (code {self.exit_code}); call output to read what "
                "it printed, or launch it again"
            )
        return f"the debug session ended ({self.end_reason}); call launch to start a new one"

    def status(self) -> StatusReply:
        """The session's part of a status (the owner adds its pids, TTL and uptime)."""
        lines, fns = self.all_breakpoints()
        return StatusReply(
            self.state,
            self.row.name if self.row else "",
            self.program,
            self.last_stop if self.state == "stopped" else None,
            self.exit_code,
            self.end_reason,
            lines,
            fns,
            self.exception_report(),
        )


def _thread(body: JSONObject, default: int | None) -> int | None:
    """The event's threadId (`default` when it names none)."""
    return as_int(body["threadId"]) if "threadId" in body else default
