"""No process outside the runtime's tree can make a runtime process decode anything
(tether.host.transport_auth): pickles from another user or from a process without the secret,
sent to the admin and to every actor port, never run; malformed frames and floods of idle
connections drop their connections only."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import pickle
import random
import socket
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import runtime_processes, wait_until
from tether.host import transport_auth
from tether.host.thespian_patches import MAX_FRAME, length_prefix_problem

NOBODY = 65534

# Connects to each port, sends one frame, and reports what came back before the runtime
# closed the connection: "" (closed, nothing said) or the bytes in hex, or "open" if it
# stayed open. Standard library only: it also runs as user nobody.
SENDER = textwrap.dedent(
    """
    import json, socket, sys
    frame = bytes.fromhex(sys.argv[1])
    answers = {}
    for port in map(int, sys.argv[2:]):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        got = b""
        try:
            sock.sendall(frame)
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:  # already reset by the other end
                pass
            while chunk := sock.recv(4096):
                got += chunk
            answers[port] = got.hex()
        except (ConnectionResetError, BrokenPipeError):
            answers[port] = got.hex()
        except socket.timeout:
            answers[port] = "open"
        finally:
            sock.close()
    print(json.dumps(answers))
    """
)


class _Marker:
    """Unpickling this opens (creates) a file: running code, as a real exploit would."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (open, (str(self.path), "w"))


def thespian_frame(obj: Any) -> bytes:
    """A frame as thespian's TCP transport sends it: decimal length, '>', the pickle."""
    payload = pickle.dumps(obj)
    return b"%d>" % len(payload) + payload


def listening_ports(proc: psutil.Process) -> set[int]:
    try:
        conns = proc.net_connections(kind="inet")
    except psutil.NoSuchProcess:
        return set()
    return {c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN}


def tree_ports(rt: Any) -> list[int]:
    """Every TCP port a process of the runtime (the admin, every actor) listens on. The
    host's own endpoint is left out (the tree inherits its listening socket at fork but
    only the host serves it): test_the_host_endpoint_refuses_a_pickle_too covers it."""
    ports: set[int] = set()
    for proc in runtime_processes(rt):
        ports |= listening_ports(proc)
    return sorted(ports - listening_ports(psutil.Process()))


def busy_runtime(rt: Any) -> list[int]:
    """Start a shared actor, a process-owning one and a run-scoped one; their ports."""
    rt.call("r1", "echo", "k", "echo", {}, 10)
    rt.call("r1", "echo_process", "k", "echo", {}, 10)
    rt.call("r1", "echo_run", "k", "echo", {}, 10)
    ports = tree_ports(rt)
    assert rt.admin_port in ports and len(ports) >= 6  # admin, root, supervisors, actors
    return ports


