"""Call channels: a shared actor's calls and replies on a Unix socket, beside thespian.

Why: a call's bytes crossing thespian's TCP transport cost ~0.23 ms each way on this
machine (pickled envelope, header and body read apart, an ACK back), and ~0.55 ms when the
receiver slept through a 25 ms language-server request; tether's own work at either end
is 0.01-0.04 ms. A call channel carries the same encoded `Call` and `Reply` as a
length-prefixed frame on a Unix stream socket: one write, one read, no ACK.

Thespian still does everything else: starting, supervising and stopping actors, the first
call for a (kind, key) (through its supervisor, which tells the host the actor's pid),
health, faults, and every RUN-scoped call. A host that cannot use a channel sends the
call through thespian as before.

- The actor listens on an abstract-namespace address named by the host's pid and its own
  (`address`), so the host needs no message to find it, and nothing is left on disk.
- Both ends check who is on the other side (SO_PEERCRED): the actor accepts only the host
  process that started the runtime, the host talks only to the actor process its route
  names. Frames are decoded by the msgpack codec, never unpickled.
- The host keeps one connection per (calling thread, actor), so a thread reads only its
  own replies. A reply to a call that thread gave up on is read and dropped by its next
  wait, as with thespian.
- The actor never blocks on a slow host: what the socket does not take is kept in an
  `OutBuffer` and flushed on a timer.
- An actor process that dies closes its end: the host's wait sees end-of-file at once.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import threading
import weakref

from tether.processes import same_process

HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 30  # a frame claiming more is corrupt: the connection is dropped
RECV_CHUNK = 262144
BACKLOG = 64  # host threads connecting while the actor is busy; more are sent via thespian
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def address(host_pid: int, actor_pid: int) -> str:
    """The abstract Unix address of the call channel of actor `actor_pid` of host `host_pid`."""
    return f"\0tether-calls-{host_pid}-{actor_pid}"


def frame(data: bytes) -> bytes:
    return HEADER.pack(len(data)) + data


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process at the other end of a connected Unix socket (as the kernel
    recorded it at connect or listen time)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    return int(_PEERCRED.unpack(creds)[0])


class FrameReader:
    """Splits a byte stream into frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The frames `data` completes. Raises ValueError on a corrupt length."""
        self._buffer += data
        frames = []
        while len(self._buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buffer)
            if size > MAX_FRAME:
                raise ValueError(f"a call-channel frame claims {size} bytes")
            end = HEADER.size + size
            if len(self._buffer) < end:
                break
            frames.append(bytes(self._buffer[HEADER.size : end]))
            del self._buffer[:end]
        return frames


class OutBuffer:
    """Non-blocking writes to a pipe or socket: what the descriptor does not take now is
    kept, in order, for the next `flush()`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._pending = bytearray()
        self.broken = False  # the reader is gone; what is written is dropped

    def write(self, data: bytes) -> bool:
        """Queue `data` and write what fits. True when nothing is left waiting."""
        if not self.broken:
            self._pending += data
        return self.flush()

    def close(self) -> None:
        """The descriptor is closed (its number may be reused): drop what is pending and
        whatever is written from now on."""
        self.broken = True
        self._pending.clear()

    def flush(self) -> bool:
        while self._pending and not self.broken:
            try:
                written = os.write(self.fd, self._pending)
            except BlockingIOError:
                return False
            except OSError:  # the other end is gone; its going is noticed elsewhere
                self.broken = True
                self._pending.clear()
                return True
            del self._pending[:written]
        return True


# --- actor side ----------------------------------------------------------------------


class ChannelPeer:
    """The actor's end of one host connection: where the replies to its calls go."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = FrameReader()
        self.out = OutBuffer(sock.fileno())

    def send(self, data: bytes) -> bool:
        """Send one frame (never blocks). True when it is all written."""
        return self.out.write(frame(data))

    def close(self) -> None:
        self.out.close()
        with contextlib.suppress(OSError):
            self.sock.close()


class ChannelListener:
    """The actor's listening socket and the host connections it accepted. The actor
    watches `fds()` with ThespianWatch and hands ready ones to `read()`."""

    def __init__(self, host_pid: int) -> None:
        self.host_pid = host_pid
        self.sock: socket.socket | None = None
        self.peers: dict[int, ChannelPeer] = {}
        self.refused = 0  # connections from a process other than the host

    def open(self) -> str:
        """Listen; returns "" or why not (the host then keeps calling through thespian)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(address(self.host_pid, os.getpid()))
            sock.listen(BACKLOG)
        except OSError as exc:
            sock.close()
            return f"no call channel ({exc}); calls go through thespian"
        sock.setblocking(False)
        self.sock = sock
        return ""

    def fds(self) -> list[int]:
        if self.sock is None:
            return []
        return [self.sock.fileno(), *self.peers]

    def read(self, ready: list[int]) -> list[tuple[ChannelPeer, bytes]]:
        """Accept and read what is ready; returns (peer, frame) for each frame received."""
        frames: list[tuple[ChannelPeer, bytes]] = []
        if self.sock is not None and self.sock.fileno() in ready:
            self._accept()
        for fd in ready:
            peer = self.peers.get(fd)
            if peer is not None:
                frames.extend((peer, data) for data in self._receive(peer))
        return frames

    def flush(self) -> bool:
        """Write what peers still hold. True when nothing is left."""
        return all([peer.out.flush() for peer in self.peers.values()])  # (every one: a list)

    def close(self) -> None:
        for peer in self.peers.values():
            with contextlib.suppress(OSError):
                peer.out.flush()
            peer.close()
        self.peers.clear()
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None

    def _accept(self) -> None:
        assert self.sock is not None
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # none waiting (or it went already)
                return
            if peer_pid(conn) != self.host_pid:
                self.refused += 1
                conn.close()
                continue
            conn.setblocking(False)
            self.peers[conn.fileno()] = ChannelPeer(conn)

    def _receive(self, peer: ChannelPeer) -> list[bytes]:
        frames: list[bytes] = []
        while True:
            try:
                data = peer.sock.recv(RECV_CHUNK)
            except (BlockingIOError, InterruptedError):
                return frames
            except OSError:
                data = b""
            try:
                frames.extend(peer.reader.feed(data) if data else ())
            except ValueError:
                data = b""  # corrupt: drop this connection
            if not data:
                self.peers.pop(peer.sock.fileno(), None)
                peer.close()
                return frames
            if len(data) < RECV_CHUNK:
                return frames


