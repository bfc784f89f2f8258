"""The guard on the thespian that `tether.host.thespian_patches` patches: its version, and
the shape of every internal a patch relies on.

The patches reach into thespian's internals, so `apply()` first checks the thespian it finds
(`check_thespian`): a version not in `TESTED_THESPIAN` is refused, and so is one where an
internal a patch relies on is gone or changed shape, with a message that says what was found
and what to do. Refusing at import is better than a patch that silently stops working: the
loopback patch is a security boundary. To try another version, set
TETHER_ALLOW_UNTESTED_THESPIAN=1 (the shape checks still run), run the tests each patch
names (`tether.host.thespian_patches`), and add the version to `TESTED_THESPIAN`.

`shape_problems` reads the unpatched originals (the functions' code names, the classes'
attributes) patch by patch, numbered as in `tether.host.thespian_patches`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import socket
import types
from datetime import timedelta

TESTED_THESPIAN = ("4.0.1",)  # the versions these patches were verified on (setup.cfg pins)
ALLOW_UNTESTED_ENV = "TETHER_ALLOW_UNTESTED_THESPIAN"


class ThespianPatchError(RuntimeError):
    """The installed thespian is not one these patches were tested on, or an internal a
    patch relies on is gone or changed shape."""


def thespian_version() -> str:
    try:
        return importlib.metadata.version("thespian")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (no package metadata)"


def _refusal(found: str, problem: str) -> str:
    return (
        f"tether cannot patch thespian {found}: {problem}. tether patches thespian's internals "
        f"(tether/host/thespian_patches.py) and was tested on thespian {', '.join(TESTED_THESPIAN)} "
        f"only. Install a tested version (pip install 'thespian=={TESTED_THESPIAN[-1]}'), or "
        f"re-verify the patches on {found}: run tests/runtime/test_loop_patches.py and "
        f"tests/runtime/test_processes.py with {ALLOW_UNTESTED_ENV}=1, then add {found!r} to "
        f"TESTED_THESPIAN."
    )


def _names(fn: object) -> frozenset[str]:
    """The global and attribute names the (unwrapped) function's code refers to."""
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    return frozenset(code.co_names) if code is not None else frozenset()


def shape_problems() -> list[str]:
    """What no longer looks like the thespian internals each patch was written against
    (empty when all is as expected). Checked on the unpatched originals."""
    modules = {}
    for name in (
        "thespian.system.actorManager",
        "thespian.system.multiprocCommon",
        "thespian.system.logdirector",
        "thespian.system.transport.IPBase",
        "thespian.system.transport.TCPTransport",
        "thespian.system.systemBase",
        "thespian.actors",
    ):
        try:
            modules[name] = importlib.import_module(name)
        except ImportError as exc:
            return [f"module {name} does not import ({exc})"]
    actorManager = modules["thespian.system.actorManager"]
    multiprocCommon = modules["thespian.system.multiprocCommon"]
    IPBase = modules["thespian.system.transport.IPBase"]
    TCPTransport = modules["thespian.system.transport.TCPTransport"]

    problems = []
    # 1. loopback: IPActorAddress.__init__ sets `bindname`, bindArgs binds it, the transport
    #    binds bindArgs
    address = getattr(IPBase, "IPActorAddress", None)
    bind_args = getattr(address, "bindArgs", None)
    if address is None:
        problems.append("thespian.system.transport.IPBase.IPActorAddress is gone")
    elif "bindname" not in _names(address.__init__):
        problems.append("IPBase.IPActorAddress.__init__ no longer sets `bindname`")
    elif not isinstance(bind_args, property) or "bindname" not in _names(bind_args.fget):
        problems.append("IPBase.IPActorAddress.bindArgs no longer returns `bindname`")
    transport = getattr(TCPTransport, "TCPTransport", None)
    if transport is None or "bindArgs" not in _names(transport.__init__):
        problems.append("TCPTransport.TCPTransport.__init__ no longer binds `bindArgs`")
    # 2. stack chunk: actor processes run ActorManager.run(self), inherited unchanged
    run = getattr(getattr(actorManager, "ActorManager", None), "run", None)
    manager = getattr(multiprocCommon, "MultiProcManager", None)
    if run is None or getattr(getattr(run, "__wrapped__", run), "__code__", None) is None:
        problems.append("thespian.system.actorManager.ActorManager.run is gone")
    elif getattr(run, "__wrapped__", run).__code__.co_argcount != 1:
        problems.append("ActorManager.run no longer takes only `self`")
    elif manager is None or manager.run is not run:
        problems.append(
            "actor processes no longer run ActorManager.run "
            "(multiprocCommon.MultiProcManager is gone or overrides it)"
        )
    elif "run" not in _names(getattr(multiprocCommon, "startChild", None)):
        problems.append("multiprocCommon.startChild no longer calls `run`")
    # 3. poll: the transport loop builds `selectors.DefaultSelector()` from its module global
    loop = getattr(transport, "_runWithExpiry", None)
    if not hasattr(getattr(TCPTransport, "selectors", None), "DefaultSelector"):
        problems.append("thespian.system.transport.TCPTransport no longer imports `selectors`")
    elif loop is None or not {"selectors", "DefaultSelector"} <= _names(loop):
        problems.append(
            "TCPTransport._runWithExpiry no longer waits with selectors.DefaultSelector()"
        )
    # 4. contexts.post: a private() context wraps a systemBase that queues a transmit with
    #    `_tx_to_actor` (no wait) and drives it in `listen`
    system_base = getattr(modules["thespian.system.systemBase"], "systemBase", None)
    external = getattr(modules["thespian.actors"], "ExternalContext", None)
    if system_base is None or not hasattr(system_base, "_tx_to_actor"):
        problems.append("thespian.system.systemBase.systemBase._tx_to_actor is gone")
    elif "_tx_to_actor" not in _names(system_base.tell):
        problems.append("systemBase.tell no longer sends with `_tx_to_actor`")
    elif external is None or "_systemBase" not in _names(external.__init__):
        problems.append("thespian.actors.ExternalContext no longer wraps `_systemBase`")
    problems.extend(_auth_shape_problems(TCPTransport))
    problems.extend(_drain_shape_problems())
    problems.extend(_log_shape_problems())
    # 5. titles: the admin, every actor and the logger are titled by `setProcName`, a
    #    global of the module that starts them
    logdirector = modules["thespian.system.logdirector"]
    for module, starter in (
        (multiprocCommon, "startAdmin"),
        (multiprocCommon, "startChild"),
        (logdirector, "startupASLogger"),
    ):
        if not callable(getattr(module, "setProcName", None)):
            problems.append(f"{module.__name__}.setProcName is gone")
        elif "setProcName" not in _names(getattr(module, starter, None)):
            problems.append(f"{module.__name__}.{starter} no longer calls `setProcName`")
    return problems