def send_from_process(frame: bytes, ports: list[int]) -> dict:
    """SENDER in a new python process of this user, which never had the secret."""
    result = subprocess.run(
        [sys.executable, "-c", SENDER, frame.hex(), *map(str, ports)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return {int(k): v for k, v in json.loads(result.stdout).items()}


def send_as_user(frame: bytes, ports: list[int], uid: int) -> dict:
    """SENDER's work in a child forked from here that became user `uid` first."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            assert os.getuid() == uid and os.geteuid() == uid
            sys.argv = ["sender", frame.hex(), *map(str, ports)]
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(SENDER, {"__name__": "sender"})  # noqa: S102 - our own script
            os.write(write_end, out.getvalue().encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as src:
        data = src.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and data, "the sender failed as that user"
    return {int(k): v for k, v in json.loads(data).items()}


def assert_healthy(rt: Any, pids_before: set[int]) -> None:
    health = rt.health()
    assert health["state"] == "ready"
    assert rt.call("r1", "echo", "k", "echo", {"x": 1}, 10)["echo"] == {"x": 1}
    assert rt.call("r1", "echo_run", "k", "echo", {}, 10)["key"] == "k"
    assert pids_before <= {p.pid for p in runtime_processes(rt)}  # nothing died


@pytest.mark.parametrize("who", ["nobody", "same user without the secret"])
def test_a_pickle_sent_to_any_port_of_the_tree_never_runs(runtime, tmp_path, who) -> None:
    if who == "nobody" and os.getuid() != 0:
        pytest.skip("sending as user nobody needs the tests to run as root")
    ports = busy_runtime(runtime)
    pids = {p.pid for p in runtime_processes(runtime)}
    marker = tmp_path / "pwned"
    frame = thespian_frame(_Marker(marker))
    answers = (
        send_as_user(frame, ports, NOBODY) if who == "nobody" else send_from_process(frame, ports)
    )
    # every port closed the connection without a byte back: not even an ACK or a
    # "bad data" ACK, which thespian sends once it has tried to unpickle
    assert answers == {port: "" for port in ports}
    assert not marker.exists()
    assert_healthy(runtime, pids)
    assert not marker.exists()


def test_the_same_pickle_from_a_peer_with_the_secret_does_run(runtime, tmp_path) -> None:
    # the control for the test above: the payload is live, and the hello is all that
    # stands in its way (the runtime's own tree holds the secret and is trusted)
    marker = tmp_path / "ran"
    with authenticated(runtime, runtime.admin_port) as sock:
        sock.sendall(thespian_frame(_Marker(marker)))
        read_until_closed(sock)
    wait_until(marker.exists, timeout=5.0)


def test_the_host_endpoint_refuses_a_pickle_too(runtime, tmp_path) -> None:
    # the host listens as well (its per-thread contexts); thespian reads it while a call
    # waits on that context, so the sender runs beside calls from this thread - each to a
    # new run, whose route the host must learn on the context (a call on a known route
    # goes on a call channel and leaves the context unread: the sender then saw "open")
    runtime.call("r1", "echo", "k", "echo", {}, 10)
    runs = itertools.count(2)
    ctx = runtime.engine.contexts.get()
    port = ctx._systemBase.transport.myAddress.addressDetails.connectArgs[0][1]
    marker = tmp_path / "pwned"
    frame = thespian_frame(_Marker(marker))
    sender = subprocess.Popen(
        [sys.executable, "-c", SENDER, frame.hex(), str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        wait_until(
            lambda: (
                runtime.call(f"r{next(runs)}", "echo_run", "k", "echo", {}, 10)
                and sender.poll() is not None
            ),
            timeout=30.0,
        )
        assert json.loads(sender.stdout.read()) == {str(port): ""}
    finally:
        sender.kill()
        sender.wait()
    assert not marker.exists()


def test_a_negative_length_frame_kills_nothing(runtime) -> None:
    # thespian 4.0.1 died on it (recv(-n) raised out of its loop), taking the tree along.
    # Sent without the secret it is dropped at the hello; sent by a peer that holds the
    # secret it is dropped by the length check: both are tried.
    ports = busy_runtime(runtime)
    pids = {p.pid for p in runtime_processes(runtime)}
    assert send_from_process(b"-5>abc", ports) == {port: "" for port in ports}
    for port in ports:
        with authenticated(runtime, port) as sock:
            sock.sendall(b"-5>abc")
            assert read_until_closed(sock) == b""
    assert_healthy(runtime, pids)


def test_thespian_logs_into_the_runtime_state_dir_not_the_machines_tmp(runtime) -> None:
    # thespian writes its warnings (here: a frame that does not unpickle, from a peer with
    # the secret) to $TMPDIR/thespian.log unless told otherwise: a file outside the
    # workspace that every runtime and user of the machine shares
    import tempfile

    with authenticated(runtime, runtime.admin_port) as sock:
        sock.sendall(b"5>abcde")
        read_until_closed(sock)
    ours = runtime.state_dir / "thespian.log"
    mark = f" p{runtime.admin_pid} "
    wait_until(lambda: ours.exists() and mark in ours.read_text(), timeout=10.0)
    shared = Path(tempfile.gettempdir()) / "thespian.log"
    assert not shared.exists() or mark not in shared.read_text(errors="replace")


def test_a_fuzz_of_frames_and_a_flood_of_idle_connections_leave_the_runtime_healthy(
    runtime,
) -> None:
    ports = busy_runtime(runtime)
    pids = {p.pid for p in runtime_processes(runtime)}
    rng = random.Random(1234)
    frames = fuzz_frames(rng)
    for port in ports:
        for frame in rng.sample(frames, 12):
            with authenticated(runtime, port) as sock:  # past the hello: the frame parser
                send_and_end(sock, frame)  # a truncated frame ends here
                read_until_closed(sock)
        for frame in rng.sample(frames, 12):  # no hello: dropped unread
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                send_and_end(sock, frame)
                read_until_closed(sock)
    # idle connections, more than a process keeps: the oldest are dropped, calls go on
    flood = []
    try:
        for port in [runtime.admin_port, *ports[:3]] * 60:
            flood.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        assert_healthy(runtime, pids)
        admin = psutil.Process(runtime.admin_pid)
        wait_until(lambda: open_connections(admin) <= transport_auth.MAX_UNPROVEN + 16)
    finally:
        for sock in flood:
            sock.close()
    assert_healthy(runtime, pids)


def test_length_prefixes_a_proven_peer_may_send() -> None:
    assert length_prefix_problem(b"12") == ""  # not complete yet: fine
    assert length_prefix_problem(b"12>abc") == ""
    assert "decimal length" in length_prefix_problem(b"-5>abc")
    assert "decimal length" in length_prefix_problem(b"\x80\x04abc")
    assert "decimal length" in length_prefix_problem(b"1" * 11)
    assert "without a length" in length_prefix_problem(b">abc")
    assert "more than" in length_prefix_problem(b"%d>" % (MAX_FRAME + 1))


def test_a_hello_made_with_another_secret_is_refused(runtime) -> None:
    def answer(secret: bytes) -> bytes:
        sock = transport_auth.AuthSocket.connector(secret, socket.AF_INET, socket.SOCK_STREAM)
        with sock:
            sock.settimeout(5)
            sock.connect(("127.0.0.1", runtime.admin_port))
            send_and_end(sock, thespian_frame(("not", "an", "envelope")))
            return read_until_closed(sock)

    # with the runtime's secret the frame is read and answered ("bad data"); with another,
    # the connection is closed without a word
    assert b"ACK+DATAERR" in answer(runtime._secret)  # (after the admin's hello, checked)
    assert answer(transport_auth.new_secret()) == b""
    assert runtime.health()["state"] == "ready"


def test_connections_without_a_hello_are_dropped_late_ones_and_oldest_first() -> None:
    secret = transport_auth.new_secret()
    socks = [
        transport_auth.AuthSocket.connector(secret, socket.AF_INET, socket.SOCK_STREAM)
        for _ in range(transport_auth.MAX_UNPROVEN + 3)
    ]
    try:
        now = 1000.0
        for i, sock in enumerate(socks):
            sock.born = now - i * 0.01  # socks[0] is the youngest
        socks[-1].born = now - transport_auth.HELLO_DEADLINE - 1  # overdue
        socks[5].proven = True  # said its hello: never dropped
        incoming = {i: types.SimpleNamespace(socket=sock) for i, sock in enumerate(socks)}
        dropped = transport_auth.unproven_overflow(incoming, now)
        # the overdue one, then the oldest of the rest beyond the cap
        assert dropped == [len(socks) - 1, len(socks) - 2]
        assert transport_auth.unproven_overflow({}, now) == []
    finally:
        for sock in socks:
            sock.close()


# --- helpers -------------------------------------------------------------------------


class authenticated:  # noqa: N801 - used as a context manager, like socket.create_connection
    """A connection to `port` that has said a valid hello with the runtime's secret."""

    def __init__(self, rt: Any, port: int) -> None:
        self.sock = transport_auth.AuthSocket.connector(
            rt._secret, socket.AF_INET, socket.SOCK_STREAM
        )
        self.sock.settimeout(5)
        self.sock.connect(("127.0.0.1", port))  # the hello goes out with the first bytes

    def __enter__(self) -> transport_auth.AuthSocket:
        return self.sock

    def __exit__(self, *exc: Any) -> None:
        self.sock.close()


def read_until_closed(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """What the peer sends until it closes the connection (failing if it does not)."""
    got = b""
    deadline = time.monotonic() + timeout
    sock.settimeout(timeout)
    try:
        while time.monotonic() < deadline:
            chunk = sock.recv(4096)
            if not chunk:
                return got
            got += chunk
    except (ConnectionResetError, BrokenPipeError):
        return got
    raise AssertionError(f"the connection stayed open; received {got[:80]!r}")


def send_and_end(sock: socket.socket, data: bytes) -> None:
    """Send `data` and end the stream, unless the other end dropped the connection first."""
    with contextlib.suppress(OSError):
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)


def fuzz_frames(rng: random.Random) -> list[bytes]:
    """Malformed thespian frames: bad lengths, truncation, random bytes, a bad pickle."""
    frames = [
        b"-1>x",
        b"-999999>" + b"x" * 30,
        b"0>",
        b">",
        b"99999999999999999999999>",
        b"%d>" % (MAX_FRAME + 1) + b"x" * 100,
        b"1e9>xyz",
        b" 12>abc" + b"x" * 9,
        b"12>\x80\x04" + b"\xff" * 10,  # a length that is fine, a pickle that is not
        b"x" * 200,  # no '>' at all
        b"40>" + b"y" * 10,  # truncated: the peer closes half-way
        pickle.dumps(("a", "b")),  # a pickle with no length
    ]
    for _ in range(30):
        frames.append(rng.randbytes(rng.randint(1, 300)))
        frames.append(b"%d>" % rng.randint(0, 2**40) + rng.randbytes(rng.randint(0, 64)))
    return frames


def open_connections(proc: psutil.Process) -> int:
    try:
        return sum(1 for c in proc.net_connections(kind="inet") if c.status == "ESTABLISHED")
    except psutil.NoSuchProcess:
        return 0
