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
Every call carries a call id; a reply with another id — a late answer to a call that
already timed out — is dropped, never handed to the next call.

No orphans: `shutdown()` stops the tree, then kills whatever the runtime started that is
still alive (psutil, bounded). If the host dies without shutting down, every actor's
watchdog notices within a fraction of a second and takes its processes down, and the
port file (`state_dir/<admin_port>.json`) lets the next `Runtime.start()` (or
`Runtime.reap_stale()`) clean up anything left.
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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from tether import thespian_patches
from tether.channels import ChannelGone, HostChannel, HostChannels, wait_readable
from tether.contexts import Contexts
from tether.host_routes import DirectRoute, Flight, Gone, RouteTable
from tether.kinds import KindSpec, Scope
from tether.messages.calls import Call, ErrorCode, Reply, ResourceError
from tether.messages.codec import CodecError, decode, encode
from tether.messages.control import (
    CloseRun,
    HealthQuery,
    HealthReport,
    Hello,
    Inject,
    ListKeys,
    OpenRun,
    Route,
    RouteInfo,
)
from tether.portfile import (
    default_state_dir,
    pick_port,
    port_listening,
    reap_stale,
    write_port_file,
)
from tether.processes import (
    kill_tree,
    proc_create_time,
    process_info,
    processes_with_token,
    same_process,
    session_processes,
    wait_gone,
)
from tether.supervisors.policy import call_outcome_when_gone

thespian_patches.apply()  # before any thespian transport or actor process exists

from thespian.actors import ActorSystem, InvalidActorAddress  # noqa: E402  (after the patches)

# Modules that declare resource kinds (`KINDS: list[KindSpec]`). A module that does not
# exist (yet) is skipped; one that fails to import is an error that names it.
RESOURCE_KIND_MODULES: list[str] = [
    "tether.actors.parser",
    "tether.actors.language_server",
]
# The echo kinds (tether.actors.echo) are for tests, benchmarks and examples, which ask for
# them with `kind_modules`; a production tree does not carry them.

