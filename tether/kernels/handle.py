"""The handle of a started Jupyter kernel: its process and wire, from launch through
handshake and prelude to "ready", then carrying cells. Not an actor: the kernel actor
(`tether.actors.kernel`) and the spare pool (`tether.actors.kernel_pool`) drive it from
their loops (messages, timers, its pidfd)."""

from __future__ import annotations

import contextlib
import time

import psutil

from tether.kernels import bridge, magics
from tether.kernels.launch import Launched, discard
from tether.kernels.layer import Layer
from tether.kernels.wire import KernelMessage, KernelWire
from tether.messages.kernel_ops import Spare
from tether.processes import descendants


def tree_rss_mb(pid: int) -> float:
    try:
        procs = [psutil.Process(pid), *descendants(pid)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            total += proc.memory_info().rss
    return total / 2**20


class KernelHandle:
    """One kernel process and its wire, from launch through handshake and prelude to
    "ready"; then it carries cells. Driven by its actor (messages, timers, its pidfd)."""

    def __init__(
        self, launched: Launched, nonce: str, prelude_done: bool, layer: Layer | None = None
    ) -> None:
        self.launched = launched
        self.layer = layer  # the Python layer it runs on (a spare's: handed over with it)
        self.language = launched.language
        self.nonce = nonce
        self.wire = KernelWire(launched.connection, launched.language)
        self.ready = False
        self.prelude_done = prelude_done  # a spare: it ran its prelude in the pool
        self.started_at = time.monotonic()
        self.info_id = ""
        self.got_info = False
        self.got_iopub = False
        self.prelude_id = ""
        self.failed = ""
        self.process = launched.process
        wrapped = self.process.wrapped
        self.refused_seen = wrapped.baseline[1] if wrapped is not None else 0

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def pidfd(self) -> int | None:
        return self.process.pidfd

    def fds(self) -> list[int]:
        return [*self.wire.fds(), *([self.pidfd] if self.pidfd is not None else [])]

    def handshake(self) -> None:
        """(Re)send kernel_info until both its reply and some iopub message arrived: a SUB
        socket misses what is published before it is connected."""
        self.info_id = self.wire.send("shell", "kernel_info_request", {})

    def take_handshake(self, channel: str, msg: KernelMessage) -> bool:
        """Feed a message while starting; True when the kernel just became ready."""
        parent = msg.get("parent_header", {}).get("msg_id")
        if channel == "iopub":
            self.got_iopub = True
        elif channel == "shell" and msg["msg_type"] == "kernel_info_reply":
            self.got_info = True
            if not self.got_iopub:  # its iopub went out before our SUB was connected: ask again
                self.handshake()
        elif channel == "shell" and parent == self.prelude_id and self.prelude_id:
            if msg["content"].get("status") != "ok":
                content = msg["content"]
                self.failed = (
                    f"its start-up code failed: {content.get('ename')}: {content.get('evalue')}"
                )
                return False
            self.prelude_done = True
        # (channel "wire": its stdin connection is up; see KernelWire.stdin_ready)
        if self.got_info and self.got_iopub and self.prelude_done and self.wire.stdin_ready:
            self.ready = True
            self.launched.mark_log()
            return True
        if self.got_info and self.got_iopub and not self.prelude_done and not self.prelude_id:
            code = bridge.prelude(self.language, self.nonce) + "\n" + magics.prelude(self.language)
            self.prelude_id = self.execute(code, silent=True)
        return False

    def execute(self, code: str, silent: bool = False) -> str:
        return self.wire.send(
            "shell",
            "execute_request",
            {
                "code": code,
                "silent": silent,
                "store_history": not silent,
                "user_expressions": {},
                "allow_stdin": True,
                "stop_on_error": True,
            },
        )

    def exited(self) -> bool:
        """The kernel process has ended (its pidfd is readable: no /proc read)."""
        return self.process.exited()

    def alive(self) -> bool:
        return self.process.alive()

    def exit_text(self) -> str:
        how = self.process.how_it_ended(self.process.poll())
        tail = self.launched.log_tail(400)
        return f"the {self.language} kernel (pid {self.pid}) {how}" + (
            f"; its last words: {tail}" if tail else ""
        )

    def limits_hit(self) -> list[str]:
        """What the place refused since the last look (a fork over its pids limit): the
        cell failed on it, and its result should say why."""
        refused = self.process.limits_refused()
        if refused <= self.refused_seen:
            return []
        self.refused_seen = refused
        limit = self.process.place.limits.pids
        return [
            f"the conversation's place refused new processes: it holds {limit} at most "
            "(a fork bomb or a runaway pool); end some, or ask for a higher limit"
        ]

    def owned_pids(self) -> list[int]:
        return self.process.owned_pids()

    def close(self) -> None:
        """Kill the kernel's whole tree (never waiting on it), stop the wire, remove files."""
        self.process.kill()
        self.wire.close()
        self.process.close_pidfd()
        discard(self.launched)

    def handover(self) -> Spare:
        """What a KernelActor needs to adopt this (started, ready) kernel."""
        launched = self.launched
        return Spare(
            launched.language,
            launched.pid,
            launched.directory,
            launched.connection,
            self.nonce,
            self.layer,
        )

    def detach(self) -> None:
        """Handed over: stop talking to it here, without killing it."""
        self.wire.close()
        self.process.close_pidfd()
