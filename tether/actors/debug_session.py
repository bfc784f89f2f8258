"""DebugSessionActor: one conversation's debug session, driving a real debug adapter (DAP).

A thin shell around `tether.debug.session.Session` (the sans-io client and the ops as DAP
exchanges): the actor owns the adapter process (ProcessActor: own session and process
group, pipes watched with ThespianWatch, tree killed on exit), feeds the session what
arrives, turns its timer requests into `after()` and its settlements into replies.
Nothing here waits: a launch that needs delve's port first waits for delve's first line
of stdout (a message), a response or an event is a message, a deadline is a timer.

Session rules (SPEC.md "debug"):
- one session per conversation: the key is fixed, and a second `launch` while a program
  is being debugged is refused with how to end the first;
- calls are served one at a time, in order (a `continue` racing a `stack` would read
  frames that already moved): the others queue behind the one in flight;
- the hard TTL is the kind's ChildSpec ttl: the supervisor stops this actor, which kills
  the adapter and the debuggee, and tells the next incarnation why (`Start.previous_end`),
  whose next call says so;
- an adapter that dies ends the session (the debuggee is killed with it), the call in
  flight gets the reason, later calls too, and a new `launch` starts afresh;
- `terminate` disconnects, kills everything the session started and ends this actor
  (the next call starts a fresh session, with a fresh TTL).

Its parts: what a launch or attach asks of the adapter (`debug.launch`), the adapter's
socket when it speaks over TCP (`debug.adapter_socket`), whether the debuggee ended at the
memory ceiling (`debug.ceiling`), and the processes of the adapter's
session (`debug.session_processes`): a stop kills the adapter's tree and every process of
that session. The pids are reported to the supervisor when the program starts (its
`process` event) and after a launch, so a SIGKILLed actor's debuggee is reaped by the
supervisor too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import time
from pathlib import Path

from thespian.actors import ActorAddress

from tether.actors.base import ResourceUnavailable
from tether.actors.process import ProcessActor
from tether.capacity.ceiling import ResourceCeiling
from tether.channels import OutBuffer
from tether.debug import adapters
from tether.debug.adapter_socket import AdapterSocket, ListenDeadline, no_listen_line
from tether.debug.adapters import AdapterRow
from tether.debug.ceiling import at_ceiling
from tether.debug.driver import DebugError, Op, WaitDue
from tether.debug.launch import (
    adapter_place,
    adapter_request,
    adapter_row,
    restore_breakpoints,
    successor,
)
from tether.debug.session import Session
from tether.debug.session_processes import SessionProcesses
from tether.json_types import JSONObject
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import Call, ErrorCode, ResourceError
from tether.messages.control import Start
from tether.messages.debug_ops import (
    DEBUG,
    KIND,
    Attach,
    Continue,
    DebugReply,
    Evaluate,
    Launch,
    Output,
    OutputReply,
    Pause,
    Scopes,
    SetBreakpoints,
    SetExceptionBreakpoints,
    SetFunctionBreakpoints,
    Stack,
    Status,
    StatusReply,
    StepIn,
    StepOut,
    StepOver,
    Terminate,
    TerminateReply,
    Threads,
    Variables,
    debug_payload,
)
from tether.messages.ops import op_name
from tether.protocol import FramingError

SESSION_TTL = 1800.0  # s: SPEC.md "debug", a hard TTL


# the ops that let the program run until it stops (a cancelled one pauses it)
RUN_CONTROL = frozenset(op_name(op) for op in (Continue, StepOver, StepIn, StepOut))


class DebugSessionActor(ProcessActor):
    kind_name = KIND

    def on_start(self, key: str, config: JSONObject) -> None:
        try:  # the adapter and its program under one hard memory ceiling (capacity.ceiling)
            self.ceiling = ResourceCeiling("debug_session", config)
        except ValueError as e:
            raise ResourceUnavailable(str(e)) from e
        self.session = Session(self)
        self.queue: list[Call] = []
        self.busy: Call | None = None
        self.link = AdapterSocket()  # delve's (or an attached DAP server's) socket
        self.procs = SessionProcesses()  # what the session started and must end
        self.row: AdapterRow | None = None
        self._ending = False  # we are ending the adapter ourselves (terminate, relaunch)
        self._program_reported = False  # the supervisor knows the program's pids

    def handle_message(
        self, obj: object, data: bytes, extra: ActorAddress | None, sender: ActorAddress
    ) -> None:
        if isinstance(obj, Start):
            self.ttl = obj.child.get("ttl")
        super().handle_message(obj, data, extra, sender)

    # --- calls, one at a time ---------------------------------------------------------------
    def on_call(self, call: Call) -> None:
        if self.busy is not None:
            self.queue.append(call)
            return
        self._serve_or_fail(call)

    def on_cancel(self, call: Call, reason: str) -> None:
        """A queued call is dropped; a run-control call whose caller gave up pauses the
        program, so the conversation's next call finds it stopped, not running on."""
        if call in self.queue:
            self.queue.remove(call)
            self.fail(call, ErrorCode.CANCELLED, f"{call.op} was cancelled: {reason}")
        elif self.busy is call and call.op in RUN_CONTROL:
            self.session.pause_now()

    def _serve_or_fail(self, call: Call) -> None:
        try:
            self._serve(call)
        except DebugError as e:
            self.error(call, e.code, e.message)
        except ResourceError as e:  # an OpError: the call does not fit the vocabulary
            self.fail(call, e.code, f"{self.name}: {e.message}")
            self._next()
        except Exception as e:  # noqa: BLE001 - an op that cannot start fails its call
            self._log_exception(e)
            self.error(call, ErrorCode.FAILED, f"{type(e).__name__}: {e}")

    def _next(self) -> None:
        self.busy = None
        while self.queue and self.busy is None:
            call = self.queue.pop(0)
            if call.call_id not in self._open:
                continue  # its deadline passed while it queued (the base failed it)
            self._serve_or_fail(call)

    def _serve(self, call: Call) -> None:
        self.busy = call
        op = DEBUG.parse(call)
        s = self.session
        match op:
            case Status():
                self.done(call, self._status())
            case SetBreakpoints(file=file, breakpoints=specs):
                s.run(s.set_breakpoints(file, list(specs)), call)
            case SetFunctionBreakpoints(functions=specs):
                s.run(s.set_functions(list(specs)), call)
            case SetExceptionBreakpoints(exceptions=kinds):
                s.run(s.set_exceptions(list(kinds)), call)
            case Launch() | Attach():
                self._start_session(op, call)
            case Continue(thread_id=t, wait=w):
                self._run(s.resume("continue", t, w), call)
            case StepOver(thread_id=t, wait=w):
                self._run(s.resume("next", t, w), call)
            case StepIn(thread_id=t, wait=w):
                self._run(s.resume("stepIn", t, w), call)
            case StepOut(thread_id=t, wait=w):
                self._run(s.resume("stepOut", t, w), call)
            case Pause(thread_id=t, wait=w):
                self._run(s.pause(t, w), call)
            case Threads():
                self._run(s.threads(), call)
            case Stack(thread_id=t):
                self._run(s.stack(t), call)
            case Scopes(frame_id=f):
                self._run(s.scopes(f), call)
            case Variables(reference=r):
                self._run(s.variables(r), call)
            case Evaluate(expression=e, frame_id=f):
                self._run(s.evaluate(e, f), call)
            case Output():
                self.done(call, self._output())
            case Terminate():
                self._ending = True  # the adapter may exit before it answers disconnect
                s.run(s.disconnect(), call)

    def _run(self, op: Op, call: Call) -> None:
        """An op that needs a session: say why there is none, or run it."""
        if self.session.state in ("none", "ended") and self.previous_end:
            self.error(call, ErrorCode.BAD_REQUEST, self._no_session())
            return
        self.session.run(op, call)

    def _no_session(self) -> str:
        return (
            f"no debug session: the previous one ended ({self.previous_end}); its adapter and "
            "program were killed. Call launch to start a new one"
        )

    # --- SessionIO ------------------------------------------------------------------------
    def send_dap(self, data: bytes) -> None:
        if self.proc is None or self.proc.poll() is not None:
            if self._stdin is not None and not self._stdin.write(data):
                self._arm_flush()  # a connection without a process of ours (debugpy attach)
            return
        self.write(data)

    def done(self, token: Call, reply: DebugReply) -> None:
        reply = at_ceiling(reply, self.session.output, self.ceiling.note)
        if isinstance(reply, TerminateReply):
            self._end_everything()
            reply = dataclasses.replace(reply, processes_left=self.procs.left())
            self.reply(token, debug_payload(reply))
            self.stop("normal", "terminated by the terminate op")
            return
        if self.session.state == "exited" and self.proc is not None:
            self._end_adapter()  # the program is gone: so is its adapter (output stays)
        elif token.op in ("launch", "attach") and not self._program_reported:
            self._report_pids()  # (a walk over every process: only when they change)
        self.reply(token, debug_payload(reply))
        self._next()

    def exit_message(self, returncode: int | None) -> str:
        """The base's, and whether the adapter died at the session's memory ceiling."""
        message = super().exit_message(returncode)
        over = self.ceiling.note(self.stderr_tail()) if hasattr(self, "ceiling") else ""
        return f"{message}; {over}" if over else message

    def error(self, token: Call, code: str, message: str) -> None:
        row = self.row
        if token.op == "attach" and row is not None and self.session.state == "starting":
            message += f" ({row.name} attaches to a {row.attach_help})"
        self.fail(token, code, f"{token.op}: {message}")
        if token.op in ("launch", "attach") and self.session.state == "starting":
            self.session.state = "ended"
            self.session.end_reason = f"{token.op} failed: {message}"
            self._end_adapter()
        self._next()

    # write(bytes) and after(seconds, tag) are ProcessActor's own.

    # --- starting a session -----------------------------------------------------------------
    def _start_session(self, op: Launch | Attach, call: Call) -> None:
        row, binary = adapter_row(op, self.session)
        self._end_adapter()  # an exited program's adapter, if still there
        self.procs.reap(self.proc)
        # breakpoints set before a crash (or a retried launch) went with that incarnation:
        # the host keeps the run's and sends them along; those missing here are set again
        why = self.previous_end or "the run's actors were started anew"
        restored = restore_breakpoints(self.session, op, why)
        self.previous_end = ""
        root = Path(op.root)
        req = adapter_request(op, row)
        self.procs.built = req.built
        fresh = successor(self.session, self, restored)
        self.session = fresh
        self.row = row
        self._ending = False
        self._program_reported = False
        if isinstance(op, Attach) and op.pid is None and row.port_attach == "connect":
            # the port is a DAP server already (debugpy --listen, dlv --headless): join it
            self.procs.adapter_pid = 0
            try:
                self._connect("127.0.0.1", int(op.port or 0))
            except OSError as e:
                raise DebugError(
                    ErrorCode.FAILED,
                    f"nothing accepts on 127.0.0.1:{op.port} ({e}); {row.name} attaches to a "
                    f"{row.attach_help}",
                ) from e
            fresh.run(req.start(fresh, row), call)
            return
        argv = adapters.adapter_argv(row, binary)
        # its own TMPDIR (and its program's), removed once it ended
        env = adapters.adapter_env(row, self.new_scratch(row.name))
        place = adapter_place(op, row)
        self.link.relay = ""
        if place is not None and place.kind == "sandbox" and row.transport == "tcp":
            argv = self.link.relayed_argv(row, binary, self._scratch)
        rw: list[str] = []
        if place is not None and place.kind == "sandbox" and row.cache_env:
            env.update(self.procs.place_caches(row))
            rw.append(str(self.procs.caches().base))
        # in the run's place: the adapter, and so the program it starts (tether.places)
        pid = self.spawn(argv, cwd=str(root), env=env, place=place, workspace=str(root), rw=rw)
        # at once: the program it starts inherits the rlimit, or is born in the cgroup
        on_host = place is None or place.kind == "host"
        self.ceiling.put([pid], f"debug-{pid}", on_host=on_host)
        self.procs.adapter_started(pid)
        gen = req.start(fresh, row)
        if row.transport == "tcp":
            self.link.wait_for_port(gen, call)
            fresh.state = "starting"
            self.after(row.startup_timeout, ListenDeadline())
        else:
            fresh.run(gen, call)

    def _connect(self, host: str, port: int) -> None:
        """A DAP server listens (our delve, or the one an attach joins): connect (loopback
        only), and the socket becomes our write end; the adapter's stdin pipe is closed so
        that the program reads end-of-file."""
        sock = self.link.connect(host, port)
        if self.proc is not None and self.proc.poll() is None and self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        self._stdin = OutBuffer(sock.fileno())

    # --- what arrives -----------------------------------------------------------------------
    def on_stdout(self, data: bytes) -> None:
        row = self.row
        if row is not None and row.transport == "tcp":
            if self.link.waiting is not None:
                heard = self.link.listen_line(data)
                if heard:
                    host, port, rest = heard
                    self._listened(host, port)
                    if rest:
                        self.session.output.add(rest.decode("utf-8", "replace"))
                return
            self.session.output.add(data.decode("utf-8", "replace"))  # the program's output
            return
        self._feed(data)

    def _listened(self, host: str, port: int) -> None:
        waiting = self.link.take_waiting()
        assert waiting is not None
        gen, call = waiting
        try:
            self._connect(host, port)
        except (OSError, DebugError) as e:
            self.error(call, ErrorCode.FAILED, f"cannot connect to delve on {host}:{port}: {e}")
            return
        self.session.run(gen, call)

    def _feed(self, data: bytes) -> None:
        try:
            self.session.feed(data)
        except FramingError as e:
            self._adapter_broke(f"the adapter's output is not DAP ({e})")
        if self.session.process_started:
            self.session.process_started = False
            self._program_reported = True
            self._report_pids()  # the program runs: a crashed actor's supervisor reaps it

    def watch_fds(self) -> list[int]:
        fds = super().watch_fds()
        if self.link.sock is not None:
            fds.append(self.link.sock.fileno())
        return fds

    def handle_watch(self, ready: list[int]) -> None:
        # the program's output (delve's stdout) first: an exit read from the socket in the
        # same wake-up settles the call with the output tail
        sock = self.link.sock
        sock_ready = sock is not None and sock.fileno() in ready
        super().handle_watch(ready)
        if sock_ready and sock is self.link.sock and sock is not None:
            self._read_socket(sock)

    def _read_socket(self, sock: socket.socket) -> None:
        while self.link.sock is sock:
            data = self.link.recv(sock)
            if data is None:
                return
            if not data:
                self.link.close()
                self._adapter_ended("the adapter closed its connection")
                return
            # the program's output (delve's stdout) before the events that follow it: an
            # `exited` read first would end the adapter with the last lines still unread
            self.drain_stdout()
            self._feed(data)

    def on_timer(self, tag: ListenDeadline | WaitDue) -> None:
        if isinstance(tag, ListenDeadline):
            waiting = self.link.take_waiting()
            if waiting is not None:
                message = no_listen_line(self.row, self.stderr_tail())
                self.error(waiting[1], ErrorCode.DEADLINE, message)
            return
        self.session.on_timer(tag)

    # --- the adapter's end ------------------------------------------------------------------
    def on_exit(self, returncode: int | None) -> None:
        why = self.exit_message(returncode)
        self.procs.kill()
        if self.link.sock is not None:
            self._read_socket(self.link.sock)  # what it said last (delve: the exit code)
        self.link.close()
        waiting = self.link.take_waiting()
        if waiting is not None:
            self.error(waiting[1], ErrorCode.RESOURCE_DIED, why)
            return
        self._adapter_ended(why)

    def _adapter_ended(self, why: str) -> None:
        """The adapter went away (its process, or its connection). Expected while we end
        it or after the program exited: an op waiting on it (disconnect) hears it and may
        carry on. Otherwise the session broke."""
        if self._ending or not self.session.live:
            self.session.interrupt(DebugError(ErrorCode.RESOURCE_DIED, why))
            return
        self._adapter_broke(why)

    def _adapter_broke(self, why: str) -> None:
        """The adapter died or broke the protocol: the session is over, and says why."""
        message = (
            f"the debug session ended: {why}; its program was killed with it. "
            "Call launch to start a new session"
        )
        self._end_adapter()
        self.session.adapter_gone(message)
        self.previous_end = why

    def _end_adapter(self) -> None:
        """Kill the adapter, the program and whatever they started (no waiting on them)."""
        self._ending = True
        self.procs.end(self.proc)
        self.link.close()
        self.procs.remove_built()

    def _end_everything(self) -> None:
        self._end_adapter()
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=0.2)

    def owned_pids(self) -> list[int]:
        pids = dict.fromkeys(super().owned_pids())
        for p in self.procs.members():
            pids[p.pid] = None
        return list(pids)

    def release(self) -> None:
        self.procs.kill()
        self.link.close()
        self.procs.remove_built()
        super().release()
        self.procs.close_caches()
        if hasattr(self, "ceiling"):
            self.ceiling.release()

    def handle_exit_request(self) -> None:
        uptime = time.monotonic() - self.started_at
        if self.ttl and uptime >= self.ttl * 0.99 and not self.last_error:
            self.last_error = f"its hard TTL of {self.ttl:g} s expired"
        super().handle_exit_request()

    # --- replies without the adapter --------------------------------------------------------
    def _status(self) -> StatusReply:
        st = self.session.status()
        if st.state in ("none", "ended") and self.previous_end:
            st = dataclasses.replace(
                st, end_reason=st.end_reason or self.previous_end, previous_end=self.previous_end
            )
        uptime = round(time.monotonic() - self.started_at, 1)
        return dataclasses.replace(st, pids=self.owned_pids(), ttl=self.ttl, uptime=uptime)

    def _output(self) -> OutputReply:
        s = self.session
        return OutputReply(s.output.text(), s.output.dropped, s.state)

    def health_extra(self) -> JSONObject:
        s = getattr(self, "session", None)
        if s is None:
            return {}
        return {
            "adapter": s.row.name if s.row else "",
            "state": s.state,
            "program": s.program,
            "queued": len(getattr(self, "queue", [])),
        }


KINDS: list[KindSpec] = [
    KindSpec(
        kind=KIND,
        actor_class="tether.actors.debug_session:DebugSessionActor",
        scope=Scope.RUN,
        # never restarted: a debug session is state the agent built step by step, a fresh
        # one would silently be another; the next call starts a new one and says why
        child=ChildSpec(restart=Restart.TEMPORARY, shutdown_timeout=2.0, ttl=SESSION_TTL),
    )
]
