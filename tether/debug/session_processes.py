"""What a debug session started and must end: the adapter's session of processes, the
binary delve built, a sandboxed run's toolchain caches.

A part of `tether.actors.debug_session.DebugSessionActor`. The adapter leads its own
session (start_new_session), and the debuggee and its children stay in it even where they
lead their own process group (debugpy's launcher gives the program its own): the members
of that session are what a stop kills, what the supervisor is told to reap, and what
`terminate` reports as left.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time

import psutil

from tether.debug.adapters import AdapterRow
from tether.private_dirs import ensure_private_dir
from tether.processes import kill_tree, session_processes
from tether.scratch import ProcessScratch


class SessionProcesses:
    """The processes and files one debug session made, by the adapter that made them."""

    def __init__(self) -> None:
        self.adapter_pid = 0
        self.adapter_created = 0.0
        self.built = ""  # the binary delve builds for a launch: ours to remove at the end
        self._caches: ProcessScratch | None = None  # a sandboxed run's build caches

    def adapter_started(self, pid: int) -> None:
        self.adapter_pid = pid
        with contextlib.suppress(psutil.Error):
            self.adapter_created = psutil.Process(pid).create_time()

    def members(self) -> list[psutil.Process]:
        """Every process of the adapter's session (the adapter started it with setsid): the
        program and its children, even those that left the adapter's process tree."""
        if not self.adapter_pid:
            return []
        return session_processes(self.adapter_pid, self.adapter_created)

    def end(self, adapter: subprocess.Popen[bytes] | None) -> None:
        """Kill the adapter, the program and whatever they started (no waiting on them)."""
        if adapter is not None and adapter.poll() is None:
            kill_tree(adapter.pid, grace=0.0, wait=False)
        self.kill()

    def reap(self, adapter: subprocess.Popen[bytes] | None) -> None:
        """The adapter of a program that exited was killed (SIGKILL) when it exited; spawn
        refuses while it lives, and its death can still be in flight when a launch follows
        at once (seen with lldb-dap): it is reaped first, bounded."""
        if adapter is not None and adapter.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                adapter.wait(timeout=1.0)

    def kill(self) -> None:
        for p in self.members():
            with contextlib.suppress(Exception):
                kill_tree(p.pid, grace=0.0, wait=False)

    def left(self) -> list[int]:
        """The members still alive, given a second to go."""
        deadline = time.monotonic() + 1.0
        left = self.members()
        while left and time.monotonic() < deadline:
            psutil.wait_procs(left, timeout=0.05)
            left = [p for p in self.members() if p.status() != psutil.STATUS_ZOMBIE]
        return [p.pid for p in left]

    def remove_built(self) -> None:
        """delve removes the binary it built only when it ends cleanly; a killed delve
        leaves it in the workspace, so the session removes it."""
        if self.built:
            with contextlib.suppress(OSError):
                os.unlink(self.built)
            self.built = ""

    def caches(self) -> ProcessScratch:
        if self._caches is None:
            self._caches = ProcessScratch("dbg-caches")
        return self._caches

    def place_caches(self, row: AdapterRow) -> dict[str, str]:
        """A sandboxed run's own toolchain caches (delve's go build), kept between its
        launches and removed with this actor: the sandbox's /tmp starts empty at each
        launch, and the shared caches beside the scratch dirs are the host's, which no
        place may read or write (another conversation's compiled code is in them)."""
        base = self.caches().base
        return {var: str(ensure_private_dir(base / sub)) for var, sub in row.cache_env.items()}

    def close_caches(self) -> None:
        if self._caches is not None:
            self._caches.close()
            self._caches = None
