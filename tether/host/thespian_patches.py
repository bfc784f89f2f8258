"""Every patch tether applies to thespian (4.0.1), in one place, applied by `apply()`.

Thespian forks its admin and actor processes from the process that starts the system (and
actors fork their children), so the patches must be in place before `ActorSystem(...)`:
`tether.runtime` calls `apply()` at import time, and every process of the tree inherits
them. Seven patches, each for a reason measured here:

1. Loopback only (security). Thespian's TCP transport pickles what it receives and, for
   every "external" address (the admin's, every actor's, and the host's own endpoint),
   binds the listening socket to `('', port)`, i.e. all interfaces: anyone who reaches the
   port could make it unpickle arbitrary objects, which is running code.
   `THESPIAN_BASE_IPADDR` does not help: it only sets the address that is advertised.
   Where it happens: `thespian/system/transport/IPBase.py`, `IPActorAddress.__init__`
   ends with `self.bindname = ('', sa[1]) if external else sa`, and `TCPTransport` binds
   `addressDetails.bindArgs`. We wrap `__init__` so that a bind name of `''` or
   `'0.0.0.0'` becomes `127.0.0.1`, and set `THESPIAN_BASE_IPADDR=127.0.0.1` so the
   advertised address is loopback too. tests/runtime/test_processes.py lists the listening
   sockets of every process of a running runtime (psutil).
2. A fresh frame-stack chunk per actor process (speed): see `_make_stack_trampoline`.
3. poll(2) instead of a new epoll per loop turn (speed): see `poll_instead_of_epoll`.
tests/runtime/test_loop_patches.py covers 2 and 3 by their effect in real actor processes.
4. Authenticated connections (security): loopback still lets every local user, and code
   the agent runs, connect and have a pickle unpickled. `authenticate_connections` makes
   every connection thespian opens or accepts a `tether.host.transport_auth.AuthSocket` (both
   ends prove they hold the runtime's secret before a frame is read), caps connections
   that never say hello, and `StrictReceiveBuffer` drops a connection whose length prefix
   is not a sane number (thespian 4.0.1 died on a negative one: `recv(-n)` raised out of
   its loop). tests/runtime/test_transport_auth.py sends pickles and fuzz to every port.
5. Process titles (operators): thespian titles each process it forks with setproctitle
   (`setProcName`: a class name and an address), which also renames the process and so
   erased the name that proves a tree process is the runtime's. `title_tree_processes`
   titles them `tether: admin`, `tether: logger` and (until its Start says what it is)
   the actor's class, keeping the name (`tether.processes.title_tree_process`).
6. Drain past timers (correctness): an actor that exits sends what it queued before (a
   reply, its parent's notice) in thespian's `drainTransmits`, which stops at the first
   falsy `transport.run(TransmitOnly, ...)`, meaning "no transmits left". But a timer
   that comes due meanwhile (every tether actor has one armed: its watchdog, 0.25 s) is
   returned by that run as its envelope, and envelopes are falsy: the drain ended there
   and the process exited with its transmits unsent. Measured (issue 23): an evicted
   language server's reply to the host, still connecting, was dropped in 2 of 20 runs
   under load, and the host read "no answer" as a refusal. `drain_past_timers` drops
   the timers' envelopes (an exiting actor handles no timer) and drains on, within
   thespian's own limit. tests/capacity/test_eviction_stop.py drains past a due timer.
7. Thespian's log in the runtime's state dir (the workspace rule): thespian appends its
   warnings (a corrupt frame, a send that failed) to `$TMPDIR/thespian.log` unless
   THESPLOG_FILE names a file - outside the workspace, shared by every runtime and user of
   the machine, and written whenever a peer sends junk. `log_into` points thespian's own
   module global at `<state dir>/thespian.log` in the process that starts the tree, which
   every tree process inherits at fork (an operator's THESPLOG_FILE still wins).
   tests/runtime/test_transport_auth.py has the admin log a frame that does not unpickle.
Not a patch, but an internal relied on: `tether.host.contexts.post` queues a host's message with
`systemBase._tx_to_actor` instead of `tell`, which waits on the receiver (checked by the guard;
tests/runtime/test_host_routes.py stops a supervisor mid-call).

The patches reach into thespian's internals, so `apply()` first checks the thespian it finds
(`tether.host.thespian_check`): an untested version, or one whose internals changed shape,
is refused with what to do.
"""

