"""Authenticated connections for thespian's TCP transport: no byte from a process without
the runtime's secret is ever unpickled.

Why: thespian (multiprocTCPBase) has the admin and every actor listen on a TCP port and
unpickle every frame that arrives, from anyone who connects; loopback binding does not
stop another local user, nor code the agent runs. Measured before this module: a pickle
sent by user `nobody` to the admin port ran as the runtime's user, and a 6-byte frame with
a negative length prefix killed the admin and the whole tree.

The protocol, per TCP connection, both directions (`AuthSocket`):
- The connecting side's first bytes are a hello: MAGIC, "C", a fresh 16-byte nonce, and
  HMAC-SHA256(secret, MAGIC "C" nonce).
- The accepting side reads exactly that many bytes before anything else and checks the
  MAC (constant time). A bad or missing hello closes the connection: nothing past the
  hello is read, so nothing is buffered, parsed or unpickled for that peer.
- The accepting side's first bytes (before its first ACK) are its own hello, bound to the
  connector's nonce: MAGIC, "A", its nonce, HMAC(secret, MAGIC "A" connector-nonce
  nonce). The connector checks it before reading any frame, so a process that took over
  a dead actor's port cannot feed pickles to the tree either.
- After both hellos, frames flow as thespian sends them: the cost is one HMAC and 53
  bytes each way per connection, and thespian keeps its connections open (measured: no
  change on the call paths, see benchmarks/routing.py).
Connections that have not sent a valid hello are capped (`MAX_UNPROVEN` per process,
older than `HELLO_DEADLINE` s first): a flood of idle connections costs a process at most
that many descriptors. Frames from proven peers are still checked for sane length
prefixes (tether.host.thespian_patches.StrictReceiveBuffer): a malformed frame drops its
connection only.

The secret: 32 random bytes made by the host at `Runtime.start` (`new_secret`) and set as
this process's current secret (`use_secret`) just before thespian forks the admin.
Thespian forks the admin from the host and every actor from its parent actor (fork, no
exec), so the whole tree inherits it in memory; it is never put in an environment
variable, so the programs actors exec (language servers, kernels, shells) do not get it.
Each transport keeps the secret it was made with, so one host process can run several
runtimes, each with its own. A process that never set one gets a random one: a bare
thespian system still works within its own tree, and nothing outside it can talk to it.

Clients outside the tree (`tether status`) read the secret from the runtime's port file
(tether.host.portfile): mode 0600 in a 0700 directory owned by the user, both checked before
reading. That keeps it from other users. It does not keep it from processes of the same
user, but nothing can: the same user may ptrace the runtime or read /proc/<pid>/mem, so
the boundary against code the agent runs is another uid (or a sandbox), not a file mode.

Several machines in one thespian convention: give every member the same secret (one per
convention, e.g. from the orchestrator that starts them, over a channel it trusts) and
call `use_secret(secret)` before its `ActorSystem(...)`; the hellos work unchanged
between machines, as do the length checks. Two limits to know on a network (neither
applies on loopback, where reading another process's traffic takes root): the link is
not encrypted, and a connector's hello seen on the wire could be replayed to open a
connection. Run the convention over a private or encrypted network (WireGuard, an SSH
tunnel), or wrap `AuthSocket` in TLS with the secret as a pre-shared key - this module is
the one place to do it. (tether.host.thespian_patches also binds every socket to loopback;
scale-out must relax that to the member's interface.)
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer
    from thespian.system.transport.TCPTransport import TCPIncoming_Common  # (no published types)

MAGIC = b"TTH1"
NONCE_SIZE = 16
MAC_SIZE = 32
HELLO_SIZE = len(MAGIC) + 1 + NONCE_SIZE + MAC_SIZE
SECRET_SIZE = 32
HELLO_DEADLINE = 5.0  # s a connection may stay open without a valid hello once others queue
MAX_UNPROVEN = 64  # connections per process still waiting for a hello; more drop the oldest

_current: bytes | None = None


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_SIZE)


def use_secret(secret: bytes) -> None:
    """Make `secret` the one the thespian transports this process creates from now on
    (and the processes it forks) authenticate with."""
    global _current
    if not isinstance(secret, bytes) or len(secret) < 16:
        raise ValueError("a transport secret is at least 16 random bytes (see new_secret())")
    _current = secret


_lock = threading.Lock()
os.register_at_fork(after_in_child=lambda: globals().update(_lock=threading.Lock()))


@contextmanager
def using_secret(secret: bytes) -> Iterator[None]:
    """`use_secret(secret)` for the block (one block at a time per process), then the
    previous one again: for the thespian system made (and the processes forked) inside."""
    global _current
    with _lock:
        previous = _current
        use_secret(secret)
        try:
            yield
        finally:
            _current = previous


def current_secret() -> bytes:
    """This process's secret; a random one if none was set (see the module docstring)."""
    global _current
    if _current is None:
        _current = new_secret()
    return _current


def _mac(secret: bytes, *parts: bytes) -> bytes:
    return hmac.digest(secret, b"".join(parts), hashlib.sha256)


def connector_hello(secret: bytes, nonce: bytes) -> bytes:
    return MAGIC + b"C" + nonce + _mac(secret, MAGIC, b"C", nonce)


