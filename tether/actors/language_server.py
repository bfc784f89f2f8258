"""LanguageServerActor: one language server process for one (server, root), shared by runs.

The actor is a thin shell around `Session` (the sans-io client state machine): it spawns
the server (ProcessActor: own process group, pipes watched with ThespianWatch, tree killed
on exit), feeds the session what the pipes deliver, turns the session's timer requests
into `after()` and its settlements into `reply()`/`fail()`. Nothing here waits: readiness
is the `initialize` answer (a message), deadlines and quiet windows are timers.

Key: "<server>:<absolute root>" (see `servers.make_key`). The start re-applies the
intersection rule and raises `ResourceUnavailable` when the marker or the binary is
missing, so the supervisor does not retry what cannot work. A row with a `probe_argv`
(rust-analyzer: `~/.cargo/bin/rust-analyzer` may be a rustup proxy with nothing behind it)
first runs that probe as the actor's own subprocess, watched like the server and bounded by
a timer (`PROBE_TIMEOUT`), with the start deferred (`defer_start`): the message loop keeps
answering health meanwhile and the supervisor holds the calls; a probe that fails ends the
start as unavailable, in the probe's own words. (The host only looks the binary up, it runs
no process: the probe's answer reaches the caller as this start's failure.)

Sharing: one actor serves every run on its root, so no run may hold the server up for the
others (`tether.lsp.limits`, the kind's config): each request has a budget and is cancelled
past it (for basedpyright also by file: `tether.lsp.cancellation`), a file over the size
limit is never opened, and a server that answers nobody for the stall timeout is treated as
dead: its calls fail with resource_died and the actor stops as a crash, to be restarted.

Faults: the server dying mid-request fails every open call with `resource_died` (an
idempotent query is retried once by the runtime on the next incarnation) and stops the
actor as a crash, so the supervisor restarts it within its intensity, or gives up and
says why. `reload` restarts the server inside the same actor and answers once the new
one has initialized.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from tether.actors.base import ResourceUnavailable
from tether.actors.process import ProcessActor
from tether.capacity.ceiling import OVER_WORDS, ResourceCeiling
from tether.json_types import JSONObject
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.lsp import cancellation
from tether.lsp.cancellation import FileCancellation
from tether.lsp.limits import LspLimits
from tether.lsp.servers import BY_NAME, find_binary, launch_argv, split_key
from tether.lsp.session import Session
from tether.lsp.session.timers import Deadline, SessionTimer
from tether.messages.calls import Call, ErrorCode, Wire
from tether.messages.language_server_ops import (
    LANGUAGE_SERVER,
    LanguageServerOp,
    LanguageServerReply,
    Reload,
    Status,
    StatusReply,
    reply_payload,
)
from tether.places import PlaceError
from tether.places.registry import recall, split_place

PROBE_TIMEOUT = 10.0  # s a binary's probe (`rust-analyzer --version`) may take to answer
PROBE_OUTPUT = 4096  # bytes of the probe's stdout kept for the message when it fails


@dataclass(frozen=True)
class ProbeDeadline:
    """Timer tag: the binary's probe took too long."""


@dataclass(frozen=True)
class StartupCheck:
    """Timer tag: the server should have initialized by now."""