FAULTS = ("kill_process", "crash_actor", "delay", "drop_reply")
ROOT_NAME = "tether-root"
DEFAULT_CALL_TIMEOUT = 30.0
TOKEN_ENV = "TETHER_RUNTIME_TOKEN"
WATCH_PERIOD = 0.5  # while a call waits, how often the host checks the actor it waits on
# a wait for answers both on call channels and through thespian looks at each in turn, this
# long at most (rare: a gather that mixes first and repeat calls, or a retry mid-gather)
MIXED_WAIT_SLICE = 0.002
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
        self._contexts: Contexts | None = None
        self._root: Any = None
        self._runs_supervisor: Any = None
        self._kind_supervisors: dict[str, Any] = {}
        self._routes = RouteTable()  # shared (kind, key) -> its actor, for direct sends
        self._channels = HostChannels()  # each thread's call channels to those actors
        self._run_addresses: dict[str, Any] = {}
        self._run_lock = threading.Lock()
        self._run_pids: dict[str, tuple[int, float]] = {}  # run id -> its RunActor's process
        self._ids = itertools.count(1)
        self._token = uuid.uuid4().hex[:12]
        self._closed = True
        self._known_pids: set[tuple[int, float]] = set()
        self._children_before_boot: set[int] = set()

    # --- lifecycle -------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        admin_port: int | None = None,
        kinds: Sequence[KindSpec] | None = None,
        kind_modules: Sequence[str] | None = None,
        start_timeout: float = 10.0,
        state_dir: str | os.PathLike[str] | None = None,
    ) -> Runtime:
        """Boot thespian multiprocTCPBase on loopback and the supervision tree.

        admin_port: pin the admin port (default: a free one; several runtimes on one
        machine never collide). kinds: the resource kinds (default: those declared by
        RESOURCE_KIND_MODULES, or by `kind_modules`).
        """
        rt = cls(_token=_START_TOKEN)
        rt.state_dir = Path(state_dir) if state_dir else default_state_dir()
        specs = list(kinds) if kinds is not None else load_kinds(kind_modules or ())
        rt.kinds = {k.kind: k for k in specs}
        cls.reap_stale(rt.state_dir)
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
                    rt._boot(port, start_timeout)
                return rt
            except _PortTaken as exc:
                last_error = exc
            except InvalidActorAddress as exc:
                # thespian's admin never answered (it died, or another process took the
                # port first): clean up what this boot started, try another port
                rt._abandon()
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
        # admin: they all inherit this variable, which identifies them as ours (start() holds
        # _BOOT_LOCK, so no other start sees it)
        os.environ[TOKEN_ENV] = self._token
        try:
            self._asys = ActorSystem(
                "multiprocTCPBase",
                capabilities={"Admin Port": port},
                transientUnique=True,
            )
        finally:
            os.environ.pop(TOKEN_ENV, None)
        self._contexts = Contexts(self._asys)
        self._closed = False
        try:
            self._root = self._asys.createActor(RootSupervisor, globalName=ROOT_NAME)
            me = psutil.Process()
            hello = Hello(
                call_id=self._next_id(),
                host_pid=me.pid,
                host_create_time=me.create_time(),
                kinds=[k.to_wire() for k in self.kinds.values()],
            )
            reply, extra = self._ask(
                self._root, hello, hello.call_id, start_timeout, "start the tree"
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
        self._runs_supervisor = extra["runs"]
        self._kind_supervisors = dict(extra["kinds"])
        self._remember_pid(self.admin_pid)
        self._remember_pid(self.root_pid)
        self._write_port_file()
        atexit.register(self.shutdown)

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
        return self._closed

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every actor and every process the runtime started. Bounded by `timeout`;
        whatever is still alive at the end is SIGKILLed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.shutdown)
        deadline = time.monotonic() + timeout
        tracked = {p.pid: p for p in [*self._tree_processes(), *processes_with_token(self._token)]}
        tracked_list = list(tracked.values())
        # close the per-thread endpoints first: with them open, thespian's shutdown waits
        # ~10 s on them (measured with 16 caller threads)
        if self._contexts is not None:
            self._contexts.close_all()
        self._channels.close_all()
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
            },
        )

    @classmethod
    def reap_stale(cls, state_dir: str | os.PathLike[str] | None = None) -> list[int]:
        """Clean up after hosts that died without shutting down: for every port file whose
        host is gone, kill what is left of its actor system. Returns the admin ports reaped."""
        return reap_stale(Path(state_dir) if state_dir else default_state_dir())

    # --- host-side calls -------------------------------------------------------------
    def _next_id(self) -> str:
        return f"{self._token}-{next(self._ids)}"

    def _check_open(self) -> None:
        if self._closed:
            raise ResourceError(
                ErrorCode.UNAVAILABLE,
                "the runtime is shut down; start a new one with Runtime.start()",
            )

    def _ask(
        self, address: Any, msg: Any, call_id: str, timeout: float, what: str
    ) -> tuple[Reply, Any]:
        assert self._contexts is not None
        ctx = self._contexts.get()
        self._tell(ctx, address, encode(msg))
        got = self._await(ctx, {call_id}, time.monotonic() + timeout)
        if call_id not in got:
            raise ResourceError(
                ErrorCode.DEADLINE, f"no answer within {timeout:g} s when trying to {what}"
            )
        return got[call_id]

    def _await(
        self,
        ctx: Any,
        wanted: set[str],
        deadline: float,
        run_id: str | None = None,
        flights: dict[str, Flight] | None = None,
    ) -> dict[str, tuple[Any, Any]]:
        """Collect the replies for `wanted` ids until all arrived or the deadline passed.
        Anything else that arrives (late replies to calls that timed out) is dropped.
        While waiting, every WATCH_PERIOD seconds, what the calls wait on is checked: the
        run's actor process (`run_id`, for calls routed by it) and the actor processes
        that host-routed `flights` were sent to. A call that nobody will answer any more
        becomes a ResourceError in place of its reply, or is sent once more."""
        got: dict[str, tuple[Any, Any]] = {}
        flights = flights if flights is not None else {}
        watched = self._run_pids.get(run_id) if run_id is not None else None
        if flights and all(f.call.host_routed for f in flights.values()):
            watched = None  # no call of this wait goes through the RunActor
        watching = bool((watched and watched[0]) or flights)
        next_check = time.monotonic() + WATCH_PERIOD
        while len(got) < len(wanted):
            now = time.monotonic()
            if now >= deadline:
                break
            if watching and now >= next_check:
                next_check = now + WATCH_PERIOD
                if watched and watched[0] and not same_process(*watched):
                    died = self._run_died(str(run_id))
                    for missing in wanted - set(got):
                        if missing not in flights or not flights[missing].call.host_routed:
                            got[missing] = (died, None)
                    watched = None
                self._check_routes(ctx, flights, got)
                continue
            wait = min(deadline, next_check) - now if watching else deadline - now
            channels = self._open_channels(flights, got)
            if channels:
                # only the answers on call channels are awaited: wait on those alone
                on_channels = {
                    i for i, f in flights.items() if f.channel is not None and i not in got
                }
                only_channels = not (wanted - set(got) - on_channels)
                channel_wait = wait if only_channels else 0.0
                self._read_channels(ctx, channels, channel_wait, wanted, flights, got)
                if only_channels:
                    continue
                wait = min(wait, MIXED_WAIT_SLICE)
            try:
                msg = ctx.listen(wait)
            except Exception as exc:  # the endpoint was closed under us (shutdown)
                raise self._transport_error(exc) from exc
            if msg is not None:
                self._take(ctx, msg, wanted, flights, got)
        return got

    @staticmethod
    def _open_channels(
        flights: dict[str, Flight], got: dict[str, tuple[Any, Any]]
    ) -> list[HostChannel]:
        """The call channels the calls still awaited were sent on."""
        channels: dict[int, HostChannel] = {}
        for call_id, flight in flights.items():
            if flight.channel is not None and call_id not in got:
                channels[id(flight.channel)] = flight.channel
        return list(channels.values())

    def _read_channels(
        self,
        ctx: Any,
        channels: list[HostChannel],
        wait: float,
        wanted: set[str],
        flights: dict[str, Flight],
        got: dict[str, tuple[Any, Any]],
    ) -> None:
        """Take the replies that arrived on `channels` within `wait`. A channel its actor
        closed means that actor process is gone, like a pid that disappeared."""
        for channel in wait_readable(channels, wait):
            frames = channel.receive()
            if frames is None:
                for flight in list(flights.values()):
                    if flight.channel is channel and flight.call.call_id not in got:
                        how = " (its call channel closed)"
                        self._process_gone(ctx, flight, flights, got, how)
                continue
            for data in frames:
                self._take(ctx, data, wanted, flights, got)

    def _take(
        self,
        ctx: Any,
        msg: Any,
        wanted: set[str],
        flights: dict[str, Flight],
        got: dict[str, tuple[Any, Any]],
    ) -> None:
        """One message that arrived while waiting."""
        extra = None
        if isinstance(msg, tuple) and len(msg) == 2 and isinstance(msg[0], bytes):
            msg, extra = msg
        if not isinstance(msg, bytes):
            return  # a thespian system message (e.g. a poison notice); not ours
        try:
            obj = decode(msg)
        except CodecError:
            return
        if isinstance(obj, RouteInfo):
            route = self._routes.learn(obj, extra)
            told = flights.get(obj.call_id)
            if told is not None and obj.incarnation > told.after_incarnation:
                # (not a stale word on a gone attempt) its process is watched while we wait
                told.route, told.incarnation = route, obj.incarnation
            return
        ident = getattr(obj, "call_id", None) or getattr(obj, "query_id", None)
        if ident not in wanted or ident in got:
            return
        flight = flights.get(ident)
        if flight is not None and isinstance(obj, Reply) and obj.error == ErrorCode.MOVED:
            # the actor serving it is going and could not serve it: send it once more
            incarnation = int(obj.payload.get("incarnation", 0))
            if incarnation <= flight.after_incarnation:
                return  # from an incarnation this call was already sent on from
            kind, key = flight.call.kind, flight.call.key
            self._routes.forget(kind, key, incarnation)
            if not obj.payload.get("started", True):  # never ran there: just send it on
                flight.send_after(incarnation, as_retry=False)
                self._send(ctx, flight)
                return
            gone = Gone(kind, key, incarnation, "crash", obj.message)
            self._retry_or_fail(ctx, flight, got, gone)
            return
        got[ident] = (obj, extra)

    def _tell(self, ctx: Any, address: Any, data: bytes) -> None:
        try:
            ctx.tell(address, data)
        except Exception as exc:
            raise self._transport_error(exc) from exc

    def _transport_error(self, exc: Exception) -> ResourceError:
        if self._closed:
            return ResourceError(
                ErrorCode.UNAVAILABLE,
                "the runtime is shut down; start a new one with Runtime.start()",
            )
        return ResourceError(
            ErrorCode.UNAVAILABLE,
            f"could not reach the actor system ({type(exc).__name__}: {exc}); check rt.health() "
            "or restart the runtime",
        )

    def _run_address(self, run_id: str, timeout: float = 10.0) -> Any:
        address = self._run_addresses.get(run_id)
        if address is None:
            self._open_run_actor(run_id, timeout)
            address = self._run_addresses[run_id]
        return address

    def _open_run_actor(self, run_id: str, timeout: float = 10.0) -> None:
        """Start (or find) the RunActor of `run_id`. Idempotent."""
        self._check_open()
        msg = OpenRun(self._next_id(), str(run_id))
        reply, extra = self._ask(
            self._runs_supervisor, msg, msg.call_id, timeout, f"open run {run_id!r}"
        )
        if not reply.ok:
            raise ResourceError(reply.error, reply.message)
        pid = int(reply.payload.get("pid") or 0)
        with self._run_lock:
            self._run_addresses[str(run_id)] = extra
            self._run_pids[str(run_id)] = (pid, proc_create_time(pid) if pid else 0.0)

    def _close_run_actor(self, run_id: str, timeout: float = 5.0) -> None:
        """Stop the RunActor of `run_id` and the run-scoped actors under it."""
        if self._closed:
            return
        with self._run_lock:
            self._run_addresses.pop(str(run_id), None)
            self._run_pids.pop(str(run_id), None)
        msg = CloseRun(self._next_id(), str(run_id))
        self._ask(self._runs_supervisor, msg, msg.call_id, timeout, f"close run {run_id!r}")

    close_run = _close_run_actor

    def _make_call(
        self,
        run_id: str,
        kind: str,
        key: str,
        op: str,
        args: Mapping[str, Any],
        timeout: float,
        idempotent: bool,
    ) -> tuple[Call, bytes]:
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise ResourceError(
                ErrorCode.BAD_REQUEST,
                f"timeout must be a positive number of seconds, got {timeout!r}",
            )
        spec = self.kinds.get(kind)
        if spec is None:
            raise ResourceError(
                ErrorCode.BAD_REQUEST,
                f"no resource kind {kind!r} in this runtime; connected kinds: "
                f"{', '.join(sorted(self.kinds)) or 'none'}",
            )
        call = Call(
            call_id=self._next_id(),
            run_id=str(run_id),
            kind=kind,
            key=str(key),
            op=op,
            args=dict(args),
            deadline=time.monotonic() + timeout,
            idempotent=bool(idempotent),
            host_routed=spec.scope is Scope.SHARED,
        )
        try:
            return call, encode(call)
        except CodecError as exc:
            raise ResourceError(
                ErrorCode.BAD_REQUEST,
                f"arguments of {kind}.{op} cannot be sent to an actor: {exc}; use str, int, "
                "float, bool, None, lists and dicts only",
            ) from exc

    def _call(
        self,
        run_id: str,
        kind: str,
        key: str,
        op: str,
        args: Mapping[str, Any],
        timeout: float = DEFAULT_CALL_TIMEOUT,
        idempotent: bool = False,
    ) -> dict[str, Any]:
        """Ask the resource actor (kind, key) of run `run_id` to do `op`. Returns its payload;
        raises ResourceError with a clear message on any failure. Never waits past `timeout`.
        Thread-safe."""
        self._check_open()
        call, data = self._make_call(run_id, kind, key, op, args, timeout, idempotent)
        assert self._contexts is not None
        ctx = self._contexts.get()
        flights = {call.call_id: Flight(call, data)}
        self._send(ctx, flights[call.call_id])
        got = self._await(ctx, set(flights), call.deadline, call.run_id, flights)
        if call.call_id not in got:
            raise self._deadline_error(call, timeout)
        reply = got[call.call_id][0]
        if isinstance(reply, ResourceError):
            raise reply
        if not reply.ok:
            raise ResourceError(reply.error, reply.message)
        return dict(reply.payload)

    def _send(self, ctx: Any, flight: Flight) -> None:
        """Send a call on its way: a shared kind's straight to its actor when the host knows
        it (else through the kind supervisor, which tells us the address for next time),
        a run kind's to the run's RunActor."""
        call = flight.call
        if not call.host_routed:
            remaining = max(call.deadline - time.monotonic(), 0.01)
            self._tell(ctx, self._run_address(call.run_id, remaining), flight.data)
            return
        route = self._routes.get(call.kind, call.key)
        if route is not None and route.incarnation > flight.after_incarnation:
            try:
                self._send_direct(ctx, flight, route)
                return
            except ChannelGone:  # it is going, and has not got the call: ask its supervisor
                self._routes.forget(call.kind, call.key, route.incarnation)
        flight.route = flight.incarnation = flight.channel = None
        route_msg = Route(flight.data, flight.after_incarnation)
        self._tell(ctx, self._kind_supervisors[call.kind], encode(route_msg))

    def _send_direct(self, ctx: Any, flight: Flight, route: DirectRoute) -> None:
        """Send to the actor itself: on this thread's call channel to it, or through thespian
        when the channel is busy. ChannelGone: the actor is stopping or gone, nothing sent."""
        flight.route, flight.incarnation = route, route.incarnation
        channel = self._channels.get(route.pid, route.create_time)
        if channel is not None and channel.send(
            flight.data, flight.call.deadline - time.monotonic()
        ):
            flight.channel = channel
        else:
            flight.channel = None
            self._tell(ctx, route.address, flight.data)

    def _actor_gone(
        self,
        ctx: Any,
        flights: dict[str, Flight],
        got: dict[str, tuple[Any, Any]],
        gone: Gone,
    ) -> None:
        """An actor serving (kind, key) went away: retry or fail every call open on it."""
        self._routes.forget(gone.kind, gone.key, gone.incarnation)
        for call_id, flight in flights.items():
            if call_id not in got and flight.serves(gone.kind, gone.key, gone.incarnation):
                self._retry_or_fail(ctx, flight, got, gone)

    def _retry_or_fail(
        self, ctx: Any, flight: Flight, got: dict[str, tuple[Any, Any]], gone: Gone
    ) -> None:
        what, code, message = call_outcome_when_gone(
            flight.call, flight.retried, gone.reason, gone.error, time.monotonic()
        )
        if what == "retry":
            flight.send_after(gone.incarnation, as_retry=True)
            self._send(ctx, flight)
        elif what == "error":
            got[flight.call.call_id] = (ResourceError(code, message), None)

    def _check_routes(
        self, ctx: Any, flights: dict[str, Flight], got: dict[str, tuple[Any, Any]]
    ) -> None:
        """While waiting: a call on an actor whose process is gone will never be answered;
        that incarnation is gone."""
        for call_id, flight in list(flights.items()):
            if call_id not in got and flight.route is not None and not flight.route.alive():
                self._process_gone(ctx, flight, flights, got)

    def _process_gone(
        self,
        ctx: Any,
        flight: Flight,
        flights: dict[str, Flight],
        got: dict[str, tuple[Any, Any]],
        how: str = "",
    ) -> None:
        """The actor process `flight` was sent to is gone: so is its incarnation."""
        route = flight.route
        assert route is not None  # (a call on a channel was sent to a known route)
        error = f"its actor process {route.pid} is gone{how}"
        gone = Gone(flight.call.kind, flight.call.key, route.incarnation, "crash", error)
        self._actor_gone(ctx, flights, got, gone)

    def _system_died(self) -> bool:
        return bool(self.admin_pid) and not same_process(self.admin_pid, self.admin_create_time)

    def _system_died_error(self, what: str) -> ResourceError:
        return ResourceError(
            ErrorCode.UNAVAILABLE,
            f"the actor system of this runtime died (admin pid {self.admin_pid} is gone), so "
            f"{what} cannot answer; shut this runtime down and start a new one",
        )

    def _run_died(self, run_id: str) -> ResourceError:
        with self._run_lock:
            self._run_addresses.pop(run_id, None)
            self._run_pids.pop(run_id, None)
        if self._system_died():
            return self._system_died_error(f"run {run_id!r}")
        return ResourceError(
            ErrorCode.RESOURCE_DIED,
            f"the actor of run {run_id!r} died while the call was in flight; it is restarted "
            "on the next call — call again",
        )

    def _deadline_error(self, call: Call, timeout: float) -> ResourceError:
        # if the RunActor itself died, its address is stale: look it up again next time
        if not call.host_routed:
            with self._run_lock:
                self._run_addresses.pop(call.run_id, None)
        if self._system_died():
            return self._system_died_error(f"{call.kind} {call.key!r}")
        return ResourceError(
            ErrorCode.DEADLINE,
            f"{call.kind} {call.key!r} did not answer {call.op!r} within {timeout:g} s; it may be "
            "stuck or overloaded — check rt.health(), or call again with a longer timeout",
        )

    def _gather(
        self,
        run_id: str,
        calls: Sequence[tuple[str, str, str, Mapping[str, Any]]],
        timeout: float = DEFAULT_CALL_TIMEOUT,
        idempotent: bool = False,
    ) -> list[dict[str, Any] | ResourceError]:
        """Send every (kind, key, op, args) at once and collect the answers, in order.
        A failed or late one is a ResourceError in its slot; the whole gather never waits
        past `timeout`."""
        self._check_open()
        prepared: list[tuple[Call, bytes] | ResourceError] = []
        for kind, key, op, args in calls:
            try:
                prepared.append(self._make_call(run_id, kind, key, op, args, timeout, idempotent))
            except ResourceError as exc:
                prepared.append(exc)
        assert self._contexts is not None
        ctx = self._contexts.get()
        deadline = time.monotonic() + timeout
        flights: dict[str, Flight] = {}
        for item in prepared:
            if isinstance(item, tuple):
                flight = flights[item[0].call_id] = Flight(*item)
                self._send(ctx, flight)
        got = self._await(ctx, set(flights), deadline, str(run_id), flights)
        results: list[dict[str, Any] | ResourceError] = []
        for item in prepared:
            if isinstance(item, ResourceError):
                results.append(item)
                continue
            call = item[0]
            if call.call_id not in got:
                results.append(self._deadline_error(call, timeout))
                continue
            reply = got[call.call_id][0]
            if isinstance(reply, ResourceError):
                results.append(reply)
                continue
            results.append(
                dict(reply.payload) if reply.ok else ResourceError(reply.error, reply.message)
            )
        return results

    # --- what is connected -----------------------------------------------------------
    def connected_kinds(self) -> set[str]:
        return set(self.kinds) if not self._closed else set()

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
        if spec.scope is not Scope.SHARED or self._closed:
            return []
        msg = ListKeys(self._next_id(), kind)
        reply, _ = self._ask(
            self._kind_supervisors[kind], msg, msg.call_id, timeout, f"list the keys of {kind!r}"
        )
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
        query = HealthQuery(self._next_id(), time.monotonic() + timeout * 0.9)
        assert self._contexts is not None
        ctx = self._contexts.get()
        self._tell(ctx, self._root, encode(query))
        got = self._await(ctx, {query.query_id}, time.monotonic() + timeout)
        if query.query_id not in got:
            raise ResourceError(
                ErrorCode.DEADLINE, f"the actor tree did not report its health within {timeout:g} s"
            )
        report = got[query.query_id][0]
        assert isinstance(report, HealthReport)
        node = dict(report.node)
        node["admin_port"] = self.admin_port
        node["pids"] = [process_info(self.admin_pid), *node.get("pids", [])]
        self._learn_pids(node)
        return node

    def _learn_pids(self, node: dict[str, Any]) -> None:
        for info in node.get("pids", []):
            if info.get("alive"):
                self._remember_pid(int(info["pid"]))
        for child in node.get("children", []):
            self._learn_pids(child)

    def inject(self, fault: str, target: str, timeout: float = 5.0, **args: Any) -> dict[str, Any]:
        """Inject a fault into the actor named `target` (as health() names it):
        kill_process (SIGKILL its OS process), crash_actor (SIGKILL the actor itself),
        delay(seconds=, count=1) (its next calls wait), drop_reply(count=1) (its next
        replies are lost)."""
        self._check_open()
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; faults: {', '.join(FAULTS)}")
        if fault == "delay" and "seconds" not in args:
            raise ValueError(
                "delay needs seconds=..., e.g. rt.inject('delay', target='echo:k', seconds=2.0)"
            )
        msg = Inject(self._next_id(), fault, target, dict(args))
        reply, _ = self._ask(
            self._root, msg, msg.call_id, timeout, f"inject {fault} into {target!r}"
        )
        if not reply.ok:
            raise ResourceError(reply.error, reply.message)
        return dict(reply.payload)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running"
        return f"Runtime(admin_port={self.admin_port}, kinds={sorted(self.kinds)}, {state})"


def _child_pids() -> set[int]:
    with contextlib.suppress(psutil.Error):
        return {c.pid for c in psutil.Process().children()}
    return set()


class _PortTaken(Exception):
    pass


_START_TOKEN = object()