# --- host side -----------------------------------------------------------------------


class ChannelGone(Exception):
    """The actor a route names does not take calls on its channel: it is stopping or gone.
    Nothing was delivered; the caller routes the call through the supervisor."""


class HostChannel:
    """The host's connection to one actor's call channel, used by one thread."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid
        self.reader = FrameReader()
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, data: bytes, timeout: float) -> bool:
        """Send one frame, waiting at most `timeout` for room. False if there was no room
        in time (the caller sends through thespian instead); ChannelGone if the actor closed
        its end (it is stopping or dead: the frame did not reach it)."""
        try:
            self.sock.settimeout(max(timeout, 0.001))
            self.sock.sendall(frame(data))
            return True
        except (BrokenPipeError, ConnectionResetError) as exc:
            self.close()
            raise ChannelGone(f"actor process {self.pid} closed its call channel") from exc
        except OSError:
            self.close()  # (part of a frame may have gone: the stream is not reusable)
            return False

    def receive(self) -> list[bytes] | None:
        """Read what is there (after poll said readable). None: the actor closed its end."""
        try:
            self.sock.settimeout(0)
            data = self.sock.recv(RECV_CHUNK)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            data = b""
        if not data:
            self.close()
            return None
        try:
            return self.reader.feed(data)
        except ValueError:
            self.close()
            return None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self.sock.close()


class HostChannels:
    """Each calling thread's connections, by actor process. A thread's channels to actor
    processes that are gone are closed when it next connects, those of threads that ended
    when any thread next connects, and all of them at shutdown."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[tuple[weakref.ref[threading.Thread], HostChannel]] = []

    def get(self, pid: int, create_time: float) -> HostChannel | None:
        """This thread's channel to actor process `pid` (connected now if need be); None if
        the actor is too busy to take a connection now. ChannelGone if nobody, or another
        process than `pid`, listens at its address: the actor is stopping or gone (a
        started actor listens from before its pid is known, see ResourceActor._start)."""
        mine: dict[tuple[int, float], HostChannel] = self._local.__dict__.setdefault("by", {})
        channel = mine.get((pid, create_time))
        if channel is not None and not channel.closed:
            return channel
        channel = self._connect(pid)
        if channel is None:
            return None
        for (old_pid, created), old in list(mine.items()):
            if old.closed or not same_process(old_pid, created):
                old.close()
                del mine[(old_pid, created)]
        mine[(pid, create_time)] = channel
        with self._lock:
            kept = []
            for ref, each in self._all:
                thread = ref()
                if thread is None or not thread.is_alive():
                    each.close()  # (nobody else uses a channel: its thread ended)
                elif not each.closed:
                    kept.append((ref, each))
            self._all = [*kept, (weakref.ref(threading.current_thread()), channel)]
        return channel

    def _connect(self, pid: int) -> HostChannel | None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)  # an actor busy with a long op and a full backlog: use thespian
        try:
            sock.connect(address(os.getpid(), pid))
        except (BlockingIOError, InterruptedError):
            sock.close()
            return None
        except OSError as exc:
            sock.close()
            raise ChannelGone(f"actor process {pid} has no call channel ({exc})") from exc
        if peer_pid(sock) != pid:
            sock.close()
            raise ChannelGone(f"the call channel address of {pid} is held by another process")
        return HostChannel(sock, pid)

    def close_all(self) -> None:
        with self._lock:
            for _, channel in self._all:
                channel.close()
            self._all = []
        self._local = threading.local()

    def __len__(self) -> int:
        with self._lock:
            return sum(not c.closed for _, c in self._all)


def wait_readable(channels: list[HostChannel], timeout: float) -> list[HostChannel]:
    """Those of `channels` with something to read (or closed by the actor) within `timeout`."""
    poller = select.poll()
    by_fd = {}
    for channel in channels:
        if not channel.closed:
            poller.register(channel.fileno(), select.POLLIN)
            by_fd[channel.fileno()] = channel
    if not by_fd:
        return []
    try:
        events = poller.poll(max(timeout, 0.0) * 1000.0)
    except InterruptedError:
        return []
    return [by_fd[fd] for fd, _ in events if fd in by_fd]


__all__ = [
    "ChannelGone",
    "ChannelListener",
    "ChannelPeer",
    "FrameReader",
    "HostChannel",
    "HostChannels",
    "OutBuffer",
    "address",
    "frame",
    "peer_pid",
    "wait_readable",
]