def acceptor_hello(secret: bytes, their_nonce: bytes, nonce: bytes) -> bytes:
    return MAGIC + b"A" + nonce + _mac(secret, MAGIC, b"A", their_nonce, nonce)


def _refused(why: str) -> ConnectionResetError:
    # ECONNRESET: thespian closes the connection and, on its sending side, retries later
    return ConnectionResetError(errno.ECONNRESET, f"tether transport: {why}")


class AuthSocket(socket.socket):
    """A thespian connection that proves both ends hold the secret before any frame.

    Only `send`, `sendall` and `recv` differ from a socket (thespian moves bytes with
    send and recv only; tether.host.thespian_patches checks that): the first send is prefixed
    with this end's hello, and the first recv reads and checks the peer's hello."""

    __slots__ = ("_secret", "_connector", "_nonce", "_peer_nonce", "_out", "_in", "proven", "born")

    def _setup(self, secret: bytes, connector: bool) -> None:
        self._secret = secret
        self._connector = connector
        self._nonce = secrets.token_bytes(NONCE_SIZE)
        self._peer_nonce = b""
        self._out = connector_hello(secret, self._nonce) if connector else b""
        self._in = b""
        self.proven = False  # the peer's hello checked out
        self.born = time.monotonic()

    @classmethod
    def connector(cls, secret: bytes, *args: int) -> AuthSocket:
        """A new socket (socket.socket(*args)) for a connection this process opens."""
        sock = cls(*args)
        sock._setup(secret, connector=True)
        return sock

    @classmethod
    def acceptor(cls, secret: bytes, accepted: socket.socket) -> AuthSocket:
        """Take over a connection `accept()` returned."""
        sock = cls(accepted.family, accepted.type, accepted.proto, fileno=accepted.detach())
        sock._setup(secret, connector=False)
        return sock

    def send(self, data: ReadableBuffer, flags: int = 0) -> int:
        if not self._out:
            if not self.proven and not self._connector:
                raise _refused("refusing to send before the peer proved it holds the secret")
            return socket.socket.send(self, data, flags)
        pending = self._out
        sent = socket.socket.send(self, pending + bytes(data), flags)
        if sent < len(pending):
            self._out = pending[sent:]
            return 0
        self._out = b""
        return sent - len(pending)

    def sendall(self, data: ReadableBuffer, flags: int = 0) -> None:
        """(Not used by thespian; for clients and tests.) All of `data`, after the hello."""
        if not self._out and not self.proven and not self._connector:
            raise _refused("refusing to send before the peer proved it holds the secret")
        pending, self._out = self._out, b""
        socket.socket.sendall(self, pending + bytes(data), flags)

    def recv(self, size: int, flags: int = 0) -> bytes:
        if self.proven:
            return socket.socket.recv(self, size, flags)
        return self._recv_hello_then(size, flags)

    def _recv_hello_then(self, size: int, flags: int) -> bytes:
        chunk = socket.socket.recv(self, HELLO_SIZE - len(self._in))
        if not chunk:
            return b""  # closed before its hello: thespian drops the connection
        self._in += chunk
        if len(self._in) < HELLO_SIZE:
            raise BlockingIOError(errno.EAGAIN, "the peer's hello is not complete yet")
        self._check_hello(self._in)
        self._in = b""
        self.proven = True
        return socket.socket.recv(self, size, flags)

    def _check_hello(self, hello: bytes) -> None:
        role = b"A" if self._connector else b"C"
        head, nonce = hello[: len(MAGIC) + 1], hello[len(MAGIC) + 1 : -MAC_SIZE]
        if head != MAGIC + role:
            raise _refused("the peer did not open with a tether hello")
        if self._connector:
            expected = acceptor_hello(self._secret, self._nonce, nonce)
        else:
            expected = connector_hello(self._secret, nonce)
        if not hmac.compare_digest(hello, expected):
            raise _refused("the peer's hello does not carry this runtime's secret")
        if not self._connector:
            self._out = acceptor_hello(self._secret, nonce, self._nonce)


def unproven_overflow(
    incoming: Mapping[int, TCPIncoming_Common], now: float | None = None
) -> list[int]:
    """The keys of `incoming` (fd -> thespian incoming connection, with `.socket`) to drop:
    connections still without a valid hello past HELLO_DEADLINE, then the oldest beyond
    MAX_UNPROVEN."""
    now = time.monotonic() if now is None else now
    waiting = sorted(
        (sock.born, fd)
        for fd, conn in incoming.items()
        if isinstance(sock := getattr(conn, "socket", None), AuthSocket) and not sock.proven
    )
    stale = [fd for born, fd in waiting if now - born > HELLO_DEADLINE]
    fresh = [fd for born, fd in waiting if now - born <= HELLO_DEADLINE]
    return stale + fresh[: max(len(fresh) - MAX_UNPROVEN, 0)]


def secret_from_hex(text: object) -> bytes:
    """The secret a port file holds, or ValueError saying what is wrong with it."""
    if not isinstance(text, str):
        raise ValueError("the port file holds no transport secret")
    try:
        secret = bytes.fromhex(text)
    except ValueError as exc:
        raise ValueError(f"the port file's transport secret is not hex ({exc})") from exc
    if len(secret) < 16:
        raise ValueError("the port file's transport secret is too short")
    return secret
