"""Booting an actor tree: the resource kinds, the actor system on a free port, the root's hello.

Thespian's multiprocTCPBase forks its admin (which daemonizes) from the booting thread,
and every actor from the admin, so what the tree inherits is set around that fork: the
runtime's token (so the next start's reaper can prove its processes were ours), its state
dir, its transport secret (tether.host.transport_auth), and none of the host's own
descriptors. A port picked free can be taken before the admin binds it, and an admin can
come up and never answer: the start cleans up what that boot made - found by this host's
own zombie children, never by port, which may belong to another actor system - and tries
another port, a few times.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from tether.capacity.measure import Budget, physical_memory, resolve_budget, tree_cgroup
from tether.capacity.policy import Settings
from tether.cgroups import Cgroup
from tether.host import thespian_patches, transport_auth
from tether.host.accounting import Admin
from tether.host.engine import CallEngine
from tether.host.portfile import pick_port, port_listening
from tether.kinds import KindSpec
from tether.messages.calls import Reply, Wire, WireValue
from tether.messages.control import Hello
from tether.private_dirs import STATE_DIR_ENV
from tether.processes import (
    TOKEN_ENV,
    children,
    host_fds_stay_home,
    kill_tree,
    name_forked_tree_processes,
    proc_create_time,
    processes_with_token,
    session_processes,
)

thespian_patches.apply()  # before any thespian transport or actor process exists
name_forked_tree_processes()  # so the next start's reaper can prove they were ours

from thespian.actors import ActorAddress, ActorSystem, InvalidActorAddress  # noqa: E402  (after the patches)

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

ROOT_NAME = "tether-root"
BOOT_LOCK = threading.Lock()  # one runtime start at a time per host process (see below)


class RuntimeStartError(RuntimeError):
    pass


class KindLoadError(RuntimeError):
    pass


class PortTaken(Exception):
    """The port picked was answered by another actor system: try another one."""


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


def capacity_settings(
    memory_budget: int | float | None, evict_idle_kernels_after: float | None
) -> tuple[Budget, Cgroup | None, Settings]:
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


def on_a_free_port(
    admin_port: int | None, boot: Callable[[int], None], abandon: Callable[[], None]
) -> None:
    """`boot(port)` on `admin_port`, or on a free port (a few tries); `abandon()` cleans up
    after a boot whose admin never answered."""
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
            # moment could leave the child wedged), and `abandon` tells our admins
            # from others' by the children this boot made
            with BOOT_LOCK:
                boot(port)
            return
        except PortTaken as exc:
            last_error = exc
        except InvalidActorAddress as exc:
            # thespian's admin never answered (it died, or another process took the
            # port first): clean up what this boot started, try another port
            abandon()
            last_error = exc
            if admin_port:
                raise RuntimeStartError(
                    f"the actor system's admin on port {port} did not come up ({exc}); "
                    "pick another port or omit admin_port to get a free one"
                ) from exc
    raise RuntimeStartError(f"could not start the actor system: {last_error}")


@contextlib.contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
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


def start_system(port: int, token: str, secret: bytes, state_dir: Path) -> ActorSystem:
    """Thespian's multiprocTCPBase with its admin on `port` (BOOT_LOCK held: no other start
    sees the variables set for the fork)."""
    # thespian forks its admin (which daemonizes) from here, and every actor from the
    # admin: they all inherit these variables: the token identifies them as ours, and the
    # state dir is the one this runtime was given (kernels keep their files in it,
    # tether.kernels.launch)
    tree_env = {TOKEN_ENV: token, STATE_DIR_ENV: str(state_dir)}
    thespian_patches.log_into(str(state_dir / "thespian.log"))  # (not the machine's /tmp)
    with environment(tree_env), transport_auth.using_secret(secret), host_fds_stay_home():
        # the tree forks with the secret, and without the host's descriptors
        return ActorSystem(
            "multiprocTCPBase", capabilities={"Admin Port": port}, transientUnique=True
        )


@dataclass(frozen=True)
class RootHello:
    """The root's answer to the host's hello: who runs the tree, and where its nodes are."""

    root: ActorAddress  # the root supervisor's
    payload: Wire
    addresses: dict[str, ActorAddress]


def greet_root(asys: ActorSystem, engine: CallEngine, call_id: str, timeout: float) -> RootHello:
    """Create the root supervisor and hand it the host and the kinds (a ResourceError if
    it does not answer within `timeout`)."""
    from tether.supervisors.tree import RootSupervisor

    root = asys.createActor(RootSupervisor, globalName=ROOT_NAME)
    me = psutil.Process()
    hello = Hello(
        call_id=call_id,
        host_pid=me.pid,
        host_create_time=me.create_time(),
        kinds=[k.to_wire() for k in engine.kinds.values()],
    )
    what = "start the tree"
    reply, addresses = engine.ask(root, hello, hello.call_id, timeout, what, expect=Reply)
    assert isinstance(addresses, dict)  # (the root sends its supervisors' addresses by name)
    return RootHello(root, dict(reply.payload), dict(addresses))


def admin_of(payload: Mapping[str, WireValue]) -> Admin:
    """The top of the tree, from the root's answer to the hello."""
    admin_pid = _pid(payload["admin_pid"])
    admin_sid = 0
    with contextlib.suppress(OSError):
        admin_sid = os.getsid(admin_pid)
    return Admin(admin_pid, proc_create_time(admin_pid), admin_sid, _pid(payload["pid"]))


def _pid(value: WireValue) -> int:
    if isinstance(value, int | float | str):  # (what int() takes; the root sends ints)
        return int(value)
    raise TypeError(f"not a pid: {value!r}")


def child_pids() -> set[int]:
    with contextlib.suppress(psutil.Error):
        return {c.pid for c in children(os.getpid())}
    return set()


def admin_sessions_started(children_before: set[int]) -> list[tuple[int, float]]:
    """The sessions of the admins a boot forked, as (sid, create time). Thespian starts its
    admin through a child of this process that calls setsid and is never reaped: the
    session id is the pid of a zombie child of ours that was not there before the boot
    (`children_before`; a zombie keeps its pid, so the id cannot have been reused)."""
    found = []
    with contextlib.suppress(psutil.Error):
        for child in children(os.getpid()):
            if child.pid in children_before:
                continue
            with contextlib.suppress(psutil.Error):
                if child.status() == psutil.STATUS_ZOMBIE:
                    found.append((child.pid, child.create_time()))
    return found


def abandon(asys: ActorSystem | None, children_before: set[int], token: str) -> None:
    """A start that failed half-way: stop and kill whatever this boot started, and nothing
    else (a listener on the port may belong to another actor system)."""
    stopper = threading.Thread(target=stop_system, args=(asys,), daemon=True)
    stopper.start()
    stopper.join(2.0)
    for sid, created in admin_sessions_started(children_before):
        for proc in session_processes(sid, created):
            with contextlib.suppress(Exception):
                kill_tree(proc.pid, grace=0.0, group=False)
    for proc in processes_with_token(token):
        with contextlib.suppress(Exception):
            kill_tree(proc.pid, grace=0.2, group=False)


def stop_system(asys: ActorSystem | None) -> None:
    if asys is None:
        return
    with contextlib.suppress(Exception):  # (a dead admin: thespian raises, or waits)
        asys.shutdown()
