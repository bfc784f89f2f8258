"""The runtime: boots the actor system, opens and closes runs, health, faults, shutdown.

    with Runtime.start() as rt:            # thespian multiprocTCPBase on loopback, free admin port
        run = rt.open_run("conv-1", workdir="checkout")
        run.call("lsp", {...})
        rt.health(); rt.inject("kill_process", target="echo_process:k")

Host side of the tree (DESIGN.md "The actor tree"): the host talks to the actors with
thespian `tell` + `listen` and explicit deadlines, from one thespian `private()` context
per calling thread (a shared system object hands replies to the wrong thread); a call to
a shared actor the host already knows goes on that thread's call channel to it instead
(`tether.channels`: a Unix socket, ~0.1 ms a round trip where thespian takes ~0.45).
Every thespian connection into the tree proves the runtime's secret, made here at start
and inherited by the tree at fork (`tether.host.transport_auth`).
Every call carries a call id; a reply with another id — a late answer to a call that
already timed out — is dropped, never handed to the next call.

No orphans: `shutdown()` stops the tree, then kills whatever the runtime started that is
still alive (psutil, bounded). If the host dies without shutting down, every actor's
watchdog notices within a fraction of a second and takes its processes down, and the
port file (`state_dir/<admin_port>.json`) lets the next `Runtime.start()` (or
`Runtime.reap_stale()`) clean up anything left.

The tree heals: a supervisor that dies is restarted by its parent and found again by the
host (through the root, `CallEngine.ask_node`). Thespian's admin, its logger and the root
have no parent in the tree: the host watches them (`tether.host.tree_watch`) and, when one
dies, fails the calls open on the old tree at once, kills what is left of it and boots a
new one (see "the tree heals" below); health shows the rebuilds.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import itertools
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from tether.call_scope import CancelHandle
from tether.capacity.governor import Governor
from tether.capacity.measure import Budget, physical_memory, resolve_budget, tree_cgroup
from tether.capacity.policy import Settings
from tether.host import thespian_patches, transport_auth
from tether.host.engine import DEFAULT_CALL_TIMEOUT, CallEngine
from tether.host.portfile import (
    StateDirError,
    default_state_dir,
    ensure_private_dir,
    pick_port,
    port_listening,
    reap_stale,
    write_port_file,
)
from tether.host.routes import ROOT, RouteTable, Target
from tether.host.tree_watch import TreeWatch
from tether.kinds import KindSpec, Scope
from tether.messages.calls import ErrorCode, ResourceError
from tether.messages.control import (
    CloseRun,
    HealthQuery,
    HealthReport,
    Hello,
    Inject,
    ListKeys,
    OpenRun,
)
from tether.metrics import Metrics
from tether.places import Place
from tether.private_dirs import STATE_DIR_ENV
from tether.processes import (
    TOKEN_ENV,
    host_fds_stay_home,
    kill_tree,
    name_forked_tree_processes,
    proc_create_time,
    process_info,
    processes_with_token,
    same_process,
    session_processes,
    wait_gone,
)

thespian_patches.apply()  # before any thespian transport or actor process exists
name_forked_tree_processes()  # so the next start's reaper can prove they were ours

from thespian.actors import ActorSystem, InvalidActorAddress  # noqa: E402  (after the patches)

# Modules that declare resource kinds (`KINDS: list[KindSpec]`). A module that does not
# exist (yet) is skipped; one that fails to import is an error that names it.
RESOURCE_KIND_MODULES: list[str] = [
    "tether.actors.parser",
    "tether.actors.git",
    "tether.actors.language_server",
    "tether.actors.checker",
    "tether.actors.debug_session",
    "tether.actors.vibe",
    "tether.actors.kernel",
]
# The echo kinds (tether.actors.echo) are for tests, benchmarks and examples, which ask for
# them with `kind_modules`; a production tree does not carry them.

FAULTS = ("kill_process", "crash_actor", "delay", "drop_reply", "memory_pressure")
ROOT_NAME = "tether-root"
RUNS: Target = ("", "runs", "")
# healing: a call waits this long at most for a tree being rebuilt (and a rebuild's boot may
# take this long); more than MAX_REBUILDS within REBUILD_PERIOD s and the host gives up
HEAL_WAIT = 10.0
MAX_REBUILDS = 10
REBUILD_PERIOD = 60.0
_BOOT_LOCK = threading.Lock()  # one runtime start at a time per host process (see start)


class RuntimeStartError(RuntimeError):
    pass


class KindLoadError(RuntimeError):
    pass


def load_kinds(modules: Iterable[str] = ()) -> list[KindSpec]:
    """Collect the KindSpecs of `modules` (default RESOURCE_KIND_MODULES)."""
    kinds: dict[str, KindSpec] = {}
    for name in list(modules) or RESOURCE_KIND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == name or name.startswith(exc.name + ".")):
                continue  # that family is not part of this build (yet)
            raise KindLoadError(f"resource kind module {name!r} failed to import: {exc}") from exc
        except Exception as exc:
            raise KindLoadError(
                f"resource kind module {name!r} failed to import: {type(exc).__name__}: {exc}"
            ) from exc
        declared = getattr(module, "KINDS", None)
        if declared is None:
            continue
        for spec in declared:
            if not isinstance(spec, KindSpec):
                raise KindLoadError(f"{name}.KINDS must hold KindSpec objects, found {spec!r}")
            if spec.kind in kinds:
                raise KindLoadError(
                    f"resource kind {spec.kind!r} is declared twice ({name} and an earlier module)"
                )
            kinds[spec.kind] = spec
    return list(kinds.values())


@contextlib.contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    """These environment variables for the block, then the host's own values again."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Runtime:
    """A running actor tree. Build it with `Runtime.start()`; use it as a context manager."""

    def __init__(self, *, _token: object = None, **_: Any):
        if _token is not _START_TOKEN:
            raise TypeError("build a Runtime with Runtime.start(...), not Runtime(...)")
        self.admin_port = 0
        self.kinds: dict[str, KindSpec] = {}
        self.state_dir = default_state_dir()
        self.port_file: Path | None = None
        self.admin_pid = 0
        self.admin_sid = 0
        self.admin_create_time = 0.0
        self.root_pid = 0
        self._asys: Any = None
        self._engine: CallEngine | None = None  # route, send, wait, retry (tether.host.engine)
        self._ids = itertools.count(1)
        self._token = uuid.uuid4().hex[:12]
        # every connection into the tree must prove it (tether.host.transport_auth)
        self._secret = transport_auth.new_secret()
        self._closed = True
        self._known_pids: set[tuple[int, float]] = set()
        self._children_before_boot: set[int] = set()
        self._shut_down = False  # shutdown() was called (`_closed` also covers a failed boot)
        # healing (see "the tree heals"): the watch on the top of the tree, set while no
        # tree is being rebuilt, and what health says about the rebuilds
        self._tree_watch: TreeWatch | None = None
        self._healed = threading.Event()
        self._healed.set()
        self._heal_lock = threading.Lock()
        self._heal_failed: ResourceError | None = None
        self._rebuild_times: list[float] = []
        self._rebuilds = 0
        self._tree_note = ""  # the last rebuild, or the one under way, in words
        self.metrics: Metrics | None = None  # with Runtime.start(metrics_port=...)
        self.governor: Governor | None = None  # the memory budget (tether.capacity)
        self.default_place = Place.host()  # a run's place unless open_run names one

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
        place: Any = None,
        memory_budget: int | float | None = None,
        evict_idle_kernels_after: float | None = None,
    ) -> Runtime:
        """Boot thespian multiprocTCPBase on loopback and the supervision tree.

        admin_port: pin the admin port (default: a free one; several runtimes on one
        machine never collide). kinds: the resource kinds (default: those declared by
        RESOURCE_KIND_MODULES, or by `kind_modules`). state_dir: the runtime's private
        directory (0700; its port file, its kernels' files; default: $TETHER_STATE_DIR, else
        $XDG_RUNTIME_DIR/tether, else <tmp>/tether-<uid>). metrics_port: serve Prometheus
        metrics on 127.0.0.1:metrics_port (0: a free one, see `rt.metrics.port`).
        place: the runs' default place (tether.places: "host", the default, "sandbox" or
        a Place); `open_run(..., place=...)` overrides it per run.
        memory_budget: what the tree may hold, in bytes (an int) or as a fraction (a float,
        0 < f <= 1) of its cgroup's limit, else of physical memory (default: the cgroup's
        limit, else 0.8 of physical memory); see `rt.capacity()`.
        evict_idle_kernels_after: minutes after which an idle kernel or debug session may
        be stopped to make room (default None: a conversation's state is never stopped;
        a new resource is refused instead).
        """
        budget, cgroup, settings = _capacity_settings(memory_budget, evict_idle_kernels_after)
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
        rt._keep_budget(budget, cgroup, settings)
        if metrics_port is not None:
            rt._serve_metrics(metrics_port)
        return rt

    def _boot_on_a_free_port(self, admin_port: int | None, start_timeout: float) -> None:
        """Boot the actor system and tree on `admin_port`, or on a free port (a few tries)."""
        attempts = 1 if admin_port else 5
        last_error: Exception | None = None
        for _ in range(attempts):
            try:
                port = admin_port or pick_port()
            except OSError as exc:
                raise RuntimeStartError(str(exc)) from exc
            if admin_port and port_listening(port):
                raise RuntimeStartError(
                    f"admin port {port} is already in use on 127.0.0.1; pick another port or "
                    "omit admin_port to get a free one"
                )
            try:
                # one start at a time per host process: thespian forks the admin from this
                # thread (a concurrent start holding thespian's or logging's locks at that
                # moment could leave the child wedged), and `_abandon` tells our admins
                # from others' by the children this boot made
                with _BOOT_LOCK:
                    self._boot(port, start_timeout)
                return
            except _PortTaken as exc:
                last_error = exc
            except InvalidActorAddress as exc:
                # thespian's admin never answered (it died, or another process took the
                # port first): clean up what this boot started, try another port
                self._abandon()
                last_error = exc
                if admin_port:
                    raise RuntimeStartError(
                        f"the actor system's admin on port {port} did not come up ({exc}); "
                        "pick another port or omit admin_port to get a free one"
                    ) from exc
        raise RuntimeStartError(f"could not start the actor system: {last_error}")

    def _boot(self, port: int, start_timeout: float) -> None:
        from tether.supervisors.tree import RootSupervisor

        self.admin_port = port
        self._children_before_boot = _child_pids()  # what is new after it, it started
        # thespian forks its admin (which daemonizes) from here, and every actor from the
        # admin: they all inherit these variables (start() holds _BOOT_LOCK, so no other
        # start sees them): the token identifies them as ours, and the state dir is the one
        # this runtime was given (kernels keep their files in it, tether.kernels.launch)
        tree_env = {TOKEN_ENV: self._token, STATE_DIR_ENV: str(self.state_dir)}
        with (
            _environment(tree_env),
            transport_auth.using_secret(self._secret),
            host_fds_stay_home(),
        ):
            # the tree forks with the secret, and without the host's descriptors
            self._asys = ActorSystem(
                "multiprocTCPBase",
                capabilities={"Admin Port": port},
                transientUnique=True,
            )
        engine = CallEngine(
            self._asys, self.kinds, self._next_id, lambda: self._closed, self._system_died
        )
        engine.admit = self._admit
        self._engine = engine
        self._closed = False
        try:
            root = self._asys.createActor(RootSupervisor, globalName=ROOT_NAME)
            me = psutil.Process()
            hello = Hello(
                call_id=self._next_id(),
                host_pid=me.pid,
                host_create_time=me.create_time(),
                kinds=[k.to_wire() for k in self.kinds.values()],
            )
            reply, addresses = engine.ask(
                root, hello, hello.call_id, start_timeout, "start the tree"
            )
        except ResourceError as exc:
            self._abandon()
            raise RuntimeStartError(
                f"the actor tree did not start within {start_timeout:g} s: {exc.message}"
            ) from exc
        if reply.payload.get("token") != self._token:
            # another actor system already listened on this port: we attached to it
            self._asys = None
            self._closed = True
            raise _PortTaken(
                f"port {port} belongs to another actor system (admin pid {reply.payload['admin_pid']})"
            )
        self.admin_pid = int(reply.payload["admin_pid"])
        self.admin_create_time = proc_create_time(self.admin_pid)
        with contextlib.suppress(OSError):
            self.admin_sid = os.getsid(self.admin_pid)
        self.root_pid = int(reply.payload["pid"])
        engine.routes.add(ROOT, root, 1, self.root_pid)
        engine.learn_tree(reply.payload, addresses)
        self._remember_pid(self.admin_pid)
        self._remember_pid(self.root_pid)
        self._write_port_file()
        atexit.register(self.shutdown)
        self._watch_tree()

    def _abandon(self) -> None:
        """A start that failed half-way: stop and kill whatever this boot started, and
        nothing else (a listener on the port may belong to another actor system)."""
        stopper = threading.Thread(target=self._stop_system, daemon=True)
        stopper.start()
        stopper.join(2.0)
        for sid, created in self._admin_sessions_started():
            for proc in session_processes(sid, created):
                with contextlib.suppress(Exception):
                    kill_tree(proc.pid, grace=0.0, group=False)
        for proc in processes_with_token(self._token):
            with contextlib.suppress(Exception):
                kill_tree(proc.pid, grace=0.2, group=False)
        self._asys = None
        self._closed = True

    def _admin_sessions_started(self) -> list[tuple[int, float]]:
        """The sessions of the admins this boot forked, as (sid, create time). Thespian
        starts its admin through a child of this process that calls setsid and is never
        reaped: the session id is the pid of a zombie child of ours that was not there
        before the boot (a zombie keeps its pid, so the id cannot have been reused)."""
        found = []
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process().children():
                if child.pid in self._children_before_boot:
                    continue
                with contextlib.suppress(psutil.Error):
                    if child.status() == psutil.STATUS_ZOMBIE:
                        found.append((child.pid, child.create_time()))
        return found

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: Any) -> None:
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
        self._stop_healing(deadline - 2.0)
        self._closed = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.shutdown)
        tracked = {p.pid: p for p in [*self._tree_processes(), *processes_with_token(self._token)]}
        tracked_list = list(tracked.values())
        # close the per-thread endpoints first: with them open, thespian's shutdown waits
        # ~10 s on them (measured with 16 caller threads)
        if self._engine is not None:
            self._engine.close()
        if self.metrics is not None:
            self.metrics.close()
        if self.governor is not None:
            self.governor.stop()
        stopper = threading.Thread(target=self._stop_system, name="tether-shutdown", daemon=True)
        stopper.start()
        stopper.join(max(deadline - time.monotonic() - 1.0, 0.5))
        alive = wait_gone(tracked_list, min(deadline, time.monotonic() + 2.0))
        for proc in [*alive, *processes_with_token(self._token)]:
            with contextlib.suppress(Exception):
                kill_tree(proc.pid, grace=0.0)
        if self.port_file is not None:
            with contextlib.suppress(OSError):
                self.port_file.unlink()

    # --- capacity (tether.capacity) ---------------------------------------------------
    def _keep_budget(self, budget: Budget, cgroup: Any, settings: Settings) -> None:
        status = self.port_file.with_suffix(".capacity") if self.port_file else None
        self.governor = Governor(
            budget,
            cgroup,
            settings,
            health=lambda timeout: self.health(timeout=timeout),
            top_pids=self._thespian_pids,
            evict=self._evict,
            kind_configs={k: spec.config for k, spec in self.kinds.items()},
            status_file=status,
        )
        self.governor.sample()
        self.governor.start()

    def _admit(self, call: Any) -> None:
        if self.governor is not None:
            self.governor.admit(call)

    def _thespian_pids(self) -> list[int]:
        """Thespian's admin and logger: part of the tree's charge, with no usage record."""
        with contextlib.suppress(psutil.Error):
            admin = psutil.Process(self.admin_pid)
            return [admin.pid, *(c.pid for c in admin.children() if c.pid != self.root_pid)]
        return []

    def _evict(self, name: str, why: str) -> bool:
        """Stop the resource actor `name` to make room: a normal stop (its supervisor
        forgets it; the next call starts a fresh one, whose first result says why)."""
        msg = Inject(self._next_id(), "evict", name, {"why": why})
        try:
            engine, left = self._engine_within(2.0)
            reply, _ = engine.ask_node(ROOT, msg, msg.call_id, left, f"stop {name!r} for room")
        except ResourceError:
            return False
        return bool(reply.ok)

    def capacity(self) -> dict[str, Any]:
        """The tree's memory, for a host deciding whether to send more conversations:
        budget, used (and how it was counted), reserved (resources starting), free,
        evictable (what may be stopped to make room), by_kind (bytes and count),
        conversations, average_conversation, fit (how many more of the average size fit),
        evictions by kind, refusals."""
        self._check_open()
        assert self.governor is not None
        return self.governor.summary()

    def _serve_metrics(self, port: int) -> None:
        self.metrics = Metrics(lambda timeout: self.health(timeout=timeout), self.capacity)
        try:
            self.metrics.serve(port)
        except OSError as exc:
            self.shutdown()
            raise RuntimeStartError(
                f"cannot serve metrics on 127.0.0.1:{port} ({exc}); pick another port or "
                "pass metrics_port=0 for a free one"
            ) from exc

    def _stop_system(self) -> None:
        with contextlib.suppress(Exception):
            self._asys.shutdown()

    def _tree_processes(self) -> list[psutil.Process]:
        """Every live process of this runtime: the admin, its descendants, the rest of the
        admin's session (descendants whose parent died), and any process an actor reported
        (a daemonizing subprocess is no longer a descendant)."""
        procs: dict[int, psutil.Process] = {
            p.pid: p for p in session_processes(self.admin_sid, self.admin_create_time)
        }
        with contextlib.suppress(psutil.NoSuchProcess):
            admin = psutil.Process(self.admin_pid)
            procs[admin.pid] = admin
            for child in admin.children(recursive=True):
                procs[child.pid] = child
        for pid, created in self._known_pids:
            if pid not in procs and same_process(pid, created):
                with contextlib.suppress(psutil.NoSuchProcess):
                    procs[pid] = psutil.Process(pid)
        return list(procs.values())

    def processes(self) -> list[psutil.Process]:
        """Every live process of this runtime now: the tree's (`_tree_processes`) and any
        other process that carries its token. What an orphan check remembers before
        shutdown, to ask `left_behind` about after it."""
        procs = {p.pid: p for p in self._tree_processes()}
        procs.update({p.pid: p for p in processes_with_token(self._token)})
        return list(procs.values())

    def left_behind(
        self, seen: Iterable[psutil.Process], wait: float = 5.0
    ) -> list[psutil.Process]:
        """After shutdown(): the processes of `seen` (from `processes()`) and any process
        carrying this runtime's token that still run once `wait` s have passed (DESIGN.md
        invariant 3: no process outlives the runtime that started it)."""
        procs = {p.pid: p for p in seen}
        procs.update({p.pid: p for p in processes_with_token(self._token)})
        return wait_gone(list(procs.values()), time.monotonic() + wait)

    def _remember_pid(self, pid: int) -> None:
        created = proc_create_time(pid)
        if created:
            self._known_pids.add((pid, created))

    # --- port file -------------------------------------------------------------------
    def _write_port_file(self) -> None:
        me = psutil.Process()
        self.port_file = write_port_file(
            self.state_dir,
            {
                "admin_port": self.admin_port,
                "host_pid": me.pid,
                "host_create_time": me.create_time(),
                "admin_pid": self.admin_pid,
                "admin_create_time": self.admin_create_time,
                "admin_sid": self.admin_sid,
                "root_pid": self.root_pid,
                "token": self._token,
                "secret": self._secret.hex(),  # for `tether status` (0600, private dir)
            },
        )

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
        """The engine of the current tree, and what is left of `timeout` once it is there:
        while the tree is being rebuilt, a call waits for it (never past its timeout)."""
        self._check_open()
        if self._healed.is_set() and self._heal_failed is None:
            assert self._engine is not None
            return self._engine, timeout  # (the engine checks the timeout itself)
        start = time.monotonic()
        if not self._healed.wait(timeout):
            raise ResourceError(
                ErrorCode.RESTARTING,
                f"{self._tree_note}; it was not rebuilt within {timeout:g} s - call again in a "
                "moment, or check rt.health()",
            )
        self._check_open()
        if self._heal_failed is not None:
            raise self._heal_failed
        assert self._engine is not None
        left = timeout - (time.monotonic() - start)
        if left <= 0:
            raise ResourceError(
                ErrorCode.DEADLINE,
                f"the call's {timeout:g} s passed while the actor tree was rebuilt "
                f"({self._tree_note}); call again",
            )
        return self._engine, left

    @property
    def _routes(self) -> RouteTable:
        return self.engine.routes

    def _call(
        self,
        run_id: str,
        kind: str,
        key: str,
        op: str | Any,
        args: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_CALL_TIMEOUT,
        idempotent: bool = False,
        cancel: CancelHandle | None = None,
    ) -> dict[str, Any]:
        """Ask the resource actor (kind, key) of run `run_id` to do `op` (CallEngine.call)."""
        engine, left = self._engine_within(timeout)
        return engine.call(run_id, kind, key, op, args, left, idempotent, cancel)

    def _gather(
        self,
        run_id: str,
        calls: Sequence[tuple[str, str, str | Any, Mapping[str, Any] | None]],
        timeout: float = DEFAULT_CALL_TIMEOUT,
        idempotent: bool = False,
        cancel: CancelHandle | None = None,
    ) -> list[dict[str, Any] | ResourceError]:
        """Several calls at once, answers in order (CallEngine.gather)."""
        engine, left = self._engine_within(timeout)
        return engine.gather(run_id, calls, left, idempotent, cancel)

    def _system_died(self, what: str) -> ResourceError | None:
        """The error for a call on `what` when the actor system itself is gone, else None."""
        if not self.admin_pid or same_process(self.admin_pid, self.admin_create_time):
            return None
        return ResourceError(
            ErrorCode.RESTARTING,
            f"the actor system of this runtime died (admin pid {self.admin_pid} is gone), so "
            f"{what} cannot answer; the runtime rebuilds it - call again",
        )

    def _open_run_actor(self, run_id: str, timeout: float = 10.0) -> None:
        """Start (or find) the RunActor of `run_id`, and learn where it is. Idempotent."""
        msg = OpenRun(self._next_id(), str(run_id))
        what = f"open run {run_id!r}"
        engine, left = self._engine_within(timeout)
        reply, address = engine.ask_node(RUNS, msg, msg.call_id, left, what)
        if not reply.ok:
            raise ResourceError(reply.error, reply.message)
        payload = reply.payload
        engine.routes.add(
            ("", "run", str(run_id)), address, int(payload["incarnation"]), int(payload["pid"])
        )

    def close_run(self, run_id: str, timeout: float = 5.0) -> None:
        """Stop the RunActor of `run_id` and the run-scoped actors under it."""
        if self._shut_down or self._engine is None:
            return
        engine, left = self._engine_within(timeout)
        engine.routes.forget_run(str(run_id))
        msg = CloseRun(self._next_id(), str(run_id))
        engine.ask_node(RUNS, msg, msg.call_id, left, f"close run {run_id!r}")

    # --- what is connected -----------------------------------------------------------
    def connected_kinds(self) -> set[str]:
        return set(self.kinds) if not self._shut_down else set()

    def kind_keys(self, kind: str, timeout: float = 5.0) -> list[str]:
        """The keys of `kind`: its declared key set (config["keys"], e.g. pool slots), or
        for a shared kind without one, the keys of the actors currently running."""
        spec = self.kinds.get(kind)
        if spec is None:
            raise ResourceError(
                ErrorCode.BAD_REQUEST,
                f"no resource kind {kind!r}; connected kinds: {', '.join(sorted(self.kinds)) or 'none'}",
            )
        if spec.config.get("keys") is not None:
            return list(spec.config["keys"])
        if spec.scope is not Scope.SHARED or self._shut_down:
            return []
        msg = ListKeys(self._next_id(), kind)
        target = ("", "supervisor", kind)
        engine, left = self._engine_within(timeout)
        reply, _ = engine.ask_node(target, msg, msg.call_id, left, f"list the keys of {kind!r}")
        return list(reply.payload.get("keys", []))

    # --- runs ------------------------------------------------------------------------
    def open_run(
        self,
        run_id: str,
        workdir: str | os.PathLike[str] | None = None,
        surface: Any = None,
        question_port: Any = None,
        vibe: bool = False,
        **options: Any,
    ) -> Any:
        """A conversation's tools (tether.run.Run) backed by a RunActor in this runtime."""
        from tether.run import Run
        from tether.tools.spec import Surface

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
    def health(self, timeout: float = 5.0) -> dict[str, Any]:
        """The actor tree as a dict: each node has name, kind, key, state, uptime, restarts,
        last_error, pending, pids (pid, cmd, rss, cpu) and children. A subtree that does not
        answer in time is marked "unresponsive"; health() itself never waits past timeout."""
        self._check_open()
        start = time.monotonic()
        if not self._healed.wait(timeout * 0.5):
            return self._healing_node("restarting")
        if self._heal_failed is not None:
            return self._healing_node("failed")
        engine, _ = self._engine_within(timeout)
        left = timeout - (time.monotonic() - start)
        query = HealthQuery(self._next_id(), time.monotonic() + left * 0.9)
        what = "report the health of the actor tree"
        try:
            report, _ = engine.ask_node(ROOT, query, query.query_id, left, what)
        except ResourceError:
            if engine.broken is None:
                raise
            return self._healing_node("restarting")  # (its tree died as it answered)
        assert isinstance(report, HealthReport)
        node = dict(report.node)
        node["admin_port"] = self.admin_port
        node["pids"] = [process_info(self.admin_pid), *node.get("pids", [])]
        node["restarts"] = self._rebuilds  # the tree's own restarts: rebuilds by the host
        node["last_error"] = node.get("last_error") or self._tree_note
        if self.governor is not None:
            node["capacity"] = self.governor.summary()
        self._learn_pids(node)
        return node

    def _learn_pids(self, node: dict[str, Any]) -> None:
        for info in node.get("pids", []):
            if info.get("alive"):
                self._remember_pid(int(info["pid"]))
        for child in node.get("children", []):
            self._learn_pids(child)

    def inject(
        self, fault: str, target: str = "", timeout: float = 5.0, **args: Any
    ) -> dict[str, Any]:
        """Inject a fault into the actor named `target` (as health() names it):
        kill_process (SIGKILL its OS process), crash_actor (SIGKILL the actor itself),
        delay(seconds=, count=1) (its next calls wait), drop_reply(count=1) (its next
        replies are lost). memory_pressure(budget=, seconds=None) targets the whole tree:
        its budget shrinks to `budget` (bytes, or a fraction of the configured one) for
        `seconds` (None: until the next memory_pressure; budget=1.0 lifts it), and the
        governor stops what it may to get under it."""
        self._check_open()
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; faults: {', '.join(FAULTS)}")
        if fault == "memory_pressure":
            if "budget" not in args or set(args) - {"budget", "seconds"}:
                raise ValueError(
                    "memory_pressure takes budget= (bytes, or a fraction of the budget) and "
                    "optionally seconds=, e.g. rt.inject('memory_pressure', budget=0.5, "
                    f"seconds=10); got {sorted(args)}"
                )
            assert self.governor is not None
            return self.governor.pressure(args["budget"], args.get("seconds"))
        if fault == "delay" and "seconds" not in args:
            raise ValueError(
                "delay needs seconds=..., e.g. rt.inject('delay', target='echo:k', seconds=2.0)"
            )
        msg = Inject(self._next_id(), fault, target, dict(args))
        what = f"inject {fault} into {target!r}"
        engine, left = self._engine_within(timeout)
        reply, _ = engine.ask_node(ROOT, msg, msg.call_id, left, what)
        if not reply.ok:
            raise ResourceError(reply.error, reply.message)
        return dict(reply.payload)

    # --- the tree heals -----------------------------------------------------------
    # Supervisors restart every node below the root. The admin, its logger and the root
    # have none: the host watches them (tether.host.tree_watch) and, when one dies, fails every
    # call open on the old tree at once, kills what is left of it, and boots a new admin and
    # root. Shared servers start again on their next call; a run's RunActor is started again
    # by its next call (the runs supervisor starts one for any run id it routes to, as after
    # its own restart), so the host does not reopen runs: open_run and close_run work as
    # before, and a Run keeps working.

    def _watch_tree(self) -> None:
        """Watch the admin, its logger and the root of the tree just booted."""
        top = {"admin": self.admin_pid, "root": self.root_pid}
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.admin_pid).children():
                if child.pid != self.root_pid:
                    top[f"admin's {child.name()} process"] = child.pid  # the logger
        watched = {role: (pid, proc_create_time(pid)) for role, pid in top.items()}
        self._tree_watch = TreeWatch(watched, self._tree_died)
        self._tree_watch.start()

    def _tree_died(self, role: str, pid: int) -> None:
        """(On the watch's thread.) The top of the tree is gone: rebuild it."""
        with self._heal_lock:
            watch = self._tree_watch
            if self._shut_down or watch is None or watch.processes.get(role, (0, 0.0))[0] != pid:
                return  # (a watch of a tree already gone)
            self._healed.clear()
            try:
                self._rebuild(role, pid)
            finally:
                self._healed.set()

    def _rebuild(self, role: str, pid: int) -> None:
        self._tree_note = f"the actor system's {role} (pid {pid}) died"
        old = self._engine
        if old is not None:
            old.break_tree(
                ResourceError(
                    ErrorCode.RESTARTING,
                    f"{self._tree_note} while this call was open; the runtime is rebuilding "
                    "its actor tree - call again (servers and run resources start afresh)",
                )
            )
        self._discard_tree(old)
        now = time.monotonic()
        self._rebuild_times = [t for t in self._rebuild_times if now - t < REBUILD_PERIOD]
        if len(self._rebuild_times) >= MAX_REBUILDS:
            self._give_up_healing(f"{MAX_REBUILDS} rebuilds in {REBUILD_PERIOD:g} s")
            return
        self._rebuild_times.append(now)
        try:
            self._boot_on_a_free_port(None, HEAL_WAIT)
        except (RuntimeStartError, ResourceError, OSError) as exc:
            self._give_up_healing(str(exc))
            return
        self._rebuilds += 1
        took = time.monotonic() - now
        self._tree_note = f"rebuilt in {took:.2f} s after {self._tree_note}"

    def _give_up_healing(self, why: str) -> None:
        self._heal_failed = ResourceError(
            ErrorCode.UNAVAILABLE,
            f"{self._tree_note} and the actor tree could not be rebuilt ({why}); shut this "
            "runtime down and start a new one",
        )
        self._tree_note = self._heal_failed.message
        self._discard_tree(None)

    def _discard_tree(self, engine: CallEngine | None) -> None:
        """Kill what is left of the current tree now; close the host's endpoints on it
        and its actor system object on a thread (thespian waits on a dead admin)."""
        procs = [p for p in self._tree_processes() if p.pid != os.getpid()]
        procs += processes_with_token(self._token)
        for proc in procs:
            with contextlib.suppress(Exception):
                kill_tree(proc.pid, grace=0.0, wait=False)
        wait_gone(procs, time.monotonic() + 1.0)
        if self.port_file is not None:
            with contextlib.suppress(OSError):
                self.port_file.unlink()
            self.port_file = None
        asys, self._asys = self._asys, None

        def close() -> None:
            if engine is not None:
                engine.close()
            with contextlib.suppress(Exception):
                asys.shutdown()

        threading.Thread(target=close, name="tether-old-tree", daemon=True).start()

    def _healing_node(self, state: str) -> dict[str, Any]:
        """health() while there is no tree to ask (being rebuilt, or could not be)."""
        return {
            "name": "root",
            "kind": "root",
            "key": "",
            "state": state,
            "uptime": 0.0,
            "restarts": self._rebuilds,
            "last_error": self._tree_note,
            "pending": 0,
            "pids": [],
            "children": [],
            "admin_port": self.admin_port,
        }

    def _stop_healing(self, deadline: float) -> None:
        """shutdown(): no rebuild from now on; one under way ends first (bounded)."""
        if self._tree_watch is not None:
            self._tree_watch.stop()
        if self._heal_lock.acquire(timeout=max(deadline - time.monotonic(), 0.1)):
            self._heal_lock.release()
        if self._tree_watch is not None:  # (a rebuild that just ended started a new one)
            self._tree_watch.stop()

    def __repr__(self) -> str:
        state = "closed" if self._shut_down else "running"
        return f"Runtime(admin_port={self.admin_port}, kinds={sorted(self.kinds)}, {state})"


def _capacity_settings(
    memory_budget: int | float | None, evict_idle_kernels_after: float | None
) -> tuple[Budget, Any, Settings]:
    """Runtime.start's capacity arguments, checked before anything starts."""
    cgroup = tree_cgroup()
    try:
        limit = cgroup.limit() if cgroup else None
        budget = resolve_budget(memory_budget, limit, physical_memory(), str(cgroup))
        minutes = evict_idle_kernels_after
        seconds = None if minutes is None else minutes * 60
        return budget, cgroup, Settings(evict_idle_kernels_after=seconds)
    except (ValueError, TypeError) as exc:
        raise RuntimeStartError(str(exc)) from exc


def _child_pids() -> set[int]:
    with contextlib.suppress(psutil.Error):
        return {c.pid for c in psutil.Process().children()}
    return set()


class _PortTaken(Exception):
    pass


_START_TOKEN = object()
