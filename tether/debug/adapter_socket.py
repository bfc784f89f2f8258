"""A debug adapter reached over a socket: delve says on stdout which port it listens on
(`dlv dap`), and an attach may join a DAP server already listening (debugpy --listen,
dlv --headless).

A part of `tether.actors.debug_session.DebugSessionActor`: it holds the launch that waits
for the port, reads the listen line out of the adapter's first stdout (or the deadline
passes: `ListenDeadline`), connects (loopback only; a sandboxed delve through the relay's
Unix socket, its loopback being the sandbox's own) and reads the socket without blocking.
What the bytes mean stays with the actor and its session.
"""

from __future__ import annotations

import contextlib
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from tether.debug import adapters
from tether.debug.adapters import AdapterRow
from tether.debug.driver import DebugError, Op
from tether.messages.calls import Call, ErrorCode
from tether.scratch import ProcessScratch

LISTEN_LINE = re.compile(rb"listening at:?\s*\[?([0-9.:a-fA-F]+?)\]?:(\d+)\s*$", re.M)
SOCKET_CHUNK = 65536


@dataclass(frozen=True)
class ListenDeadline:
    """Timer tag: the adapter had its startup time to say which port it listens on."""


def no_listen_line(row: AdapterRow | None, stderr: str) -> str:
    """What a launch whose adapter never said its port is told."""
    tail = stderr.strip()[-300:]
    return (
        f"{row.name if row else 'the adapter'} did not say which port it "
        f"listens on within {row.startup_timeout if row else 0:g} s"
        + (f" (stderr: {tail})" if tail else "")
    )


class AdapterSocket:
    """The socket to a DAP server, and the listen line that names its port."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.relay = ""  # delve in a sandbox: the relay's Unix socket to its port
        self.waiting: tuple[Op, Call] | None = None  # (launch op, call) until delve listens
        self._listen_buf = b""

    def wait_for_port(self, launch: Op, call: Call) -> None:
        self._listen_buf = b""
        self.waiting = (launch, call)

    def take_waiting(self) -> tuple[Op, Call] | None:
        """The launch that waited for the port, no longer waiting."""
        waiting, self.waiting = self.waiting, None
        return waiting

    def relayed_argv(
        self, row: AdapterRow, binary: str, scratch: ProcessScratch | None
    ) -> list[str]:
        """The argv that starts the adapter behind a relay in the sandbox; its Unix socket
        (in the adapter's scratch dir) is what `connect` then joins."""
        assert scratch is not None  # (made for this adapter just before: adapter_env)
        try:
            argv, self.relay = adapters.relayed_argv(row, binary, Path(scratch.base))
        except ValueError as e:
            raise DebugError(ErrorCode.UNAVAILABLE, str(e)) from e
        return argv

    def listen_line(self, data: bytes) -> tuple[str, int, bytes] | None:
        """Once the adapter's stdout so far says where it listens: (host, port, what
        followed the line)."""
        self._listen_buf += data
        m = LISTEN_LINE.search(self._listen_buf)
        if not m:
            return None
        return m.group(1).decode(), int(m.group(2)), self._listen_buf[m.end() :].lstrip(b"\r\n")

    def connect(self, host: str, port: int) -> socket.socket:
        """Connect (loopback only) and keep the socket, non-blocking."""
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise DebugError(ErrorCode.FAILED, f"the adapter listens on {host}, not on loopback")
        if self.relay:  # (delve in a sandbox: its loopback is the sandbox's own)
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(2.0)
            sock.connect(self.relay)
        else:
            sock = socket.create_connection((host, port), timeout=2.0)
        sock.setblocking(False)
        self.sock = sock
        return sock

    def recv(self, sock: socket.socket) -> bytes | None:
        """What the socket has: None when nothing yet, b"" when it closed (or broke)."""
        try:
            return sock.recv(SOCKET_CHUNK)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None
