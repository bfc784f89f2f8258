"""The host's watch on the top of its actor tree: thespian's admin, its logger, the root.

Every other node of the tree has a supervisor that restarts it. These three have none: if
one dies, the root (or, after the admin, every actor's watchdog) takes the rest of the tree
down with it, and only the host can build it again (`Runtime`, "healing"). `TreeWatch` is
one thread that sleeps in poll(2) on a pidfd per watched process (Linux >= 5.3; the kernel
wakes it the moment one exits, no polling) and calls `on_death(role, pid)` once, for the
first that goes. Where pidfds are missing it checks every `FALLBACK_PERIOD` instead.

    watch = TreeWatch({"admin": (pid, create_time), ...}, on_death)
    watch.start(); ...; watch.stop()
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable, Mapping

from tether.processes import same_process

FALLBACK_PERIOD = 0.1  # s between checks where the kernel gives no pidfd


class TreeWatch:
    """Calls `on_death(role, pid)` (on its own thread) when the first watched process
    exits. `processes`: role -> (pid, create time)."""

    def __init__(
        self, processes: Mapping[str, tuple[int, float]], on_death: Callable[[str, int], None]
    ):
        self.processes = dict(processes)
        self._on_death = on_death
        self._wake_r, self._wake_w = os.pipe()
        self._stopped = False
        self._pipe_lock = threading.Lock()  # (no write to the pipe once it is closed)
        self._pipe_open = True
        self._thread = threading.Thread(target=self._run, name="tether-tree-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """No `on_death` after this returns, unless one is running already (on another
        thread: this one may be the thread it runs on)."""
        self._stopped = True
        with self._pipe_lock:
            if self._pipe_open:
                os.write(self._wake_w, b"x")

    def join(self, timeout: float) -> None:
        if self._thread is not threading.current_thread() and self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            died = self._wait_for_a_death()
            if died is not None and not self._stopped:
                self._on_death(*died)
        finally:
            with self._pipe_lock:
                self._pipe_open = False
                os.close(self._wake_r)
                os.close(self._wake_w)

    def _wait_for_a_death(self) -> tuple[str, int] | None:
        pidfds: dict[int, str] = {}
        try:
            for role, (pid, created) in self.processes.items():
                fd = _pidfd(pid)
                if fd is not None:
                    pidfds[fd] = role
                # (checked once the pidfd is held: the pid cannot be reused under it now)
                if not same_process(pid, created):
                    return role, pid
            poller = select.poll()
            poller.register(self._wake_r, select.POLLIN)
            for fd in pidfds:
                poller.register(fd, select.POLLIN)
            fallback = len(pidfds) < len(self.processes)
            while not self._stopped:
                ready = poller.poll(FALLBACK_PERIOD * 1000 if fallback else None)
                for fd, _ in ready:
                    if fd in pidfds:
                        role = pidfds[fd]
                        return role, self.processes[role][0]
                if fallback:
                    for role, (pid, created) in self.processes.items():
                        if not same_process(pid, created):
                            return role, pid
            return None
        finally:
            for fd in pidfds:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