class LanguageServerActor(ProcessActor):
    kind_name = "language_server"

    # --- lifecycle ------------------------------------------------------------------------
    def on_start(self, key: str, config: JSONObject) -> None:
        try:
            name, root = split_key(key)
        except ValueError as e:
            raise ResourceUnavailable(str(e)) from e
        self.row = BY_NAME[name]
        self.root = root
        try:  # the place its runs share (a suffix of the key, tether.places.registry)
            self.place = recall(split_place(key)[1])
        except PlaceError as e:
            raise ResourceUnavailable(f"{name}: {e}") from e
        try:
            self.limits = LspLimits.from_config(config)
        except (TypeError, ValueError) as e:
            raise ResourceUnavailable(f"{name}: bad limits in the kind's config: {e}") from e
        try:  # a hard memory ceiling (tether.capacity.ceiling): a runaway ends only its server
            self.ceiling = ResourceCeiling(self.kind_name, config)
        except ValueError as e:
            raise ResourceUnavailable(str(e)) from e
        # the first answer of a server started again after its predecessor hit the ceiling
        # says so (an eviction's cold start is said by the base actor)
        over = self.previous_end.find(OVER_WORDS)
        died = f"its server died at its memory ceiling ({self.previous_end[over:]})"
        self.start_notes = [f"{self.name} was restarted: {died}"] if over >= 0 else []
        self.cancels: FileCancellation | None = None
        try:  # (false: basedpyright without its checker thread, `tether.lsp.cancellation`)
            self.file_cancellation = cancellation.wanted(config)
        except ValueError as e:
            raise ResourceUnavailable(str(e)) from e
        if not root.is_dir():
            raise ResourceUnavailable(f"{name}: root {root} is not a directory")
        if not any((root / m).exists() for m in self.row.root_markers):
            raise ResourceUnavailable(
                f"{name}: no root marker ({', '.join(self.row.root_markers)}) in {root}"
            )
        binary = find_binary(self.row, root)
        if not binary:
            raise ResourceUnavailable(
                f"{name}: binary {' / '.join(self.row.binaries)} not found on PATH"
            )
        self.binary = binary
        self.reloads = 0
        self.reload_waiters: list[Call] = []
        self._reloading = False
        self._probing = False
        if self.row.probe_argv:
            self.defer_start()
            self._probe()
        else:
            self._launch()

    def _probe(self) -> None:
        """Run the row's probe (`<binary> --version`) before the server, without waiting on
        it: its exit arrives through the pidfd watch (`on_exit`), its deadline as a timer."""
        self._probing = True
        self._probe_timed_out = False
        self._probe_stdout = b""
        self.spawn(
            [self.binary, *self.row.probe_argv],
            cwd=str(self.root),
            place=self.place,
            workspace=str(self.root),
        )
        self.after(PROBE_TIMEOUT, ProbeDeadline())

    def _probe_exited(self, returncode: int | None) -> None:
        self._probing = False
        if returncode == 0:
            self._launch()
            self.finish_start()
            return
        out = (self.stderr_tail() or self._probe_stdout.decode("utf-8", "replace")).strip()
        if self._probe_timed_out:
            why = f"no answer within {PROBE_TIMEOUT:g} s"
        else:
            why = out.splitlines()[0][:200] if out else f"exit {returncode}"
        name = Path(self.binary).name
        self.fail_start(
            f"{self.row.name}: binary {name} found at {self.binary} but does not run "
            f"({' '.join([name, *self.row.probe_argv])}: {why})",
            unavailable=True,
        )

    def _launch(self) -> None:
        # (in a sandbox the launcher's whole environment is bound: it stays there)
        start = launch_argv(self.row, self.binary) if self.place.kind == "host" else [self.binary]
        argv = [*start, *self.row.args]
        # where it writes, beside the workspace (the scratch of the server before a reload,
        # which has exited, goes)
        scratch = self.new_scratch(self.row.name)
        self.cancels = None
        # (a new folder each start: a new server numbers its requests from 1 again)
        if self.row.file_cancellation and self.file_cancellation:
            self.cancels = FileCancellation(self.row.file_cancellation, scratch.tmp)
            argv.append(self.cancels.arg)
        self.session = Session(
            self.row, self.root, self, limits=self.limits, canceller=self.cancels
        )
        self.set_state("starting")
        # a node server's V8 heap limit sits inside its ceiling (tsserver inherits it)
        heap = self.ceiling.node_options() if self.row.node_options else []
        pid = self.spawn(
            argv,
            cwd=str(self.root),
            env=scratch.env(go_offline=True, given=self.row.extra_env(os.environ, heap)),
            place=self.place,
            workspace=str(self.root),
        )
        # (at once: the processes it starts later - node under basedpyright's launcher,
        # tsserver - inherit the rlimit, or are born in the cgroup)
        host = self.place.kind == "host"
        self.ceiling.put([pid], f"lsp-{pid}", v8=bool(self.row.node_options), on_host=host)
        # (processId: a server exits once that pid is gone; in a place's own pid namespace
        # the host's pids do not exist, and 1 is the place's init, alive as long as it is)
        self.session.start(pid if self.place.kind == "host" else 1)
        self._check_started()
        self.after(self.row.startup_timeout + 0.5, StartupCheck())

    def _check_started(self) -> None:
        s = self.session.state
        if s == "ready" and self.state == "starting":
            self.set_state("ready")
            waiters, self.reload_waiters = self.reload_waiters, []
            for call in waiters:
                self.reply(call, self._noted(replace(self.status_payload(), reloaded=True)))
        elif s == "failed":
            why = self.session.error_text
            for call in self.reload_waiters:
                self.fail(call, ErrorCode.FAILED, f"{self.row.name} did not restart: {why}")
            self.reload_waiters = []
            # a server that said it broke as it ran out of memory (its worker thread's heap)
            # broke at its ceiling: the successor's first answer says so, as for a death
            over = self.ceiling.note(why)
            self.stop("crash", f"{self.row.name} for {self.root}: {over or why}")

    def on_stop(self) -> None:
        session = getattr(self, "session", None)
        if session is not None and self.proc is not None and self.proc.poll() is None:
            try:
                self.write(session.shutdown_bytes())
            except Exception:  # noqa: BLE001 - the process tree is killed right after anyway
                pass

    def on_exit(self, returncode: int | None) -> None:
        if self._probing:
            self._probe_exited(returncode)
            return
        if self._reloading:
            # reload: queries in flight move to the new server (they are idempotent), the
            # rest fail with a clear error; the actor itself stays
            self._reloading = False
            old = self.session
            moved = [op for op in old.ops.values() if op.token.idempotent]
            for op in moved:
                old.ops.pop(op.oid, None)
            old.on_exit(returncode)
            self.reloads += 1
            self._launch()
            for op in moved:
                self.session.handle(op.request, op.token, op.deadline + 0.05)
            return
        # The server died: the base fails every open call (leaving idempotent ones for the
        # runtime to retry once on the next incarnation) and stops us as a crash.
        super().on_exit(returncode)

    def exit_message(self, returncode: int | None) -> str:
        """The base's, and whether the server died at its memory ceiling (the words its
        successor's first answer repeats)."""
        message = super().exit_message(returncode)
        over = self.ceiling.note(self.stderr_tail()) if hasattr(self, "ceiling") else ""
        return f"{message}; {over}" if over else message

    def release(self) -> None:
        super().release()
        if hasattr(self, "ceiling"):
            self.ceiling.release()

    def _noted(self, reply: LanguageServerReply) -> Wire:
        """`reply` as its payload, with the start's notes on the first one."""
        if getattr(self, "start_notes", None):
            reply = replace(reply, notes=[*reply.notes, *self.start_notes])
            self.start_notes = []
        return reply_payload(reply)

    # --- SessionIO ------------------------------------------------------------------------
    def done(self, token: Call, reply: LanguageServerReply) -> None:
        self.reply(token, self._noted(reply))

    def error(self, token: Call, code: str, message: str) -> None:
        if code == ErrorCode.RESOURCE_DIED:  # the server is going (stuck): an idempotent
            self.fail_dying(token, message)  # call is sent on to the restarted one, once
        else:
            self.fail(token, code, message)

    # write(bytes) and after(seconds, tag) are ProcessActor's own.

    # --- events ---------------------------------------------------------------------------
    def on_stdout(self, data: bytes) -> None:
        if self._probing:
            self._probe_stdout = (self._probe_stdout + data)[-PROBE_OUTPUT:]
            return
        self.session.feed(data)
        if self.state == "starting" or self.session.state == "failed":
            self._check_started()

    def on_timer(self, tag: ProbeDeadline | StartupCheck | SessionTimer) -> None:
        match tag:
            case ProbeDeadline() if self._probing:
                self._probe_timed_out = True
                self.kill_process()  # its exit, seen through the pidfd, ends the probe
            case ProbeDeadline():
                pass
            case StartupCheck():
                if self.session.state == "starting":
                    self.session.on_timer(Deadline())
                self._check_started()
            case _:  # the session's own
                self.session.on_timer(tag)
                if self.session.state == "failed":
                    self._check_started()

    def on_call(self, call: Call) -> None:
        match LANGUAGE_SERVER.parse(call):
            case Reload():
                self.reload_waiters.append(call)
                if not self._reloading:
                    self._reloading = True
                    self.set_state("starting")  # the base queues calls until the new one is ready
                    self.kill_process()
            case Status():
                self.reply(call, self._noted(self.status_payload()))
            case request:  # the session serves the rest
                assert isinstance(request, LanguageServerOp)  # (parse gives this kind's ops)
                deadline = call.deadline or (time.monotonic() + 30.0)
                self.session.handle(request, call, deadline)

    def on_cancel(self, call: Call, reason: str) -> None:
        self.session.cancel(call, reason)  # (a call reaches on_cancel only after on_call)

    # --- health / status --------------------------------------------------------------------
    def status_payload(self) -> StatusReply:
        st = self.session.status()
        restarting = self._reloading or (self.state == "starting" and self.reloads)
        return replace(
            st,
            state="restarting" if restarting else st.state,
            pid=self.proc.pid if self.proc else None,
            binary=self.binary,
            reloads=self.reloads,
            restarts=self.restarts,
            uptime=round(time.monotonic() - self.started_at, 3),
            stderr_tail=self.stderr_tail()[-1500:],
        )

    def health_extra(self) -> JSONObject:
        st = self.session.status() if hasattr(self, "session") else None
        return {
            "server": self.row.name if hasattr(self, "row") else "",
            "root": str(getattr(self, "root", "")),
            "lsp_state": "probing"
            if getattr(self, "_probing", False)
            else (st.state if st else ""),
            "indexing": [*st.indexing] if st else [],
            "open_documents": st.open_documents if st else 0,
            "pending_requests": st.pending_requests if st else 0,
            "cancelled_requests": st.cancelled_requests if st else 0,
            "reloads": getattr(self, "reloads", 0),
            "memory_ceiling": self.ceiling.how() if hasattr(self, "ceiling") else "",
        }


KINDS: list[KindSpec] = [
    KindSpec(
        kind="language_server",
        actor_class="tether.actors.language_server:LanguageServerActor",
        scope=Scope.SHARED,
        # A server that crashes is restarted (transient); five crashes in a minute and the
        # supervisor gives up, which `lsp status` reports with the last reason.
        child=ChildSpec(
            restart=Restart.TRANSIENT,
            shutdown_timeout=3.0,
            max_restarts=5,
            period=60.0,
            backoff_initial=0.1,
            backoff_max=2.0,
            idle_ttl=1800.0,
        ),
        config={"limits": LspLimits().to_config()},
    )
]
