"""Which processes a runtime started: what shutdown kills and an orphan check asks about.

DESIGN.md invariant 3: no process outlives the runtime that started it. A runtime's
processes are found four ways, because each misses some: the admin's descendants (a
daemonizing subprocess leaves them), the admin's session (a descendant whose parent died
is reparented away, but keeps its session), the processes an actor reported in health
(remembered with their create time, so a reused pid is never taken for ours), and every
process that carries the runtime's token in its environment (set at the fork of the tree).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from tether.health_node import HealthNode
from tether.host.portfile import PortRecord
from tether.messages.calls import ErrorCode, ResourceError
from tether.processes import (
    children,
    descendants,
    kill_tree,
    proc_create_time,
    processes_with_token,
    same_process,
    session_processes,
    wait_gone,
)


@dataclass(frozen=True)
class Admin:
    """The top of one booted tree: thespian's admin (pid, create time, session) and the root."""

    pid: int = 0
    create_time: float = 0.0
    sid: int = 0
    root_pid: int = 0


class ProcessAccount:
    """The processes of one runtime (across its rebuilds: each new admin is remembered)."""

    def __init__(self, token: str):
        self.token = token
        self.admin = Admin()
        self._known: set[tuple[int, float]] = set()
        self._thespian: tuple[int, list[int]] = (0, [])  # (admin pid, thespian_pids())

    def remember(self, pid: int) -> None:
        created = proc_create_time(pid)
        if created:
            self._known.add((pid, created))

    def learn(self, node: HealthNode) -> None:
        """Remember every live process a health tree names."""
        for info in node.get("pids", []):
            if info.get("alive"):
                self.remember(int(info["pid"]))
        for child in node.get("children", []):
            self.learn(child)

    def tree_processes(self) -> list[psutil.Process]:
        """Every live process of the tree: the admin, its descendants, the rest of the
        admin's session (descendants whose parent died), and any process an actor reported
        (a daemonizing subprocess is no longer a descendant)."""
        admin = self.admin
        procs: dict[int, psutil.Process] = {
            p.pid: p for p in session_processes(admin.sid, admin.create_time)
        }
        with contextlib.suppress(psutil.NoSuchProcess):
            top = psutil.Process(admin.pid)
            procs[top.pid] = top
            for child in descendants(top.pid):
                procs[child.pid] = child
        # (a copy: health samples on other threads - the governor's - remember more meanwhile)
        for pid, created in list(self._known):
            if pid not in procs and same_process(pid, created):
                with contextlib.suppress(psutil.NoSuchProcess):
                    procs[pid] = psutil.Process(pid)
        return list(procs.values())

    def processes(self) -> list[psutil.Process]:
        """The tree's processes and any other process that carries the token."""
        procs = {p.pid: p for p in self.tree_processes()}
        procs.update({p.pid: p for p in processes_with_token(self.token)})
        return list(procs.values())

    def left_behind(self, seen: Iterable[psutil.Process], wait: float) -> list[psutil.Process]:
        """The processes of `seen` and any carrying the token still running after `wait` s."""
        procs = {p.pid: p for p in seen}
        procs.update({p.pid: p for p in processes_with_token(self.token)})
        return wait_gone(list(procs.values()), time.monotonic() + wait)

    def system_died(self, what: str) -> ResourceError | None:
        """The error for a call on `what` when the actor system itself is gone, else None."""
        admin = self.admin
        if not admin.pid or same_process(admin.pid, admin.create_time):
            return None
        return ResourceError(
            ErrorCode.RESTARTING,
            f"the actor system of this runtime died (admin pid {admin.pid} is gone), so "
            f"{what} cannot answer; the runtime rebuilds it - call again",
        )

    def thespian_pids(self) -> list[int]:
        """Thespian's admin and logger: part of the tree's charge, with no usage record.
        Found once per admin (listing a process's children scans all of /proc, and the
        governor asks at each sample): a logger that dies takes the tree with it
        (tether.host.healing), so the pair never changes under one admin."""
        admin = self.admin
        if self._thespian[0] != admin.pid:
            with contextlib.suppress(psutil.Error):
                kids = children(admin.pid)
                pids = [admin.pid, *(c.pid for c in kids if c.pid != admin.root_pid)]
                if len(pids) > 1:  # (the logger is up: what is found is the whole pair)
                    self._thespian = (admin.pid, pids)
                return pids
            return []
        return self._thespian[1]

    def kill_now(self) -> None:
        """(A rebuild.) SIGKILL what is left of the tree and whatever carries the token,
        now, and wait for them a second at most."""
        procs = [p for p in self.tree_processes() if p.pid != os.getpid()]
        procs += processes_with_token(self.token)
        for proc in procs:
            with contextlib.suppress(Exception):
                kill_tree(proc.pid, grace=0.0, wait=False)
        wait_gone(procs, time.monotonic() + 1.0)

    def kill_left(self, tracked: list[psutil.Process], deadline: float) -> None:
        """(Shutdown.) SIGKILL whatever of `tracked` still runs at `deadline` (2 s from now
        at most), and whatever carries the token."""
        alive = wait_gone(tracked, min(deadline, time.monotonic() + 2.0))
        for proc in [*alive, *processes_with_token(self.token)]:
            with contextlib.suppress(Exception):
                kill_tree(proc.pid, grace=0.0)

    def port_record(self, admin_port: int, secret: bytes) -> PortRecord:
        """What the port file keeps for the next host's reaper (tether.host.portfile) and
        for `tether status` (the secret: the file is 0600 in a private dir)."""
        me = psutil.Process()
        return {
            "admin_port": admin_port,
            "host_pid": me.pid,
            "host_create_time": me.create_time(),
            "admin_pid": self.admin.pid,
            "admin_create_time": self.admin.create_time,
            "admin_sid": self.admin.sid,
            "root_pid": self.admin.root_pid,
            "token": self.token,
            "secret": secret.hex(),
        }
