"""`ProcessActor`: a resource actor that owns one subprocess (language server, debug adapter,
kernel, worker).

The subprocess runs in its own session and process group and dies with its actor (Linux
parent-death signal, so even a SIGKILLed actor leaves no orphan). Its stdout, stderr and a
pidfd are watched with ThespianWatch: no threads, the message loop never blocks, and the
death of the process is noticed as soon as the kernel reports it. Writes are buffered and
non-blocking; stderr keeps a bounded tail for status and error messages. On stop the whole
process tree is killed (psutil) with SIGKILL, without waiting for it to cooperate: the
stop runs in a message handler, and the actor process exits right after it anyway.

A subprocess started with `env=self.new_scratch(name).env()` writes its temp files into
its own private directory (`tether.scratch`), removed once it ended (after `on_exit`) or
with the actor.

`spawn(..., place=...)` starts it in a place (`tether.places`): the command is wrapped
(bubblewrap for a sandbox), and everything above stays true of the wrapped process (its
pid is the one watched and killed; the place's init takes the rest down with it). When it
ends, the place's cgroup is released, and an exit caused by a limit of the place says so.
Starting, the pidfd, the kill and the words of its end are `OwnedProcess`'s
(`tether.owned_process`), shared with the kernel handle; the pipes are here.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from tether.actors.base import FLUSH_RETRY, ResourceActor
from tether.channels import OutBuffer
from tether.health_node import HealthNode
from tether.owned_process import OwnedProcess
from tether.places import Place
from tether.scratch import ProcessScratch

STDERR_TAIL_BYTES = 8192
READ_CHUNK = 65536


@dataclass(frozen=True)
class StdinFlush:
    """Timer tag: retry the writes the subprocess's stdin did not take."""


