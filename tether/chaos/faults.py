"""The faults of a chaos run: what can be hit, how, and what it takes away.

Every `interval` seconds the injector reads the live tree (`Runtime.health()`) and injects
the next fault of a shuffled cycle over the enabled classes (a class with nothing to hit
right now passes its turn to the next). Resource actors and runs are hit through
`Runtime.inject` (kill_process, crash_actor, delay, drop_reply: the runtime's own fault
injection); supervisors and the top of the tree (thespian's admin, its logger, the root),
which take no injected faults, get a SIGKILL. Memory pressure shrinks the tree's budget
below what it holds for a few seconds (`Runtime.inject("memory_pressure")`): the
governor stops idle servers and spares, and refuses new resources with `capacity`
errors meanwhile; the invariants hold all the same.

A dropped reply makes its caller wait for its deadline, so a drop goes only to an actor
with a call open right now (the drop then hits that call) and only while the run has
that deadline left to wait. A kill is recovered when a call of a tool it took away
(`AFFECTS`) succeeds after it; the time until then is its recovery time.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psutil

from tether.chaos.workload import BUDGETS, DEBUG_LAUNCH, CallRecord, Ledger
from tether.health_node import HealthNode
from tether.json_types import JSONObject
from tether.messages.calls import ResourceError
from tether.processes import children

if TYPE_CHECKING:
    from tether.runtime import Runtime

RUN_TOOLS = ("eval", "debug", "vibe_spawn", "vibe_wait")
RUNTIME_TOOLS = ("lsp", "ast_grep", "ast_edit", *RUN_TOOLS)
# fault class -> the health kinds it hits
CLASSES: dict[str, tuple[str, ...]] = {
    "language_server": ("language_server",),
    "parser": ("parser",),
    "kernel": ("kernel", "kernel_pool"),
    "debug": ("debug_session",),
    "vibe": ("vibe_worker",),
    "run": ("run",),
    "supervisor": ("supervisor", "runs"),
    "tree": ("root",),
    "memory_pressure": ("root",),  # (the whole tree: its budget)
    "delay": ("language_server", "parser", "kernel", "debug_session", "vibe_worker"),
    "drop": ("language_server", "parser", "kernel", "debug_session", "vibe_worker"),
}
# kind -> the tools a kill of it takes away (until they answer again: its recovery)
AFFECTS: dict[str, tuple[str, ...]] = {
    "language_server": ("lsp",),
    "checker": ("lsp",),
    "parser": ("ast_grep", "ast_edit"),
    "kernel": ("eval",),
    "kernel_pool": ("eval",),
    "debug_session": ("debug",),
    "vibe_worker": ("vibe_spawn", "vibe_wait"),
    "run": RUN_TOOLS,
    "runs": RUN_TOOLS,
    "root": RUNTIME_TOOLS,
}
# kind -> how long a call of it may wait for a dropped reply (its callers' deadline)
DROP_WAIT: dict[str, float] = {
    "language_server": BUDGETS["lsp"],
    "parser": BUDGETS["ast_grep"],
    "kernel": BUDGETS["eval"],
    "debug_session": DEBUG_LAUNCH,
    "vibe_worker": BUDGETS["vibe_wait"],
}
HEALING = ("restarting", "failed")  # health() while there is no tree to ask


@dataclass(frozen=True)
class Node:
    """A node of the live tree, as health() shows it."""

    name: str
    kind: str
    key: str
    pids: tuple[int, ...]
    pending: int
    run: str  # the conversation a run-scoped node belongs to, else ""


@dataclass(frozen=True)
class Fault:
    at: float  # s since the chaos run began
    fault: str  # its class
    action: str
    target: str
    affects: tuple[str, ...]  # tools it took away ("" for a delay or a drop)
    run: str  # the one conversation it hit, "" for all


@dataclass(frozen=True)
class Recovery:
    fault: Fault
    after: float | None  # s until a call it took away answered again; None: not yet
    tried: int  # calls of what it took away made after it (0: nothing showed the fault)


def nodes(health: HealthNode, run: str = "") -> Iterator[Node]:
    kind = str(health.get("kind", ""))
    key = str(health.get("key", ""))
    run = key if kind == "run" else run
    pids = tuple(int(p["pid"]) for p in health.get("pids", []) if p.get("alive", True))
    yield Node(str(health.get("name")), kind, key, pids, int(health.get("pending", 0)), run)
    for child in health.get("children", []):
        yield from nodes(child, run)


class Injector:
    """Injects one fault every `interval` s until `stop`; samples the tree's processes."""

    def __init__(
        self,
        rt: Runtime,
        ledger: Ledger,
        classes: Sequence[str],
        interval: float,
        seed: int,
        until: float,
        stop: threading.Event,
        log: Callable[[str], None],
    ):
        self.rt = rt
        self.ledger = ledger
        self.classes = list(classes)
        self.interval = interval
        self.rng = random.Random(seed)
        self.until = until  # s since the run began: no fault after it
        self.stop = stop
        self.log = log
        self.faults: list[Fault] = []
        self.skipped: list[str] = []  # faults that found no target or were refused
        self.seen: dict[int, psutil.Process] = {}
        self.thread = threading.Thread(target=self._loop, name="chaos-faults", daemon=True)

    def sample(self) -> None:
        """Remember every process of the runtime now (the orphan check looks for them)."""
        with contextlib.suppress(Exception):
            for proc in self.rt.processes():
                self.seen.setdefault(proc.pid, proc)

    def _loop(self) -> None:
        cycle: list[str] = []
        while not self.stop.wait(self.interval) and self.ledger.now() < self.until:
            self.sample()
            if not self.classes:
                continue
            if len(cycle) < len(self.classes):
                more = list(self.classes)
                self.rng.shuffle(more)
                cycle += more
            live = self._live()
            if not live:
                continue  # (the tree is being rebuilt: nobody loses a turn)
            for turn in range(len(self.classes)):
                fault = self._inject(cycle[turn], live)
                if fault is not None:
                    del cycle[: turn + 1]
                    self.faults.append(fault)
                    self.log(f"  t={fault.at:5.1f}s {fault.fault}: {fault.action} {fault.target}")
                    break
            else:
                del cycle[0]
        self.sample()

    def _live(self) -> list[Node]:
        try:
            health = self.rt.health(timeout=5.0)
        except ResourceError:
            return []
        return list(nodes(health)) if health.get("state") not in HEALING else []

    def _inject(self, fault: str, live: list[Node]) -> Fault | None:
        left = self.until - self.ledger.now()
        hit = [n for n in live if n.kind in CLASSES[fault] and n.pids]
        if fault == "drop":  # (its caller waits for the deadline: only what can end in time)
            hit = [n for n in hit if n.pending and DROP_WAIT.get(n.kind, 1e9) <= left]
        if not hit:
            return None
        node = self.rng.choice(hit)
        try:
            action = self._hit(fault, node)
        except (ResourceError, ProcessLookupError, ValueError) as exc:
            self.skipped.append(f"{fault} {node.name}: {exc}")
            return None
        quiet = ("delay", "drop", "memory_pressure")  # (nothing killed: nothing to recover)
        affects = () if fault in quiet else AFFECTS.get(node.kind, RUNTIME_TOOLS)
        if node.kind == "supervisor":
            affects = AFFECTS.get(node.key, ())
        return Fault(self.ledger.now(), fault, action, node.name, affects, node.run)

    def _hit(self, fault: str, node: Node) -> str:
        if fault == "tree":
            role, pid = self.rng.choice(self._top(node))
            os.kill(pid, signal.SIGKILL)
            return f"SIGKILL the {role} (pid {pid}) of"
        if fault == "supervisor":
            os.kill(node.pids[0], signal.SIGKILL)
            return f"SIGKILL (pid {node.pids[0]})"
        if fault == "memory_pressure":
            return self._pressure()
        if fault == "delay":
            seconds, count = round(self.rng.uniform(0.2, 2.0), 2), self.rng.randint(1, 3)
            self.rt.inject("delay", target=node.name, seconds=seconds, count=count)
            return f"delay {seconds:g} s x{count}"
        if fault == "drop":
            self.rt.inject("drop_reply", target=node.name)
            return "drop the next reply of"
        # its subprocess (a server, a kernel, an adapter, a worker) or the actor itself;
        # health lists the actor's pid first, then the live subprocesses it owns
        owns = len(node.pids) > 1
        how = "kill_process" if owns and self.rng.random() < 0.5 else "crash_actor"
        self.rt.inject(how, target=node.name)
        return how

    def _pressure(self) -> str:
        """Shrink the budget to 50-90 % of what the tree holds now, for 1-4 s."""
        used = self.rt.capacity()["used"]
        assert isinstance(used, int)  # bytes (Governor.summary)
        share, seconds = round(self.rng.uniform(0.5, 0.9), 2), round(self.rng.uniform(1, 4), 1)
        before = _evictions(self.rt.capacity())
        self.rt.inject("memory_pressure", budget=max(int(used * share), 1), seconds=seconds)
        stopped = _evictions(self.rt.capacity()) - before
        held = f"{used / 2**20:.0f} MiB"
        return f"budget {share:g} of the {held} held for {seconds:g} s (stopped {stopped}) on"

    def _top(self, root: Node) -> list[tuple[str, int]]:
        """The admin, the root and the admin's logger: what no supervisor restarts."""
        admin, root_pid = root.pids[0], root.pids[-1]
        top = [("admin", admin), ("root", root_pid)]
        with contextlib.suppress(psutil.Error):
            for child in children(admin):
                if child.pid != root_pid:
                    top.append(("logger", child.pid))
        return top


def _evictions(capacity: JSONObject) -> int:
    """How many resources the governor stopped for room so far (Runtime.capacity)."""
    by_kind = capacity["evictions"]
    assert isinstance(by_kind, dict)  # kind -> count (Governor.summary)
    return sum(n for n in by_kind.values() if isinstance(n, int))


def recoveries(faults: Sequence[Fault], calls: Sequence[CallRecord]) -> list[Recovery]:
    """For every fault that took tools away: how long until one of them answered again
    (a call that started after the fault and succeeded, in the conversation it hit)."""
    found = []
    for fault in faults:
        if not fault.affects:
            continue
        after = [
            c
            for c in calls
            if c.tool in fault.affects
            and c.started >= fault.at
            and (not fault.run or c.run == fault.run)
        ]
        back = [c.started + c.took - fault.at for c in after if c.ok]
        found.append(Recovery(fault, min(back) if back else None, len(after)))
    return found
