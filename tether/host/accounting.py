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
import time
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from tether.health_node import HealthNode
from tether.processes import (
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
            for child in top.children(recursive=True):
                procs[child.pid] = child
        for pid, created in self._known:
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

    def thespian_pids(self) -> list[int]:
        """Thespian's admin and logger: part of the tree's charge, with no usage record."""
        with contextlib.suppress(psutil.Error):
            admin = psutil.Process(self.admin.pid)
            return [admin.pid, *(c.pid for c in admin.children() if c.pid != self.admin.root_pid)]
        return []
