"""`KernelWire`: the Jupyter wire protocol to one kernel, on a thread of its own.

An actor's message loop must never block, and zmq sockets belong to one thread. So the
sockets (shell, stdin, control, iopub; HMAC-signed by jupyter_client's `Session`) live on
this thread, which polls them together with a wake pipe: `send` queues a message and wakes
it; what arrives is queued and announced by one byte on `fileno()`, a pipe the actor
watches with ThespianWatch, so the actor runs `drain()` in its own loop, never waiting.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import threading
from typing import Any

import zmq
from jupyter_client.session import Session

CHANNELS = ("shell", "stdin", "control", "iopub")


def _endpoint(connection: dict[str, Any], channel: str) -> str:
    transport, ip = connection["transport"], connection["ip"]
    port = connection[f"{channel}_port"]
    return f"{transport}://{ip}-{port}" if transport == "ipc" else f"{transport}://{ip}:{port}"


def _unremarkable(channel: str, msg: dict[str, Any]) -> bool:
    """Messages the actor need not be woken for (they wait for the next one that matters):
    a cell's echo of its code, and "busy"."""
    if channel != "iopub":
        return False
    kind = msg.get("msg_type")
    return kind == "execute_input" or (
        kind == "status" and msg.get("content", {}).get("execution_state") == "busy"
    )


class KernelWire:
    def __init__(self, connection: dict[str, Any], name: str = "kernel") -> None:
        key = connection.get("key", "")
        self.session = Session(
            key=key.encode() if isinstance(key, str) else key,
            signature_scheme=connection.get("signature_scheme", "hmac-sha256"),
        )
        self._connection = connection
        self._outbox: queue.SimpleQueue[tuple[str, dict[str, Any]] | None] = queue.SimpleQueue()
        self._inbox: collections.deque[tuple[str, dict[str, Any]]] = collections.deque()
        self._notify_r, self._notify_w = os.pipe()
        self._wake_r, self._wake_w = os.pipe()
        for fd in (self._notify_r, self._notify_w, self._wake_r, self._wake_w):
            os.set_blocking(fd, False)
        self.error = ""
        self._thread = threading.Thread(target=self._run, name=f"tether-{name}-wire", daemon=True)
        self._thread.start()

    # --- the actor's side --------------------------------------------------------------
    def fileno(self) -> int:
        """Readable when messages arrived: watch it, then call drain()."""
        return self._notify_r

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        """Queue a request on `channel`; returns its msg_id (replies carry it as parent)."""
        msg = self.session.msg(msg_type, content)
        self._outbox.put((channel, msg))
        self._poke(self._wake_w)
        return str(msg["header"]["msg_id"])

    def drain(self) -> list[tuple[str, dict[str, Any]]]:
        """Every (channel, message) that arrived since the last drain, in order per channel."""
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._notify_r, 4096):
                pass
        out = []
        while self._inbox:
            out.append(self._inbox.popleft())
        return out

    def close(self) -> None:
        self._outbox.put(None)
        self._poke(self._wake_w)
        self._thread.join(timeout=1.0)
        for fd in (self._notify_r, self._notify_w, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # --- the wire thread ---------------------------------------------------------------
    @staticmethod
    def _poke(fd: int) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(fd, b"x")

    def _sockets(self, context: zmq.Context[Any]) -> dict[str, zmq.Socket[Any]]:
        sockets: dict[str, zmq.Socket[Any]] = {}
        for channel in CHANNELS:
            sock = context.socket(zmq.SUB if channel == "iopub" else zmq.DEALER)
            sock.linger = 0
            if channel == "iopub":
                sock.setsockopt(zmq.SUBSCRIBE, b"")
            else:  # the kernel sends stdin requests to the shell's identity
                sock.setsockopt(zmq.IDENTITY, self.session.bsession)
            sock.connect(_endpoint(self._connection, channel))
            sockets[channel] = sock
        return sockets

    def _run(self) -> None:
        context: zmq.Context[Any] = zmq.Context()
        try:
            sockets = self._sockets(context)
            by_socket = {sock: name for name, sock in sockets.items()}
            poller = zmq.Poller()
            for sock in sockets.values():
                poller.register(sock, zmq.POLLIN)
            poller.register(self._wake_r, zmq.POLLIN)
            while self._send_queued(sockets):
                got = False
                for item, _ in poller.poll():
                    if item == self._wake_r:
                        with contextlib.suppress(BlockingIOError, OSError):
                            os.read(self._wake_r, 4096)
                    else:
                        got = self._receive(item, by_socket[item]) or got
                if got:
                    self._poke(self._notify_w)
        except Exception as exc:  # the actor sees the kernel as silent, and says why
            self.error = f"{type(exc).__name__}: {exc}"
            self._poke(self._notify_w)
        finally:
            context.destroy(linger=0)

    def _send_queued(self, sockets: dict[str, zmq.Socket[Any]]) -> bool:
        while True:
            try:
                item = self._outbox.get_nowait()
            except queue.Empty:
                return True
            if item is None:
                return False
            channel, msg = item
            self.session.send(sockets[channel], msg)

    def _receive(self, sock: zmq.Socket[Any], channel: str) -> bool:
        got = False
        while True:
            try:
                _, msg = self.session.recv(sock, mode=zmq.NOBLOCK)
            except ValueError as exc:  # a bad signature: not from our kernel
                self.error = f"dropped a message on {channel}: {exc}"
                continue
            if msg is None:
                return got
            self._inbox.append((channel, msg))
            got = got or not _unremarkable(channel, msg)
