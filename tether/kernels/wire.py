"""`KernelWire`: the Jupyter wire protocol to one kernel, driven from its actor's loop.

The sockets (shell, stdin, control, iopub; HMAC-signed by jupyter_client's `Session`) are
used from the actor's thread only, never blocking: the actor watches their `zmq.FD`s with
ThespianWatch (`fds()`), and calls `drain()` when one is ready. A zmq FD is edge-like: it
signals that zmq has news, not that a message waits, and a send can consume that news.
So every drain and every send reads each socket's EVENTS and takes whatever waits; what a
send took is kept and announced by a byte on a pipe that is among `fds()`, so the actor
comes back for it in its next turn. No thread of ours, no hop between threads.

Over TCP (Deno's kernel), the kernel's side does not set TCP_NODELAY: a message written
while the previous one is not yet acknowledged waits in its send buffer (Nagle) until our
ACK comes, and Linux delays that ACK by 40 ms once a connection looks interactive (its
"pingpong" mode: we sent right after we received), as on a fresh connection after the
ZMTP handshake. Measured on Deno 2.9, a spare handed over: ready after 46-57 ms without
this, 10-30 ms with it (the kernel_info reply written 4 ms after connect, read 45 ms
later). So the wire keeps its TCP connections out of that mode (TCP_QUICKACK whenever it
sends or drains, on the connections' fds that zmq's monitor reports): our ACKs go out at
once and nothing waits for them. ipc (ipykernel) has no such thing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
from datetime import datetime
from typing import NotRequired, TypedDict

import zmq
from jupyter_client.session import Session
from zmq.utils.monitor import recv_monitor_message

from tether.json_types import JSONObject, JSONValue

CHANNELS = ("shell", "stdin", "control", "iopub")
TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", 0)  # (Linux only; 0: not available)
_LIBC = ctypes.CDLL(None, use_errno=True)
_ONE = ctypes.c_int(1)


class KernelMessage(TypedDict):
    """The parts of a received Jupyter message that tether reads (jupyter_client's
    `Session.recv` parses the headers' dates into datetimes). The wire's own "stdin_ready"
    news has no content."""

    msg_type: str
    parent_header: dict[str, JSONValue | datetime]
    content: NotRequired[JSONObject]


class _MonitorEvent(TypedDict):  # (what tether reads of zmq's monitor message)
    event: int
    value: int


def quickack(fd: int) -> None:
    """Leave the connection's delayed-ACK mode and send a pending ACK now. On zmq's own fd
    (not a Python socket object, which would close it when collected); a failure (the fd
    already closed by zmq, or no longer TCP) changes nothing and is ignored."""
    _LIBC.setsockopt(fd, socket.IPPROTO_TCP, TCP_QUICKACK, ctypes.byref(_ONE), 4)


def _endpoint(connection: JSONObject, channel: str) -> str:
    transport, ip = connection["transport"], connection["ip"]
    port = connection[f"{channel}_port"]
    return f"{transport}://{ip}-{port}" if transport == "ipc" else f"{transport}://{ip}:{port}"


class KernelWire:
    def __init__(self, connection: JSONObject, name: str = "kernel") -> None:
        self.session = Session(
            key=str(connection.get("key", "")).encode(),
            signature_scheme=str(connection.get("signature_scheme", "hmac-sha256")),
        )
        self.error = ""
        self._inbox: list[tuple[str, KernelMessage]] = []
        self._stash_r, self._stash_w = os.pipe()
        os.set_blocking(self._stash_r, False)
        os.set_blocking(self._stash_w, False)
        self._context: zmq.SyncContext = zmq.Context(io_threads=1)
        self._sockets: dict[str, zmq.SyncSocket] = {}
        self._monitors: dict[str, zmq.SyncSocket] = {}
        self._tcp_fds: dict[str, int] = {}  # channel -> its connection's fd (TCP only)
        tcp = connection["transport"] == "tcp" and TCP_QUICKACK > 0
        for channel in CHANNELS:
            sock = self._context.socket(zmq.SUB if channel == "iopub" else zmq.DEALER)
            sock.linger = 0
            if channel == "iopub":
                sock.setsockopt(zmq.SUBSCRIBE, b"")
            else:  # the kernel sends stdin requests to the shell's identity
                sock.setsockopt(zmq.IDENTITY, self.session.bsession)
            events = zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED if tcp else 0
            if channel == "stdin":
                # the kernel's ROUTER drops an input_request to a client whose stdin
                # connection is not up yet (its raw_input then waits forever): the kernel is
                # ready only once this handshake is seen (`stdin_ready`)
                events |= zmq.EVENT_HANDSHAKE_SUCCEEDED
            if events:
                self._monitors[channel] = sock.get_monitor_socket(events)
            sock.connect(_endpoint(connection, channel))
            self._sockets[channel] = sock
        self.stdin_ready = False
        watched = [*self._sockets.values(), *self._monitors.values()]
        self._fds = [int(s.getsockopt(zmq.FD)) for s in watched]

    def fds(self) -> list[int]:
        """Watch these; when one is ready, call drain()."""
        return [*self._fds, self._stash_r]

    def send(self, channel: str, msg_type: str, content: JSONObject) -> str:
        """Send a request on `channel`; returns its msg_id (replies carry it as parent)."""
        msg = self.session.msg(msg_type, content)
        self.session.send(self._sockets[channel], msg)
        if self._collect():  # (the send may have swallowed the FD's news of them)
            with contextlib.suppress(BlockingIOError, OSError):
                os.write(self._stash_w, b"x")
        return str(msg["header"]["msg_id"])

    def drain(self) -> list[tuple[str, KernelMessage]]:
        """Every (channel, message) that arrived since the last drain, in order per channel."""
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._stash_r, 4096):
                pass
        self._collect()
        out, self._inbox = self._inbox, []
        return out

    def _collect(self) -> bool:
        for channel, monitor in self._monitors.items():
            while int(monitor.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
                try:
                    self._monitor_event(channel, recv_monitor_message(monitor, zmq.NOBLOCK))
                except zmq.Again:
                    break
        self._quickack()
        for channel, sock in self._sockets.items():
            while int(sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
                try:
                    _, msg = self.session.recv(sock, mode=zmq.NOBLOCK)
                except ValueError as exc:  # a bad signature: not from our kernel
                    self.error = f"dropped a message on {channel}: {exc}"
                    continue
                except zmq.Again:
                    break
                if msg is None:
                    break
                parts = KernelMessage(
                    msg_type=msg["msg_type"],
                    parent_header=msg["parent_header"],
                    content=msg["content"],
                )
                self._inbox.append((channel, parts))
        return bool(self._inbox)

    def _monitor_event(self, channel: str, event: _MonitorEvent) -> None:
        kind = event["event"]
        if kind == zmq.EVENT_CONNECTED:
            self._tcp_fds[channel] = int(event["value"])
        elif kind == zmq.EVENT_DISCONNECTED:
            self._tcp_fds.pop(channel, None)
        elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED and not self.stdin_ready:
            self.stdin_ready = True
            self._inbox.append(("wire", {"msg_type": "stdin_ready", "parent_header": {}}))

    def _quickack(self) -> None:
        for fd in self._tcp_fds.values():
            quickack(fd)

    def close(self) -> None:
        for monitor in self._monitors.values():
            monitor.close(linger=0)
        for sock in self._sockets.values():
            sock.close(linger=0)
        self._context.term()
        for fd in (self._stash_r, self._stash_w):
            with contextlib.suppress(OSError):
                os.close(fd)
