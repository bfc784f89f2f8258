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

Frame ids and variable references are only valid while the program stays stopped where
it was: the session remembers the ones it handed out since the last stop, and refuses
any other with an error that says to ask `stack` again.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from tether.debug.adapters import AdapterRow, initialize_arguments
from tether.debug.dap import AdapterRequest, Event, Response
from tether.debug.driver import Answer, Ask, DebugError, Fire, Op, Until, Wait
from tether.debug.output import OutputTail
from tether.debug.session_breakpoints import SessionBreakpoints
from tether.messages.calls import ErrorCode

MAX_FRAMES = 30  # stack: frames shown
MAX_CHILDREN = 50  # variables: children shown
MAX_VALUE = 400  # characters of one value shown
OUTPUT_TAIL = 2000  # characters of output in an exit outcome
TOP_FRAMES = 5  # frames in a stop outcome
STOP_EVENTS = ("stopped", "exited", "terminated")
EXIT_GRACE = 0.5  # s to wait for an exit code after `terminated` (delve prints it late)


@dataclass
class Session(SessionBreakpoints):
    program: str = ""
    output: OutputTail = field(default_factory=OutputTail)  # the debuggee's, its tail
    exit_code: int | None = None
    end_reason: str = ""
    last_stop: dict[str, Any] = field(default_factory=dict)
    thread_id: int | None = None
    frames: set[int] = field(default_factory=set)  # frame ids valid at this stop
    references: set[int] = field(default_factory=set)  # variable references valid now
    process_started: bool = False  # a `process` event came: the owner reports its pids
    attached: bool = False  # the program was running before us: terminate detaches from it
    restored: dict[str, Any] = field(default_factory=dict)  # breakpoints set again at start
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
            self.thread_id = ev.body.get("threadId", self.thread_id)
            self.log.append(ev)
        elif name == "exited":
            self._moved()
            self.exit_code = ev.body.get("exitCode")
            self.state = "exited"
            self.log.append(ev)
        elif name == "terminated":
            self._moved()
            if self.state not in ("ended",):
                self.state = "exited"
            self.log.append(ev)

    def _moved(self) -> None:
        """The program moved: every frame id and reference handed out is stale."""
        self.frames.clear()
        self.references.clear()
        self.last_stop = {}

    def _on_output(self, body: dict[str, Any]) -> None:
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

    def _on_breakpoint_event(self, body: dict[str, Any]) -> None:
        bp = body.get("breakpoint") or {}
        path = (bp.get("source") or {}).get("path")
        for known in self.breakpoints.get(str(path), []):
            if known.id is not None and bp.get("id") is not None:
                same = known.id == bp.get("id")  # an id names it exactly
            else:
                same = bp.get("line") in (known.line, known.actual_line) or bp.get("id") is None
            if same and known.active:
                known.verified = bool(bp.get("verified", known.verified))
                known.actual_line = bp.get("line", known.actual_line)

    # --- ops -------------------------------------------------------------------------------
    def launch(
        self,
        row: AdapterRow,
        program: str,
        config: dict[str, Any],
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
        init = yield Ask("initialize", initialize_arguments(row), row.startup_timeout)
        self.capabilities = init.body
        mark = len(self.log)
        seq = yield Fire(request, config)
        initialized = yield Until(("initialized",), mark, row.launch_timeout, seq)
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
            yield Ask("configurationDone", None, self._timeout())
        yield Answer(seq, row.launch_timeout)
        if self.state == "starting":
            self.state = "running"
        outcome = yield from self._outcome(mark, wait)
        outcome.update(self.all_breakpoints())
        feats = self.features()
        if feats is not None:
            outcome["features"] = feats.report()
        if self.restored:
            outcome["restored_breakpoints"] = self.restored
        return outcome

    def resume(self, command: str, thread_id: int | None, wait: float) -> Op:
        """continue / next / stepIn / stepOut, then the outcome."""
        if self.state != "stopped":
            raise DebugError(ErrorCode.BAD_REQUEST, self._not_stopped())
        thread = thread_id if thread_id is not None else self.thread_id
        mark = len(self.log)
        self._moved()
        self.state = "running"
        yield Ask(command, {"threadId": thread}, self._timeout())
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
            outcome = dict(self.last_stop) or {"outcome": "stopped"}
            outcome["note"] = "it was already stopped; nothing was sent"
            return outcome
        if self.state != "running":
            raise DebugError(ErrorCode.BAD_REQUEST, self._not_stopped())
        mark = len(self.log)
        thread = thread_id if thread_id is not None else (self.thread_id or 1)
        yield Ask("pause", {"threadId": thread}, self._timeout())
        return (yield from self._outcome(mark, wait))

    def _outcome(self, mark: int, wait: float) -> Generator[Wait, Any, dict[str, Any]]:
        ev = yield Until(STOP_EVENTS, mark, wait)
        if ev is None:
            return {
                "outcome": "running",
                "waited": wait,
                "output_tail": self.output.text(OUTPUT_TAIL),
            }
        if ev.event == "terminated" and self.exit_code is None:
            since = len(self.log)
            if self.row is not None and self.row.exit_console:
                # delve says the exit code only while it disconnects (a joined multi-client
                # server is left running: it is not ours to end)
                args = {"terminateDebuggee": not self.attached}
                try:
                    yield Ask("disconnect", args, EXIT_GRACE * 4)
                except DebugError:
                    pass
            yield Until(("exited",), since, EXIT_GRACE)
        if ev.event == "stopped":
            return (yield from self._stopped(ev))
        self.state = "exited"
        return {
            "outcome": "exited",
            "exit_code": self.exit_code,
            "output_tail": self.output.text(OUTPUT_TAIL),
        }

    def _stopped(self, ev: Event) -> Generator[Wait, Any, dict[str, Any]]:
        body = ev.body
        thread = body.get("threadId", self.thread_id)
        frames, total = yield from self._stack(thread)
        out: dict[str, Any] = {
            "outcome": "stopped",
            "reason": body.get("reason", ""),
            "description": body.get("description", "") or body.get("text", ""),
            "thread_id": thread,
            "frames": frames[:TOP_FRAMES],
            "total_frames": total,
        }
        if frames and "breakpoint" in str(body.get("reason", "")):
            lines, fns = self.stop_causes(list(body.get("hitBreakpointIds") or []), frames[0])
            out["breakpoint"] = self.describe(lines, fns)
            yield from self.spend_hit_once(lines, fns)
        changed = sorted({f["file"] for f in frames if self.changed_since_launch(f["file"])})
        if changed:
            out["changed_since_launch"] = changed
        if body.get("reason") == "exception" or body.get("reason") == "panic":
            out["exception"] = yield from self._exception(thread, body)
        if frames:
            out["locals"] = yield from self._top_locals(frames[0]["id"])
        self.last_stop = dict(out)
        return out

    def _exception(self, thread: Any, body: dict[str, Any]) -> Generator[Wait, Any, dict[str, str]]:
        if not self.capabilities.get("supportsExceptionInfoRequest"):
            return {"type": "", "message": str(body.get("text") or body.get("description") or "")}
        try:
            info = yield Ask("exceptionInfo", {"threadId": thread}, self._timeout())
        except DebugError:
            return {"type": "", "message": str(body.get("text") or body.get("description") or "")}
        details = info.body.get("details") or {}
        return {
            "type": str(details.get("typeName") or info.body.get("exceptionId") or ""),
            "message": _cap(str(info.body.get("description") or details.get("message") or "")),
        }

    def _top_locals(self, frame_id: int) -> Generator[Wait, Any, dict[str, Any]]:
        scopes = yield Ask("scopes", {"frameId": frame_id}, self._timeout())
        for scope in scopes.body.get("scopes") or []:
            ref = scope.get("variablesReference")
            if ref and not scope.get("expensive"):
                return (yield from self._children(int(ref), scope.get("name", "")))
        return {"scope": "", "variables": [], "total": 0}

    def _stack(self, thread: Any) -> Generator[Wait, Any, tuple[list[dict[str, Any]], int]]:
        resp = yield Ask(
            "stackTrace",
            {"threadId": thread, "startFrame": 0, "levels": MAX_FRAMES},
            self._timeout(),
        )
        raw = (resp.body.get("stackFrames") or [])[:MAX_FRAMES]
        frames = []
        for f in raw:
            source = f.get("source") or {}
            path = source.get("path") or ""
            line = f.get("line") or 0
            self.frames.add(int(f["id"]))
            frames.append(
                {
                    "id": f["id"],
                    "name": f.get("name", ""),
                    "file": path or source.get("name", ""),
                    "line": line,
                    "source": self.line_text(path, line) if path else "",
                }
            )
        total = int(resp.body.get("totalFrames") or len(raw))
        return frames, max(total, len(raw))

    def stack(self, thread_id: int | None) -> Op:
        self._require_stopped()
        thread = thread_id if thread_id is not None else self.thread_id
        frames, total = yield from self._stack(thread)
        return {"thread_id": thread, "frames": frames, "total_frames": total, "cap": MAX_FRAMES}

    def threads(self) -> Op:
        if not self.live:
            raise DebugError(ErrorCode.BAD_REQUEST, self._not_stopped())
        resp = yield Ask("threads", None, self._timeout())
        return {
            "threads": [
                {"id": t.get("id"), "name": t.get("name", "")}
                for t in resp.body.get("threads") or []
            ]
        }

    def scopes(self, frame_id: int) -> Op:
        self._require_stopped()
        self._require_frame(frame_id)
        resp = yield Ask("scopes", {"frameId": frame_id}, self._timeout())
        out = []
        for s in resp.body.get("scopes") or []:
            ref = int(s.get("variablesReference") or 0)
            if ref:
                self.references.add(ref)
            out.append(
                {"name": s.get("name", ""), "reference": ref, "expensive": bool(s.get("expensive"))}
            )
        return {"frame_id": frame_id, "scopes": out}

    def variables(self, reference: int) -> Op:
        self._require_stopped()
        if reference not in self.references:
            raise DebugError(ErrorCode.BAD_REQUEST, self._stale("reference", reference))
        return (yield from self._children(reference, ""))

    def _children(self, reference: int, scope: str) -> Generator[Wait, Any, dict[str, Any]]:
        self.references.add(reference)
        resp = yield Ask("variables", {"variablesReference": reference}, self._timeout())
        raw = resp.body.get("variables") or []
        shown = []
        for v in raw[:MAX_CHILDREN]:
            ref = int(v.get("variablesReference") or 0)
            if ref:
                self.references.add(ref)
            shown.append(
                {
                    "name": str(v.get("name", "")),
                    "value": _cap(str(v.get("value", ""))),
                    "type": str(v.get("type") or ""),
                    "reference": ref,
                }
            )
        return {"scope": scope, "reference": reference, "variables": shown, "total": len(raw)}

    def evaluate(self, expression: str, frame_id: int | None) -> Op:
        self._require_stopped()
        if frame_id is None:
            if not self.frames:
                yield from self._stack(self.thread_id)
            frame_id = min(self.frames) if self.frames else None
        else:
            self._require_frame(frame_id)
        context = "repl" if self.row is not None and self.row.name == "debugpy" else "watch"
        args: dict[str, Any] = {"expression": expression, "context": context}
        if frame_id is not None:
            args["frameId"] = frame_id
        try:
            resp = yield Ask("evaluate", args, self._timeout())
        except DebugError as e:
            raise DebugError(ErrorCode.FAILED, f"evaluate {expression!r}: {e.message}") from e
        ref = int(resp.body.get("variablesReference") or 0)
        if ref:
            self.references.add(ref)
        return {
            "expression": expression,
            "frame_id": frame_id,
            "value": _cap(str(resp.body.get("result", ""))),
            "type": str(resp.body.get("type") or ""),
            "reference": ref,
        }

    def disconnect(self) -> Op:
        """End the session: a launched program is killed; an attached one is left running
        as it was found (no breakpoints, not stopped), and the adapter detaches."""
        detach = self.attached and self.live
        if self.state not in ("none", "ended"):
            if detach:
                yield from self._release_program()
            try:
                yield Ask("disconnect", {"terminateDebuggee": not detach}, 1.5)
            except DebugError:
                pass  # the owner kills the process tree anyway
        self.state = "ended"
        self.end_reason = "terminated by the terminate op"
        return {
            "terminated": True,
            "detached": detach,
            "output_tail": self.output.text(OUTPUT_TAIL),
        }

    def _release_program(self) -> Generator[Wait, Any, None]:
        """Before detaching: clear our breakpoints and let the program run (a multi-client
        delve keeps both after a client leaves, and the program would halt with nobody
        there to continue it)."""
        try:
            for path in list(self.breakpoints):
                yield Ask("setBreakpoints", {"source": {"path": path}, "breakpoints": []}, 1.5)
            if self.state == "stopped":
                yield Ask("continue", {"threadId": self.thread_id}, 1.5)
        except DebugError:
            pass  # detaching is still better than leaving it attached

    # --- checks ---------------------------------------------------------------------------
    def _require_stopped(self) -> None:
        if self.state != "stopped":
            raise DebugError(ErrorCode.BAD_REQUEST, self._not_stopped())

    def _require_frame(self, frame_id: int) -> None:
        if frame_id not in self.frames:
            raise DebugError(ErrorCode.BAD_REQUEST, self._stale("frame", frame_id))

    def _stale(self, what: str, value: int) -> str:
        return (
            f"{what} {value} is not valid here: frame ids and references last only until the "
            "program moves (a step or continue makes them stale); call stack (then scopes) "
            "again and use the ids it gives"
        )

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

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "adapter": self.row.name if self.row else "",
            "program": self.program,
            "stopped": self.last_stop if self.state == "stopped" else {},
            "exit_code": self.exit_code,
            "end_reason": self.end_reason,
            **self.all_breakpoints(),
        }


def _cap(text: str, limit: int = MAX_VALUE) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text) - limit} more characters)"