from __future__ import annotations

import errno
import os
import select
import selectors
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tether.host import transport_auth
from tether.host.thespian_check import check_thespian
from tether.processes import title_tree_process

if TYPE_CHECKING:  # (thespian publishes no types: mypy cannot check these)
    from thespian.actors import ActorAddress
    from thespian.system.actorManager import ActorManager
    from thespian.system.transport.TCPTransport import TCPTransport

LOOPBACK = "127.0.0.1"
_applied = False


def bind_loopback_only() -> None:
    """Idempotent. Patch thespian so every socket it listens on is bound to loopback."""
    global _applied
    if _applied:
        return
    os.environ["THESPIAN_BASE_IPADDR"] = LOOPBACK
    from thespian.system.transport import IPBase

    original_init = IPBase.IPActorAddress.__init__

    def loopback_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original_init(self, *args, **kwargs)
        if self.bindname and self.bindname[0] in ("", "0.0.0.0"):
            self.bindname = (LOOPBACK, self.bindname[1])

    loopback_init.__wrapped__ = original_init  # type: ignore[attr-defined]
    IPBase.IPActorAddress.__init__ = loopback_init
    _applied = True


R = TypeVar("R")


class _Trampoline(Protocol):
    def __call__(self, fn: Callable[..., R], /, *args: object) -> R: ...


def _make_stack_trampoline() -> _Trampoline:
    """`f(fn, *args)` calls fn(*args) from a frame of ~33 KiB.

    Thespian forks each actor from inside its parent's message loop, so an actor runs its
    loop at whatever Python stack depth its ancestry left it at. When a 16 KiB chunk of
    CPython's frame stack ends right inside the message path, every call that crosses it
    mmaps a fresh chunk and every return munmaps it: strace showed ~25 mmap/munmap pairs
    per message in a RunActor and an echo actor (none in bare thespian actors), and the
    routed call was ~2x slower for it. A frame larger than the chunk left never fits in
    it, so CPython gives it a fresh chunk (64 KiB for this size), and everything called
    from it runs in the ~31 KiB left there.
    """
    names = "=".join(f"_{i}" for i in range(4200))
    source = (
        f"def trampoline(fn, *args):\n    if 0:\n        {names} = None\n    return fn(*args)\n"
    )
    namespace: dict[str, Any] = {}  # (exec's globals: whatever the source defines)
    exec(compile(source, "<tether stack trampoline>", "exec"), namespace)  # noqa: S102
    trampoline: _Trampoline = namespace["trampoline"]
    return trampoline


_in_fresh_stack_chunk = _make_stack_trampoline()


def run_actors_in_fresh_stack_chunk() -> None:
    """Idempotent. Make thespian run the message loop of every actor process from a fresh
    frame-stack chunk (see `_make_stack_trampoline`).

    The chunk is taken once, when the actor process starts its loop (thespian's
    `ActorManager.run`), and kept until it ends: a trampoline per message instead cost one
    mmap/munmap pair and ~17 us per message. Thespian forks actor processes from the
    process that started the system and from their parent actors, so the patch must be
    applied before `ActorSystem(...)`; `tether.runtime` does it at import time. (Bare
    thespian actors in the same system, like the benchmark anchors, get the same one-time
    chunk; they did not thrash before and run as fast as without it.)
    """
    from thespian.system.actorManager import ActorManager

    original = ActorManager.run
    if getattr(original, "__wrapped__", None) is not None:
        return

    def run(self: ActorManager) -> None:
        _in_fresh_stack_chunk(original, self)  # (thespian's run returns nothing)

    run.__wrapped__ = original  # type: ignore[attr-defined]
    ActorManager.run = run