# socket methods that move bytes without going through AuthSocket.send/recv
_UNCHECKED_IO = frozenset(
    {"sendall", "sendmsg", "sendto", "recv_into", "recvmsg", "recvfrom", "makefile"}
)


def _auth_shape_problems(module: types.ModuleType) -> list[str]:
    """5. authenticated connections: every connection comes from `new_socket` (opened with
    `socket.socket`, or `accept` of the listening socket), bytes move with send/recv
    only, and frames are parsed by the module's `ReceiveBuffer`."""
    transport = getattr(module, "TCPTransport", None)
    problems = []
    for name, needs in (
        ("new_socket", set()),
        ("external_transport_clone", set()),
        ("_acceptNewIncoming", {"new_socket", "accept", "_incomingSockets"}),
        ("_next_XMIT_1", {"new_socket"}),
    ):
        fn = getattr(transport, name, None)
        if fn is None or not needs <= _names(fn):
            problems.append(f"TCPTransport.{name} is gone or no longer uses {sorted(needs)}")
    if getattr(module, "socket", None) is not socket:
        problems.append("TCPTransport no longer uses the socket module as `socket`")
    for name, fn in vars(transport or object).items():
        unchecked = _UNCHECKED_IO & _names(getattr(fn, "__func__", fn))
        if unchecked:
            problems.append(f"TCPTransport.{name} moves bytes with {sorted(unchecked)}")
    buffer = getattr(module, "ReceiveBuffer", None)
    add_more = getattr(buffer, "addMore", None)
    if add_more is None or not {"_size", "_buf"} <= _names(add_more):
        problems.append("TCPTransport.ReceiveBuffer.addMore no longer parses `_size` from `_buf`")
    return problems


def _log_shape_problems() -> list[str]:
    """7. the log: `thesplog` appends to the module global `_thesplog_file` (computed from
    THESPLOG_FILE or $TMPDIR on first use only when it is unset)."""
    from thespian.system import utilis

    if not hasattr(utilis, "_thesplog_file") or "_thesplog_file" not in _names(
        getattr(utilis, "thesplog", None)
    ):
        return ["thespian.system.utilis.thesplog no longer writes to `_thesplog_file`"]
    return []


def _drain_shape_problems() -> list[str]:
    """6. drain past timers: exiting actors drain with `systemCommonBase.drainTransmits`
    (run(TransmitOnly) until it is falsy, within MAX_SHUTDOWN_DRAIN_PERIOD), and a timer
    due meanwhile comes back from that run as a (falsy) ReceiveEnvelope."""
    from thespian.system import systemCommon
    from thespian.system.transport import wakeupTransportBase

    problems = []
    base = getattr(systemCommon, "systemCommonBase", None)
    drain = getattr(base, "drainTransmits", None)
    needs = {"run", "TransmitOnly", "MAX_SHUTDOWN_DRAIN_PERIOD"}
    if drain is None or not needs <= _names(drain):
        problems.append(
            f"systemCommonBase.drainTransmits is gone or no longer uses {sorted(needs)}"
        )
    if not isinstance(getattr(systemCommon, "MAX_SHUTDOWN_DRAIN_PERIOD", None), timedelta):
        problems.append("systemCommon.MAX_SHUTDOWN_DRAIN_PERIOD is no longer a timedelta")
    deliver = getattr(
        getattr(wakeupTransportBase, "wakeupTransportBase", None), "_deliver_wakeups", None
    )
    if deliver is None or not {"TransmitOnly", "_activeWakeups"} <= _names(deliver):
        problems.append(
            "wakeupTransportBase._deliver_wakeups no longer hands due timers to a TransmitOnly run"
        )
    return problems


def check_thespian(version: str | None = None) -> None:
    """Refuse (ThespianPatchError) a thespian the patches were not tested on, or whose
    internals no longer look as the patches expect. `version`: what to check instead of the
    installed one (tests)."""
    found = thespian_version() if version is None else version
    if found not in TESTED_THESPIAN and os.environ.get(ALLOW_UNTESTED_ENV) != "1":
        raise ThespianPatchError(_refusal(found, "that version was never tested"))
    problems = shape_problems()
    if problems:
        raise ThespianPatchError(_refusal(found, "; ".join(problems)))
