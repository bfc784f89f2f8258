"""The runtime: boots the actor system, opens and closes runs, health, faults, shutdown.

    with Runtime.start() as rt:            # thespian multiprocTCPBase on loopback, free admin port
        run = rt.open_run("conv-1", workdir="checkout")
        run.call("lsp", {...})
        rt.health(); rt.inject("kill_process", target="echo_process:k")

A facade over the host package (DESIGN.md "Layout"): `tether.host.boot` boots a tree (the
kinds, the actor system on a free port, the root's hello), `engine` makes the calls,
`tree_control` asks the tree's own nodes (runs, health, faults), `accounting` knows which
processes are ours, `healing` rebuilds the top of the tree when it dies, `services` runs
the governor and metrics beside it. What stays here is the runtime's state and its
public surface; a Run sees it as a `tether.runtime_port.RuntimePort`.

A call to an actor the host knows goes on the calling thread's call channel to it
(`tether.channels`), anything else on thespian from one `private()` context per thread
(tether.host.contexts), with an explicit deadline and a call id (a late reply to a call
that timed out is dropped). Every thespian connection into the tree proves the runtime's
secret, made here and inherited by the tree at fork (`tether.host.transport_auth`).

No orphans: `shutdown()` stops the tree, then kills whatever the runtime started that is
still alive (psutil, bounded). If the host dies without shutting down, every actor's
watchdog notices within a fraction of a second and takes its processes down, and the
port file (`state_dir/<admin_port>.json`) lets the next `Runtime.start()` (or
`Runtime.reap_stale()`) clean up anything left.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

import psutil

from tether.call_scope import CancelHandle
from tether.capacity.governor import Governor
from tether.health_node import HealthNode
from tether.host import boot, services, transport_auth, tree_control
from tether.host.accounting import ProcessAccount
from tether.host.boot import (
    RESOURCE_KIND_MODULES,
    ROOT_NAME,
    ActorSystem,
    KindLoadError,
    PortTaken,
    RuntimeStartError,
    load_kinds,
)
from tether.host.engine import DEFAULT_CALL_TIMEOUT, CallEngine
from tether.host.healing import HEAL_WAIT, Healer
from tether.host.portfile import (
    StateDirError,
    default_state_dir,
    ensure_private_dir,
    reap_stale,
    write_port_file,
)
from tether.host.routes import ROOT
from tether.json_types import JSONObject
from tether.kinds import KindSpec
from tether.messages.calls import Call, ErrorCode, ResourceError, Wire, WireValue
from tether.metrics import Metrics
from tether.places import Place
from tether.processes import (
    process_info,
)
from tether.runtime_port import GatherCall, Op
from tether.tools.spec import Surface

if TYPE_CHECKING:
    from tether.questions import QuestionPort
    from tether.run import Run
    from tether.runtime_port import RunOptions

__all__ = [
    "RESOURCE_KIND_MODULES",
    "ROOT_NAME",
    "KindLoadError",
    "Runtime",
    "RuntimeStartError",
    "load_kinds",
]


class Runtime:
    """A running actor tree. Build it with `Runtime.start()`; use it as a context manager."""

    def __init__(self, *, _token: object = None, **_: object):  # (only to refuse them)
        if _token is not _START_TOKEN:
            raise TypeError("build a Runtime with Runtime.start(...), not Runtime(...)")
        self.admin_port = 0
        self.kinds: dict[str, KindSpec] = {}
        self.state_dir = default_state_dir()
        self.port_file: Path | None = None
        self._asys: ActorSystem | None = None  # (thespian's; tether.host.boot)
        self._engine: CallEngine | None = None  # route, send, wait, retry (tether.host.engine)
        self._ids = itertools.count(1)
        self._token = uuid.uuid4().hex[:12]
        # every connection into the tree must prove it (tether.host.transport_auth)
        self._secret = transport_auth.new_secret()
        self._closed = True
        self._account = ProcessAccount(self._token)  # what shutdown kills (host.accounting)
        self._children_before_boot: set[int] = set()
        self._shut_down = False  # shutdown() was called (`_closed` also covers a failed boot)
        self._healer = Healer(  # rebuilds the top of the tree when it dies (host.healing)
            boot=lambda: self._boot_on_a_free_port(None, HEAL_WAIT),
            discard=self._discard_tree,
            engine=lambda: self._engine,
            shut_down=lambda: self._shut_down,
        )
        self.metrics: Metrics | None = None  # with Runtime.start(metrics_port=...)
        self.governor: Governor | None = None  # the memory budget (tether.capacity)
        self.default_place = Place.host()  # a run's place unless open_run names one

    # the top of the current tree (tests and the chaos harness read these)
    @property
    def admin_pid(self) -> int:
        return self._account.admin.pid

    @property
    def root_pid(self) -> int:
        return self._account.admin.root_pid

    # --- lifecycle -------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        admin_port: int | None = None,
        kinds: Sequence[KindSpec] | None = None,
        kind_modules: Sequence[str] | None = None,
        start_timeout: float = 10.0,
        state_dir: str | os.PathLike[str] | None = None,
        metrics_port: int | None = None,
        place: Place | str | None = None,
        memory_budget: int | float | None = None,
        evict_idle_kernels_after: float | None = None,
    ) -> Runtime:
        """Boot thespian multiprocTCPBase on loopback and the supervision tree.

        admin_port: pin the admin port (default: a free one, so runtimes never collide).
        kinds: the resource kinds (default: those RESOURCE_KIND_MODULES, or `kind_modules`,
        declare). state_dir: the runtime's private directory (0700: its port file, its
        kernels' files; default $TETHER_STATE_DIR, else $XDG_RUNTIME_DIR/tether, else
        <tmp>/tether-<uid>). metrics_port: Prometheus metrics on 127.0.0.1:metrics_port
        (0: a free one, `rt.metrics.port`). place: the runs' default place
        (tether.places: "host", "sandbox" or a Place; open_run(place=...) per run).
        memory_budget: what the tree may hold, in bytes (an int) or as a fraction (a float,
        0 < f <= 1) of its cgroup's limit, else of physical memory (default: the cgroup's
        limit, else 0.8 of physical memory); see `rt.capacity()`.
        evict_idle_kernels_after: minutes after which an idle kernel or debug session may
        be stopped to make room (default None: a conversation's state is never stopped;
        a new resource is refused instead).
        """
        capacity = boot.capacity_settings(memory_budget, evict_idle_kernels_after)
        rt = cls(_token=_START_TOKEN)
        rt.default_place = Place.parse(place)
        rt.state_dir = Path(state_dir) if state_dir else default_state_dir()
        specs = list(kinds) if kinds is not None else load_kinds(kind_modules or ())
        rt.kinds = {k.kind: k for k in specs}
        try:
            ensure_private_dir(rt.state_dir)
        except (StateDirError, OSError) as exc:
            raise RuntimeStartError(str(exc)) from exc
        cls.reap_stale(rt.state_dir)
        rt._boot_on_a_free_port(admin_port, start_timeout)
        rt.governor = services.keep_budget(
            capacity, rt.health, rt._account.thespian_pids, rt._evict, rt.kinds, rt.port_file
        )
        if metrics_port is not None:
            try:
                rt.metrics = services.serve_metrics(metrics_port, rt.health, rt.capacity)
            except RuntimeStartError:
                rt.shutdown()
                raise
        return rt

    def _boot_on_a_free_port(self, admin_port: int | None, start_timeout: float) -> None:
        """Boot the actor system and tree on `admin_port`, or on a free port (a few tries)."""
        boot.on_a_free_port(admin_port, lambda port: self._boot(port, start_timeout), self._abandon)

    def _boot(self, port: int, start_timeout: float) -> None:
        self.admin_port = port
        self._children_before_boot = boot.child_pids()  # what is new after it, it started
        self._asys = boot.start_system(port, self._token, self._secret, self.state_dir)
        engine = CallEngine(
            self._asys, self.kinds, self._next_id, lambda: self._closed, self._system_died
        )
        engine.admit = self._admit
        self._engine = engine
        self._closed = False
        try:
            greeted = boot.greet_root(self._asys, engine, self._next_id(), start_timeout)
        except ResourceError as exc:
            self._abandon()
            raise RuntimeStartError(
                f"the actor tree did not start within {start_timeout:g} s: {exc.message}"
            ) from exc
        payload = greeted.payload
        if payload.get("token") != self._token:
            # another actor system already listened on this port: we attached to it
            self._asys = None
            self._closed = True
            raise PortTaken(
                f"port {port} belongs to another actor system (admin pid {payload['admin_pid']})"
            )
        admin = self._account.admin = boot.admin_of(payload)
        engine.routes.add(ROOT, greeted.root, 1, admin.root_pid)
        engine.learn_tree(payload, greeted.addresses)
        self._account.remember(admin.pid)
        self._account.remember(admin.root_pid)
        self._write_port_file()
        atexit.register(self.shutdown)
        self._healer.watch_tree(admin.pid, admin.root_pid)

    def _abandon(self) -> None:
        """A start that failed half-way: kill what this boot started (tether.host.boot)."""
        boot.abandon(self._asys, self._children_before_boot, self._token)
        self._asys = None
        self._closed = True

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def closed(self) -> bool:
        """shutdown() was called."""
        return self._shut_down

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every actor and every process the runtime started. Bounded by `timeout`;
        whatever is still alive at the end is SIGKILLed. Idempotent."""
        if self._shut_down:
            return
        self._shut_down = True
        deadline = time.monotonic() + timeout
        self._healer.stop(deadline - 2.0)
        self._closed = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.shutdown)
        tracked_list = self._account.processes()
        # close the per-thread endpoints first: with them open, thespian's shutdown waits
        # ~10 s on them (measured with 16 caller threads)
        if self._engine is not None:
            self._engine.close()
        if self.metrics is not None:
            self.metrics.close()
        if self.governor is not None:
            self.governor.stop()
        stopper = threading.Thread(
            target=boot.stop_system, args=(self._asys,), name="tether-shutdown", daemon=True
        )
        stopper.start()
        stopper.join(max(deadline - time.monotonic() - 1.0, 0.5))
        self._account.kill_left(tracked_list, deadline)
        self._drop_port_file()

    def _discard_tree(self, engine: CallEngine | None) -> None:
        """(Healing.) Kill what is left of the current tree now; close the host's endpoints
        on it and its actor system object on a thread (thespian waits on a dead admin)."""
        self._account.kill_now()
        self._drop_port_file()
        asys, self._asys = self._asys, None

        def close() -> None:
            if engine is not None:
                engine.close()
            boot.stop_system(asys)

        threading.Thread(target=close, name="tether-old-tree", daemon=True).start()

    # --- capacity (tether.capacity) ---------------------------------------------------
    def _admit(self, call: Call) -> None:
        if self.governor is not None:
            self.governor.admit(call)

    def _evict(self, name: str, why: str) -> bool:
        """Stop the resource actor `name` to make room (tether.host.tree_control.evict)."""
        try:
            engine, left = self._engine_within(2.0)
        except ResourceError:
            return False
        return tree_control.evict(engine, self._next_id(), name, why, left)

    def capacity(self) -> JSONObject:
        """The tree's memory, for a host deciding whether to send more conversations:
        budget, used (and how it was counted), reserved (resources starting), free,
        evictable (what may be stopped to make room), by_kind (bytes and count),
        conversations, average_conversation, fit (how many more of the average size fit),
        evictions by kind, refusals."""
        self._check_open()
        assert self.governor is not None
        return self.governor.summary()

    # --- processes (tether.host.accounting) -------------------------------------------
    def processes(self) -> list[psutil.Process]:
        """Every live process of this runtime now (the tree's, and any carrying its token):
        what an orphan check keeps before shutdown, to ask `left_behind` about after."""
        return self._account.processes()

    def left_behind(
        self, seen: Iterable[psutil.Process], wait: float = 5.0
    ) -> list[psutil.Process]:
        """After shutdown(): the processes of `seen` (from `processes()`) and any process
        carrying this runtime's token that still run once `wait` s have passed (DESIGN.md
        invariant 3: no process outlives the runtime that started it)."""
        return self._account.left_behind(seen, wait)

    # --- port file -------------------------------------------------------------------
    def _write_port_file(self) -> None:
        record = self._account.port_record(self.admin_port, self._secret)
        self.port_file = write_port_file(self.state_dir, record)

    def _drop_port_file(self) -> None:
        if self.port_file is not None:
            with contextlib.suppress(OSError):
                self.port_file.unlink()
            self.port_file = None

    @classmethod
    def reap_stale(cls, state_dir: str | os.PathLike[str] | None = None) -> list[int]:
        """Clean up after hosts that died without shutting down: for every port file whose
        host is gone, kill what is left of its actor system. Returns the admin ports reaped."""
        return reap_stale(Path(state_dir) if state_dir else default_state_dir())

    # --- host-side calls (tether.host.engine) --------------------------------------------
    def _next_id(self) -> str:
        return f"{self._token}-{next(self._ids)}"

    def _check_open(self) -> None:
        if self._shut_down or self._engine is None:
            raise ResourceError(
                ErrorCode.UNAVAILABLE,
                "the runtime is shut down; start a new one with Runtime.start()",
            )

    @property
    def engine(self) -> CallEngine:
        """The engine of the current tree (waiting for one being rebuilt, at most
        HEAL_WAIT)."""
        return self._engine_within(HEAL_WAIT)[0]

    def _engine_within(self, timeout: float) -> tuple[CallEngine, float]:
        """The engine of the current tree, and what is left of `timeout` once it is there
        (tether.host.healing: a call waits for a tree being rebuilt)."""
        healer, engine = self._healer, self._engine
        healthy = healer.healed.is_set() and healer.failed is None and not self._shut_down
        if healthy and engine is not None:
            return engine, timeout  # (the warm path: one module fewer on every call's way)
        return healer.within(self._check_open, timeout)

    def call(
        self,
        run_id: str,
        kind: str,
        key: str,
        op: Op,
        args: Mapping[str, WireValue] | None = None,
        timeout: float = DEFAULT_CALL_TIMEOUT,
        cancel: CancelHandle | None = None,
    ) -> Wire:
        """Ask the resource actor (kind, key) of run `run_id` to do `op` (CallEngine.call)."""
        engine, left = self._engine_within(timeout)
        return engine.call(run_id, kind, key, op, args, left, cancel)

    def gather(
        self,
        run_id: str,
        calls: Sequence[GatherCall],
        timeout: float = DEFAULT_CALL_TIMEOUT,
        cancel: CancelHandle | None = None,
    ) -> list[Wire | ResourceError]:
        """Several calls at once, answers in order (CallEngine.gather)."""
        engine, left = self._engine_within(timeout)
        return engine.gather(run_id, calls, left, cancel)

    def _system_died(self, what: str) -> ResourceError | None:
        return self._account.system_died(what)

    def _open_run_actor(self, run_id: str, timeout: float = 10.0) -> None:
        """Start (or find) the RunActor of `run_id`, and learn where it is. Idempotent."""
        engine, left = self._engine_within(timeout)
        tree_control.open_run(engine, self._next_id(), str(run_id), left)

    def close_run(self, run_id: str, timeout: float = 5.0) -> None:
        """Stop the RunActor of `run_id` and the run-scoped actors under it."""
        if self._shut_down or self._engine is None:
            return
        engine, left = self._engine_within(timeout)
        tree_control.close_run(engine, self._next_id(), str(run_id), left)

    # --- what is connected -----------------------------------------------------------
    def connected_kinds(self) -> set[str]:
        return set(self.kinds) if not self._shut_down else set()

    def kind_keys(self, kind: str, timeout: float = 5.0) -> list[str]:
        """The keys of `kind`: its declared key set (config["keys"], e.g. pool slots), or
        for a shared kind without one, the keys of the actors currently running."""
        declared = tree_control.declared_keys(self.kinds, kind)
        if declared is not None or self._shut_down:
            return declared or []
        engine, left = self._engine_within(timeout)
        return tree_control.running_keys(engine, self._next_id(), kind, left)

    # --- runs ------------------------------------------------------------------------
    def open_run(
        self,
        run_id: str,
        workdir: str | os.PathLike[str] | None = None,
        surface: Surface | str | None = None,
        question_port: QuestionPort | None = None,
        vibe: bool = False,
        **options: Unpack[RunOptions],
    ) -> Run:
        """A conversation's tools (tether.run.Run) backed by a RunActor in this runtime."""
        from tether.run import Run

        self._check_open()
        if not run_id or not isinstance(run_id, str):
            raise ValueError(f"run_id must be a non-empty str, got {run_id!r}")
        if self.governor is not None:  # a full tree refuses a new conversation (CAPACITY)
            self.governor.admit_resource(f"run:{run_id}", "run")
        self._open_run_actor(run_id)
        return Run(
            runtime=self,
            run_id=run_id,
            workdir=workdir,
            surface=surface if surface is not None else Surface.DEFAULT,
            question_port=question_port,
            vibe=vibe,
            **options,
        )

    # --- health and faults -----------------------------------------------------------
    def health(self, timeout: float = 5.0) -> HealthNode:
        """The actor tree as a dict: each node has name, kind, key, state, uptime, restarts,
        last_error, pending, pids (pid, cmd, rss, cpu) and children. A subtree that does not
        answer in time is marked "unresponsive"; health() itself never waits past timeout."""
        self._check_open()
        start = time.monotonic()
        if (unsettled := self._healer.unsettled(timeout * 0.5)) is not None:
            return self._healer.node(unsettled, self.admin_port)
        engine, _ = self._engine_within(timeout)
        left = timeout - (time.monotonic() - start)
        try:
            node = tree_control.tree_health(
                engine, self._next_id(), time.monotonic() + left * 0.9, left
            )
        except ResourceError:
            if engine.broken is None:
                raise
            return self._healer.node("restarting", self.admin_port)  # (it died answering)
        node["admin_port"] = self.admin_port
        node["pids"] = [process_info(self.admin_pid), *node.get("pids", [])]
        node["restarts"] = self._healer.rebuilds  # the tree's own restarts: rebuilds by the host
        node["last_error"] = node.get("last_error") or self._healer.note
        if self.governor is not None:
            node["capacity"] = self.governor.summary()
        self._account.learn(node)
        return node

    def inject(
        self, fault: str, target: str = "", timeout: float = 5.0, **args: float
    ) -> Wire | JSONObject:
        """Inject a fault into the actor named `target` (as health() names it):
        kill_process (SIGKILL its OS process), crash_actor (SIGKILL the actor itself),
        delay(seconds=, count=1) (its next calls wait), drop_reply(count=1) (its next
        replies are lost). memory_pressure(budget=, seconds=None) targets the whole tree:
        its budget shrinks to `budget` (bytes, or a fraction of the configured one) for
        `seconds` (None: until the next memory_pressure; budget=1.0 lifts it), and the
        governor stops what it may to get under it."""
        self._check_open()
        tree_control.check_fault(fault, args)
        if fault == "memory_pressure":
            assert self.governor is not None
            return self.governor.pressure(args["budget"], args.get("seconds"))
        engine, left = self._engine_within(timeout)
        return tree_control.inject(engine, self._next_id(), fault, target, args, left)

    def __repr__(self) -> str:
        state = "closed" if self._shut_down else "running"
        return f"Runtime(admin_port={self.admin_port}, kinds={sorted(self.kinds)}, {state})"


_START_TOKEN = object()