class _StrictPoll:
    """select.poll that fails like epoll on a closed descriptor: OSError(EBADF).

    epoll refuses a closed fd when it is registered, and thespian's loop relies on that to
    find and drop a bad ThespianWatch fd; poll would instead report it ready (POLLNVAL)
    on every turn."""

    def __init__(self) -> None:
        self._poll = select.poll()
        self.register = self._poll.register
        self.modify = self._poll.modify
        self.unregister = self._poll.unregister

    def poll(self, timeout: float | None = None) -> list[tuple[int, int]]:
        events = self._poll.poll(timeout)
        if any(event & select.POLLNVAL for _, event in events):
            raise OSError(errno.EBADF, "a polled file descriptor is closed")
        return events


class _PollSelector(selectors.PollSelector):
    _selector_cls = _StrictPoll  # type: ignore[assignment]


def poll_instead_of_epoll() -> None:
    """Idempotent. Make thespian's TCP transport wait with poll(2), not a new epoll.

    Every turn of thespian's transport loop (4.0.1, `TCPTransport._runWithExpiry`) builds
    a `selectors.DefaultSelector()` - an epoll on Linux - registers its few sockets and
    closes it again: epoll_create1 + one epoll_ctl per socket + close, i.e. 7-10 syscalls
    per turn and several turns per message in every process on the route (strace on a
    RunActor: 3318 epoll_create1, 16590 epoll_ctl and 3354 close for ~1000 routed calls).
    A poll selector registers in user space and waits with one poll(2) over the same
    handful of sockets. Same selectors API, same events, and a closed descriptor still
    raises EBADF (`_StrictPoll`). Applied before any actor process is forked
    (`tether.runtime` at import), so every process of the system uses it.
    """
    from thespian.system.transport import TCPTransport

    if getattr(TCPTransport.selectors, "DefaultSelector", None) is _PollSelector:
        return
    patched = types.SimpleNamespace(**vars(selectors))
    patched.DefaultSelector = _PollSelector
    TCPTransport.selectors = patched


THESPIAN_ROLES = {"MultiProcAdmin": "admin", "logger": "logger"}  # setProcName's names


def _title(name: str, address: ActorAddress | None) -> None:
    """thespian's `setProcName(name, address)`, titling the process by what it is."""
    title_tree_process(f"tether: {THESPIAN_ROLES.get(name, name)}")


def title_tree_processes() -> None:
    """Idempotent. Make thespian title the processes it forks `tether: admin`, `tether:
    logger`, or an actor's class until its Start (`TetherActor` titles it by kind and key
    then), keeping the process's name (see patch 5 above)."""
    from thespian.system import logdirector, multiprocCommon

    for module in (multiprocCommon, logdirector):
        if module.setProcName is not _title:
            module.setProcName = _title


MAX_FRAME = 1 << 30  # a length prefix claiming more is corrupt (from a peer with the secret)
MAX_PREFIX_DIGITS = 10


def length_prefix_problem(head: bytes) -> str:
    """Why the start of a thespian frame (`<decimal length>>` then the pickle) is corrupt,
    or "" while it is still plausible."""
    mark = head.find(b">")
    digits = head if mark < 0 else head[:mark]
    if len(digits) > MAX_PREFIX_DIGITS or (digits and not digits.isdigit()):
        return f"a frame must start with a decimal length and '>', got {head[:16]!r}"
    if mark == 0:
        return "a frame starts with '>', without a length"
    if mark > 0 and int(digits) > MAX_FRAME:
        return f"a frame claims {int(digits)} bytes, more than {MAX_FRAME}"
    return ""


def _strict_receive_buffer(base: type) -> type:
    class StrictReceiveBuffer(base):  # type: ignore[valid-type,misc]
        """thespian's ReceiveBuffer, refusing (ValueError: thespian drops the connection)
        a length prefix that is negative, not a number, too long or absurdly large."""

        def addMore(self, buf: bytes) -> None:  # noqa: N802 (thespian's name)
            if self._size is None:
                problem = length_prefix_problem(bytes(self._buf) + bytes(buf))
                if problem:
                    raise ValueError(problem)
            super().addMore(buf)

    return StrictReceiveBuffer


