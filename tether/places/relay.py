"""A relay inside a place: Unix sockets bound into it, relayed to loopback TCP ports inside.

Deno's Jupyter kernel and `dlv dap` listen on loopback TCP only, and a sandbox's loopback
is its own (its network namespace): the host cannot reach those ports, and opening the
host's loopback to the place is what a sandbox must never do. So the command runs under
this relay, in the place:

    python -I -S relay.py SOCKET=PORT [SOCKET=PORT...] -- COMMAND...

It binds each SOCKET (a Unix socket path in a directory bound read-write into the place:
the kernel's or the adapter's own 0700 directory), runs COMMAND as its child, and for
each connection accepted on SOCKET opens 127.0.0.1:PORT inside and copies bytes both
ways. The host connects to SOCKET. It ends with COMMAND, with its status.

What it does not do: look at the bytes. Jupyter messages stay HMAC-signed end to end
(the key is in the connection file only), and ZMTP over a Unix socket is the same as over
TCP, so the host's client connects with transport `ipc` to the same port numbers. Who can
connect: whoever can reach SOCKET, that is the runtime's own uid through the 0700
directory on the host, and the place itself (which could open the TCP port directly
anyway): no other place has the directory bound, and no other user can enter it.

A connection accepted before the port listens (the kernel is still starting) is closed at
once; the client's own reconnect timer (zmq's) tries again. Standard library only, run
by path with -S: it starts in a few ms and needs nothing of the place but an interpreter.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence

CHUNK = 65536
TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", 0)


def argv(
    python: str, pairs: Sequence[tuple[str, int]], command: Sequence[str], script: str = __file__
) -> list[str]:
    """The command line that runs `command` under the relay: `python` and `script` (this
    file, or a copy) must be there inside the place (the runtime's interpreter is)."""
    return [python, "-I", "-S", script, *(f"{p}={port}" for p, port in pairs), "--", *command]


def main(args: list[str]) -> None:
    if "--" not in args:
        sys.exit("usage: relay.py SOCKET=PORT [SOCKET=PORT...] -- COMMAND...")
    split = args.index("--")
    pairs = [_pair(a) for a in args[:split]]
    command = args[split + 1 :]
    for path, port in pairs:
        listener = socket.socket(socket.AF_UNIX)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(16)
        threading.Thread(target=_serve, args=(listener, port), daemon=True).start()
    child = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: child.send_signal(n))
    code = child.wait()
    for path, _ in pairs:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if code < 0:  # killed by a signal: end the same way (bwrap reports 128 + N)
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def _pair(arg: str) -> tuple[str, int]:
    path, sep, port = arg.rpartition("=")
    if not sep or not path or not port.isdigit():
        sys.exit(f"relay: {arg!r} is not SOCKET=PORT (a Unix socket path and a TCP port)")
    return path, int(port)


def _serve(listener: socket.socket, port: int) -> None:
    while True:
        conn, _ = listener.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", port))
        except OSError:
            conn.close()  # (not listening yet: the client reconnects)
            continue
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_link, args=(conn, upstream), daemon=True).start()


def _link(conn: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until both ends are done (a half-close passed on), then close."""
    peer = {conn: upstream, upstream: conn}
    with selectors.DefaultSelector() as selector:
        for sock in peer:
            selector.register(sock, selectors.EVENT_READ, sock)
        reading = set(peer)
        while reading:
            for key, _ in selector.select():
                source: socket.socket = key.data
                if not _copy(source, peer[source]):
                    selector.unregister(source)
                    reading.discard(source)
                    with contextlib.suppress(OSError):
                        peer[source].shutdown(socket.SHUT_WR)
    conn.close()
    upstream.close()


def _copy(source: socket.socket, sink: socket.socket) -> bool:
    """One read from `source` to `sink`; False once `source` has ended (or either broke)."""
    try:
        data = source.recv(CHUNK)
        if data and source.family != socket.AF_UNIX and TCP_QUICKACK:
            # the kernel's side writes without TCP_NODELAY: ACK at once, or its next
            # message waits for our delayed ACK (40 ms; see tether.kernels.wire)
            source.setsockopt(socket.IPPROTO_TCP, TCP_QUICKACK, 1)
        sink.sendall(data)
    except OSError:
        return False
    return bool(data)


if __name__ == "__main__":
    main(sys.argv[1:])