class ProcessActor(ResourceActor):
    """A resource actor that owns one subprocess (language server, adapter, kernel, worker).

    The subprocess runs in its own session and process group, dies with its actor (parent
    death signal), and is watched through ThespianWatch on its stdout, stderr and a pidfd:
    its death is noticed as soon as the kernel reports it, not by polling.
    """

    def __init__(self) -> None:
        super().__init__()
        self.owned: OwnedProcess | None = None  # the subprocess, started in its place
        self._stderr_tail: collections.deque[bytes] = collections.deque()
        self._stderr_len = 0
        self._stdin: OutBuffer | None = None
        self._flush_armed = False
        self._watched: list[int] = []
        self._argv: list[str] = []
        self._scratch: ProcessScratch | None = None
        self._made_ahead: ProcessScratch | None = None  # make_scratch_ahead
        self.place_name = "host"  # where its last subprocess ran (health)

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        """The subprocess (its pipes, its return code), None before the first spawn."""
        return self.owned.popen if self.owned is not None else None

    # --- provided --------------------------------------------------------------------
    def spawn(
        self,
        argv: list[str],
        cwd: str,
        env: dict[str, str] | None = None,
        place: Place | None = None,
        workspace: str | None = None,
        rw: list[str] | None = None,
        workspace_from: str | None = None,
    ) -> int:
        """Start the subprocess (own process group, stdin/stdout/stderr pipes); returns its pid.
        place: where it runs (default the host; tether.places.wrap), workspace: the
        conversation's directory there (read-write), rw: more directories of its own,
        workspace_from: what a sandbox binds at the workspace's path (a worker's view)."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError(f"{self.name} already runs a subprocess (pid {self.proc.pid})")
        self._argv = list(argv)
        self._release_place()
        self.place_name = (place or Place.host()).describe()
        scratch = [str(self._scratch.base)] if self._scratch is not None else []
        self.owned = owned = OwnedProcess.start(
            argv,
            cwd=cwd,
            env=env,
            place=place,
            workspace=workspace,
            rw=[*scratch, *(rw or [])],
            group=self.name.split("/", 1)[0],  # a run's processes share its limits
            workspace_from=workspace_from,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        proc = owned.popen
        assert proc is not None and proc.stdin and proc.stdout and proc.stderr
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(stream.fileno(), False)
        self._stdin = OutBuffer(proc.stdin.fileno())
        self._watched = [proc.stdout.fileno(), proc.stderr.fileno()]
        if owned.pidfd is not None:  # (else, an old kernel: its end is EOF on stdout)
            self._watched.append(owned.pidfd)
        if self._life.started:
            self._report_pids()
        return proc.pid

    def new_scratch(self, name: str) -> ProcessScratch:
        """A private scratch directory for the next subprocess (start it with its `env()`):
        the previous one is removed, this one once that subprocess ended."""
        self._remove_scratch()
        made, self._made_ahead = self._made_ahead, None
        self._scratch = made or ProcessScratch(name)
        return self._scratch

    def make_scratch_ahead(self, name: str) -> None:
        """Make the next `new_scratch` now, while no call waits for it (a few ms of
        directory work a start would otherwise add)."""
        if self._made_ahead is None:
            self._made_ahead = ProcessScratch(name)

    def _remove_scratch(self) -> None:
        scratch, self._scratch = self._scratch, None
        if scratch is not None:
            scratch.close()

    def write(self, data: bytes) -> None:
        """Write to the subprocess's stdin (buffered; never blocks the message loop)."""
        if self.proc is None or self._stdin is None:
            raise RuntimeError(f"{self.name} has no subprocess to write to; call spawn() first")
        if not self._stdin.write(data):
            self._arm_flush()

    def on_stdout(self, data: bytes) -> None:
        """Bytes arrived on the subprocess's stdout."""

    def on_exit(self, returncode: int | None) -> None:
        """The subprocess died. Default: fail every pending call (resource_died) and exit the
        actor abnormally so the supervisor applies the restart policy."""
        message = self.exit_message(returncode)
        for call in self.open_calls():
            self.fail_dying(call, message + "; it is being restarted, call again")
        self.stop("crash", message)

    def exit_message(self, returncode: int | None) -> str:
        owned = self.owned
        pid = owned.pid if owned is not None else "?"
        argv0 = os.path.basename(self._argv[0]) if self._argv else "subprocess"
        how = owned.how_it_ended(returncode) if owned is not None else "ended"
        tail = self.stderr_tail().strip()
        tail = f"; stderr tail: {tail[-500:]}" if tail else ""
        return f"{self.name}: {argv0} (pid {pid}) {how}{tail}"

    def _release_place(self) -> None:
        if self.owned is not None:
            self.owned.release_place()

    def stderr_tail(self) -> str:
        """The last few KiB of the subprocess's stderr, for status and errors."""
        return b"".join(self._stderr_tail).decode("utf-8", "replace")

    def kill_process(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to the subprocess's process group (fault injection, hard stops)."""
        if self.owned is not None:
            self.owned.signal_group(sig)

    def health_node(self) -> HealthNode:
        """Health, with the place its subprocess runs in (tether.places)."""
        node = super().health_node()
        node["place"] = self.place_name
        return node

    # --- machinery -------------------------------------------------------------------
    def watch_fds(self) -> list[int]:
        return list(self._watched)

    def owned_pids(self) -> list[int]:
        return self.owned.owned_pids() if self.owned is not None else []

    def inject_kill_process(self) -> tuple[bool, str]:
        if self.proc is None or self.proc.poll() is not None:
            return False, f"{self.name} has no live subprocess to kill"
        pid = self.proc.pid
        self.kill_process(signal.SIGKILL)
        return True, f"sent SIGKILL to {self.name}'s process group {pid}"

    def handle_watch(self, ready: list[int]) -> None:
        proc, pidfd = self.proc, self.owned.pidfd if self.owned is not None else None
        if proc is None or (proc.stdout is not None and proc.stdout.closed):
            return  # released (or its exit handled): a late event for closed pipes
        if proc.stdout is not None and proc.stdout.fileno() in ready:
            self._read(proc.stdout.fileno(), self._dispatch_stdout)
            if proc.stdout.closed:  # what it read led to a release
                return
        if proc.stderr is not None and proc.stderr.fileno() in ready:
            self._read(proc.stderr.fileno(), self._add_stderr)
        if (
            (pidfd is not None and pidfd in ready)
            or not self._watched
            or (
                pidfd is None
                and proc.stdout is not None
                and proc.stdout.fileno() not in self._watched
            )
        ):
            if proc.poll() is not None:
                self._process_exited(proc.returncode)

    def drain_stdout(self) -> None:
        """Take what the process has written to its stdout already (never waits): before a
        message that arrived another way is acted on, so what it printed comes first."""
        proc = self.proc
        if proc is not None and proc.stdout is not None and not proc.stdout.closed:
            self._read(proc.stdout.fileno(), self._dispatch_stdout)

    def _read(self, fd: int, sink: Callable[[bytes], None]) -> None:
        while True:
            try:
                data = os.read(fd, READ_CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # EOF: stop watching this fd
                self._watched = [w for w in self._watched if w != fd]
                return
            sink(data)
            if len(data) < READ_CHUNK:
                return

    def _dispatch_stdout(self, data: bytes) -> None:
        try:
            self.on_stdout(data)
        except Exception as exc:
            self.last_error = f"on_stdout failed: {exc!r}"
            self._log_exception(exc)

    def on_stderr(self, data: bytes) -> None:
        """Bytes arrived on the subprocess's stderr (its tail is kept for `stderr_tail`)."""

    def _add_stderr(self, data: bytes) -> None:
        try:
            self.on_stderr(data)
        except Exception as exc:
            self.last_error = f"on_stderr failed: {exc!r}"
            self._log_exception(exc)
        self._stderr_tail.append(data)
        self._stderr_len += len(data)
        while self._stderr_len > STDERR_TAIL_BYTES and len(self._stderr_tail) > 1:
            self._stderr_len -= len(self._stderr_tail.popleft())
        if self._stderr_len > STDERR_TAIL_BYTES:
            only = self._stderr_tail.pop()[-STDERR_TAIL_BYTES:]
            self._stderr_tail.append(only)
            self._stderr_len = len(only)

    def _process_exited(self, returncode: int | None) -> None:
        proc = self.proc
        if proc is None:
            return
        for stream, sink in ((proc.stdout, self._dispatch_stdout), (proc.stderr, self._add_stderr)):
            if stream is not None:
                self._read(stream.fileno(), sink)
        self._close_pipes()
        if self._life.stopping:
            return
        ended = self._scratch
        try:
            self.on_exit(returncode)
        except Exception as exc:
            self._log_exception(exc)
            self.stop("crash", self.exit_message(returncode))
        finally:  # (after on_exit: it kills what the process left; unless it started anew)
            if ended is not None and self._scratch is ended:
                self._remove_scratch()
            if self.proc is proc:
                self._release_place()

    def _close_pipes(self) -> None:
        self._watched = []
        if self._stdin is not None:
            self._stdin.close()
        if self.owned is not None:
            self.owned.close_pidfd()
        if self.proc is not None:
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()

    def _arm_flush(self) -> None:
        # (a process that is dying takes nothing more: OutBuffer drops it, and its exit
        # is noticed through the pidfd)
        if not self._flush_armed:
            self._flush_armed = True
            self.wakeupAfter(FLUSH_RETRY, StdinFlush())

    def handle_wakeup(self, payload: object) -> None:  # (a tag of any class: matched on)
        match payload:
            case StdinFlush():
                self._flush_armed = False
                if self._stdin is not None and not self._stdin.flush():
                    self._arm_flush()
            case _:
                super().handle_wakeup(payload)

    def release(self) -> None:
        super().release()
        if self.owned is not None:
            # SIGKILL to the group and every descendant at once: a SIGTERM grace period
            # (0.5 s, then up to 1 s more) held the handler, and so the actor's exit and the
            # host's news of it, for as long as the process took to cooperate. A graceful
            # exit is the protocol's business, asked for in on_stop (LSP shutdown/exit).
            self.owned.kill()
            self._close_pipes()
        self._remove_scratch()
        self._release_place()
        made, self._made_ahead = self._made_ahead, None
        if made is not None:
            made.close()
