"""The tree heals: the host rebuilds the top of the tree, which has no supervisor.

Supervisors restart every node below the root. The admin, its logger and the root have
none: the host watches them (tether.host.tree_watch) and, when one dies, fails every call
open on the old tree at once, kills what is left of it, and boots a new admin and root.
Shared servers start again on their next call; a run's RunActor is started again by its
next call (the runs supervisor starts one for any run id it routes to, as after its own
restart), so the host does not reopen runs: open_run and close_run work as before, and a
Run keeps working. A call made while a tree is being rebuilt waits for it, never past its
own timeout; more than MAX_REBUILDS within REBUILD_PERIOD s and the host gives up (every
call then says to start a new runtime).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import psutil

from tether.health_node import HealthNode, health_node
from tether.host.boot import RuntimeStartError
from tether.host.engine import CallEngine
from tether.host.tree_watch import TreeWatch
from tether.kinds import ChildSpec
from tether.messages.calls import ErrorCode, ResourceError
from tether.processes import children, proc_create_time
from tether.supervisors.policy import recent_restarts, within_intensity

# a call waits this long at most for a tree being rebuilt (and a rebuild's boot may take
# this long); more than MAX_REBUILDS within REBUILD_PERIOD s and the host gives up
HEAL_WAIT = 10.0
MAX_REBUILDS = 10
REBUILD_PERIOD = 60.0


class Healer:
    """The watch on the top of one runtime's tree, and its rebuilds.

    boot: boot a new tree (raises RuntimeStartError, ResourceError or OSError if it cannot);
    discard: kill what is left of the current tree and close the host's endpoints on it
    (with its engine, or None); engine: the current tree's engine; shut_down: shutdown()
    was called (no rebuild then)."""

    def __init__(
        self,
        boot: Callable[[], None],
        discard: Callable[[CallEngine | None], None],
        engine: Callable[[], CallEngine | None],
        shut_down: Callable[[], bool],
    ):
        self._boot = boot
        self._discard = discard
        self._engine = engine
        self._shut_down = shut_down
        # the watch, set while no tree is being rebuilt, and what health says of the rebuilds
        self.watch: TreeWatch | None = None
        self.healed = threading.Event()
        self.healed.set()
        self._lock = threading.Lock()
        self.failed: ResourceError | None = None
        self._rebuild_times: list[float] = []
        self.rebuilds = 0
        self.note = ""  # the last rebuild, or the one under way, in words

    def watch_tree(self, admin_pid: int, root_pid: int) -> None:
        """Watch the admin, its logger and the root of the tree just booted."""
        top = {"admin": admin_pid, "root": root_pid}
        with contextlib.suppress(psutil.Error):
            for child in children(admin_pid):
                if child.pid != root_pid:
                    top[f"admin's {child.name()} process"] = child.pid  # the logger
        watched = {role: (pid, proc_create_time(pid)) for role, pid in top.items()}
        self.watch = TreeWatch(watched, self._tree_died)
        self.watch.start()

    def _tree_died(self, role: str, pid: int) -> None:
        """(On the watch's thread.) The top of the tree is gone: rebuild it."""
        with self._lock:
            watch = self.watch
            if self._shut_down() or watch is None or watch.processes.get(role, (0, 0.0))[0] != pid:
                return  # (a watch of a tree already gone)
            self.healed.clear()
            try:
                self._rebuild(role, pid)
            finally:
                self.healed.set()

    def _rebuild(self, role: str, pid: int) -> None:
        self.note = f"the actor system's {role} (pid {pid}) died"
        old = self._engine()
        if old is not None:
            old.break_tree(
                ResourceError(
                    ErrorCode.RESTARTING,
                    f"{self.note} while this call was open; the runtime is rebuilding "
                    "its actor tree - call again (servers and run resources start afresh)",
                )
            )
        self._discard(old)
        now = time.monotonic()
        # the tree's restart intensity, as a supervisor's (read here: tests lower them)
        spec = ChildSpec(max_restarts=MAX_REBUILDS, period=REBUILD_PERIOD)
        self._rebuild_times = recent_restarts(self._rebuild_times, now, spec)
        if not within_intensity(self._rebuild_times, now, spec):
            self._give_up(f"{MAX_REBUILDS} rebuilds in {REBUILD_PERIOD:g} s")
            return
        self._rebuild_times.append(now)
        try:
            self._boot()
        except (RuntimeStartError, ResourceError, OSError) as exc:
            self._give_up(str(exc))
            return
        self.rebuilds += 1
        took = time.monotonic() - now
        self.note = f"rebuilt in {took:.2f} s after {self.note}"

    def _give_up(self, why: str) -> None:
        self.failed = ResourceError(
            ErrorCode.UNAVAILABLE,
            f"{self.note} and the actor tree could not be rebuilt ({why}); shut this "
            "runtime down and start a new one",
        )
        self.note = self.failed.message
        self._discard(None)

    def unsettled(self, wait: float) -> str | None:
        """None if the tree is up (after waiting up to `wait` s for a rebuild under way),
        else the root's state for health: "restarting" or "failed"."""
        if not self.healed.wait(wait):
            return "restarting"
        return "failed" if self.failed is not None else None

    def node(self, state: str, admin_port: int) -> HealthNode:
        """health() while there is no tree to ask (being rebuilt, or could not be)."""
        node = health_node("root", "root", "", state, restarts=self.rebuilds, last_error=self.note)
        node["admin_port"] = admin_port
        return node

    def within(self, check_open: Callable[[], None], timeout: float) -> tuple[CallEngine, float]:
        """The engine of the current tree, and what is left of `timeout` once it is there:
        while the tree is being rebuilt, a call waits for it (never past its timeout)."""
        check_open()
        if self.healed.is_set() and self.failed is None:
            current = self._engine()
            assert current is not None
            return current, timeout  # (the engine checks the timeout itself)
        start = time.monotonic()
        if not self.healed.wait(timeout):
            raise ResourceError(
                ErrorCode.RESTARTING,
                f"{self.note}; it was not rebuilt within {timeout:g} s - call again in a "
                "moment, or check rt.health()",
            )
        check_open()
        if self.failed is not None:
            raise self.failed
        current = self._engine()
        assert current is not None
        left = timeout - (time.monotonic() - start)
        if left <= 0:
            raise ResourceError(
                ErrorCode.DEADLINE,
                f"the call's {timeout:g} s passed while the actor tree was rebuilt "
                f"({self.note}); call again",
            )
        return current, left

    def stop(self, deadline: float) -> None:
        """shutdown(): no rebuild from now on; one under way ends first (bounded)."""
        if self.watch is not None:
            self.watch.stop()
        if self._lock.acquire(timeout=max(deadline - time.monotonic(), 0.1)):
            self._lock.release()
        if self.watch is not None:  # (a rebuild that just ended started a new one)
            self.watch.stop()