def authenticate_connections() -> None:
    """Idempotent. Every connection thespian's TCP transport opens or accepts proves the
    runtime's secret before a frame is read (tether.host.transport_auth), connections without
    a hello are capped, and frames with a corrupt length prefix drop their connection.

    Each transport authenticates with the secret current when it was made
    (`transport_auth.use_secret`); a private() context's transport (a clone) with its
    parent's. Thespian opens connections with `new_socket(socket.socket, ...)` and
    accepts them with `new_socket(self.socket.accept)`: both are wrapped there."""
    from thespian.system.transport import TCPTransport as module

    transport = module.TCPTransport
    if getattr(transport.new_socket, "__wrapped__", None) is not None:
        return
    init, new_socket = transport.__init__, transport.new_socket
    clone, accept_new = transport.external_transport_clone, transport._acceptNewIncoming
    AuthSocket = transport_auth.AuthSocket  # noqa: N806

    # (thespian's own arguments, passed through untouched: its API has no types)
    def auth_init(self: TCPTransport, *args: Any) -> None:
        self._tether_secret = transport_auth.current_secret()
        init(self, *args)

    def auth_new_socket(self: TCPTransport, op: Any, *args: Any, **kw: Any) -> Any:
        if op is module.socket.socket:
            return new_socket(self, AuthSocket.connector, self._tether_secret, *args, **kw)
        made = new_socket(self, op, *args, **kw)
        if getattr(op, "__self__", None) is self.socket:  # accept on the listening socket
            conn, peer = made
            return AuthSocket.acceptor(self._tether_secret, conn), peer
        return made

    def auth_clone(self: TCPTransport) -> TCPTransport:
        copy = clone(self)
        copy._tether_secret = self._tether_secret
        return copy

    def accept_capped(self: TCPTransport) -> None:
        accept_new(self)
        for fd in transport_auth.unproven_overflow(self._incomingSockets):
            self._incomingSockets.pop(fd).close()

    for name, patched, original in (
        ("__init__", auth_init, init),
        ("external_transport_clone", auth_clone, clone),
        ("_acceptNewIncoming", accept_capped, accept_new),
        ("new_socket", auth_new_socket, new_socket),  # last: it marks the patch as applied
    ):
        patched.__wrapped__ = original  # type: ignore[union-attr]
        setattr(transport, name, patched)
    module.ReceiveBuffer = _strict_receive_buffer(module.ReceiveBuffer)


def drain_past_timers() -> None:
    """Idempotent. Make an exiting thespian process send all it queued (see patch 6): as
    thespian's `drainTransmits`, except that a timer's envelope returned by the transport
    is dropped instead of ending the drain. Same limit (MAX_SHUTDOWN_DRAIN_PERIOD)."""
    from thespian.system import systemCommon
    from thespian.system.timing import ExpirationTimer, unexpired
    from thespian.system.transport import ReceiveEnvelope, TransmitOnly

    base = systemCommon.systemCommonBase
    original = base.drainTransmits
    if getattr(original, "__wrapped__", None) is not None:
        return

    def drain(self: Any) -> None:
        limit = ExpirationTimer(systemCommon.MAX_SHUTDOWN_DRAIN_PERIOD)
        for left in unexpired(limit):
            ran = self.transport.run(TransmitOnly, left.remaining())
            if isinstance(ran, ReceiveEnvelope):
                continue  # a timer came due (dropped: an exiting actor handles none)
            if not ran:
                break  # no transmits left (0), or the transport ended

    drain.__wrapped__ = original  # type: ignore[attr-defined]
    base.drainTransmits = drain


def log_into(path: str) -> None:
    """Thespian's own log goes to `path` (see patch 7), unless the operator named one
    (THESPLOG_FILE). Call in the process that starts the tree, before it forks."""
    if os.environ.get("THESPLOG_FILE"):
        return
    from thespian.system import utilis

    utilis._thesplog_file = path
    utilis._thesplog_old_file = path + ".old"


def apply() -> None:
    """Idempotent. Apply every patch; call before any thespian transport or actor exists.
    Raises ThespianPatchError (see `check_thespian`) instead of patching an untested thespian."""
    check_thespian()
    bind_loopback_only()
    run_actors_in_fresh_stack_chunk()
    poll_instead_of_epoll()
    authenticate_connections()
    title_tree_processes()
    drain_past_timers()
