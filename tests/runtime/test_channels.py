"""Call channels: a shared actor's calls and replies on a Unix socket beside thespian."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import health_node, in_flight, wait_until
from tests.runtime.test_host_routes import (
    SLOW,
    SLOW_RUN,
    call_in_thread,
    learn_route,
    name,
)
from tether import channels
from tether.channels import ChannelGone, FrameReader, HostChannels, OutBuffer, frame
from tether.kinds import Scope
from tether.messages.calls import Call, ErrorCode, ResourceError
from tether.messages.codec import encode
from tether.messages.echo_ops import Echo

# the fault cases run for a shared kind and for its run-scoped twin
BOTH_SCOPES = pytest.mark.parametrize("scope", [Scope.SHARED, Scope.RUN], ids=["shared", "run"])

# --- the parts ---------------------------------------------------------------------


def test_frames_split_anywhere_in_the_stream_come_out_whole() -> None:
    payloads = [b"", b"a", b"x" * 70000, bytes(range(256))]
    stream = b"".join(frame(p) for p in payloads)
    for cut in (1, 3, 4, 5, 1000, 65536):
        reader = FrameReader()
        got = []
        for start in range(0, len(stream), cut):
            got.extend(reader.feed(stream[start : start + cut]))
        assert got == payloads


def test_a_frame_claiming_an_absurd_size_is_refused() -> None:
    with pytest.raises(ValueError, match="claims"):
        FrameReader().feed(b"\xff\xff\xff\xff" + b"x")


def test_an_out_buffer_keeps_what_a_full_pipe_refused_and_flushes_it_in_order() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        data = os.urandom(1 << 20)  # far more than a pipe holds
        out = OutBuffer(write_end)
        assert out.write(data[: 1 << 19]) is False
        assert out.write(data[1 << 19 :]) is False
        received = bytearray()
        while len(received) < len(data):
            received += os.read(read_end, 1 << 16)
            out.flush()
        assert bytes(received) == data
        assert out.flush() is True
    finally:
        os.close(read_end)
        os.close(write_end)


def test_an_out_buffer_drops_what_nobody_will_read() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    os.close(read_end)
    out = OutBuffer(write_end)
    assert out.write(b"lost") is True and out.broken
    os.close(write_end)
    # once closed, its number is not written to again, though another file may have it now
    reused_read, reused_write = os.pipe()
    os.set_blocking(reused_read, False)
    try:
        closed = OutBuffer(reused_write)
        closed.close()
        assert closed.write(b"never") is True
        with pytest.raises(BlockingIOError):
            os.read(reused_read, 10)
    finally:
        os.close(reused_read)
        os.close(reused_write)


def test_the_host_refuses_a_channel_held_by_another_process_than_its_actor() -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # this process listens where `other`'s call channel would be
        squatter.bind(channels.address(os.getpid(), other.pid))
        squatter.listen(1)
        with pytest.raises(ChannelGone, match="held by another process"):
            HostChannels().get(other.pid, 0.0)
    finally:
        squatter.close()
        other.kill()
        other.wait()


def test_connecting_never_waits_on_an_actor_that_does_not_accept() -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    busy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    queued = []
    try:
        busy.bind(channels.address(os.getpid(), other.pid))
        busy.listen(0)  # and never accepts: the backlog fills
        while True:
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.setblocking(False)
            queued.append(client)
            try:
                client.connect(channels.address(os.getpid(), other.pid))
            except BlockingIOError:
                break
        t, out = call_in_thread(HostChannels().get, other.pid, 0.0)
        t.join(2)
        assert not t.is_alive() and out == [None]
    finally:
        for client in queued:
            client.close()
        busy.close()
        other.kill()
        other.wait()


# --- in a runtime ------------------------------------------------------------------


def channel_of(rt, name: str) -> dict:
    return health_node(rt.health(), name)["call_channel"]


def test_a_known_shared_actor_is_called_on_one_channel_per_calling_thread(runtime) -> None:
    learn_route(runtime, "echo_process")
    assert runtime.call("r", "echo_process", "k", "echo", {"n": 0}, 5)["echo"] == {"n": 0}
    assert channel_of(runtime, "echo_process:k")["connections"] == 1
    results: dict[int, dict] = {}
    # every caller stays alive while the channels are counted: a thread that ended has its
    # channel closed by the next connection made (the test below), which a caller that
    # finished before the last one connected made happen (seen once in a full run: 2 of 5)
    all_called, counted = threading.Barrier(5), threading.Event()

    def caller(n: int) -> None:
        for i in range(20):
            results[n * 100 + i] = runtime.call(
                "r", "echo_process", "k", "echo", {"n": n, "i": i}, 5
            )
        all_called.wait(20)
        counted.wait(20)

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(1, 5)]
    for t in threads:
        t.start()
    all_called.wait(20)
    connections = channel_of(runtime, "echo_process:k")["connections"]
    counted.set()
    for t in threads:
        t.join(20)
    assert {k: v["echo"] for k, v in results.items()} == {
        n * 100 + i: {"n": n, "i": i} for n in range(1, 5) for i in range(20)
    }
    assert connections == 5


def test_the_channels_of_a_thread_that_ended_are_closed(runtime) -> None:
    learn_route(runtime, "echo_process")
    runtime.call("r", "echo_process", "k", "echo", {}, 5)
    worker = threading.Thread(target=runtime.call, args=("r", "echo_process", "k", "echo", {}, 5))
    worker.start()
    worker.join(10)
    assert channel_of(runtime, "echo_process:k")["connections"] == 2
    learn_route(runtime, "echo")  # any new connection sweeps up after ended threads
    runtime.call("r", "echo", "k", "echo", {}, 5)
    wait_until(lambda: channel_of(runtime, "echo_process:k")["connections"] == 1)


def test_a_megabyte_call_and_its_reply_cross_the_channel_whole(runtime) -> None:
    learn_route(runtime, "echo")
    blob = os.urandom(3 << 20).hex()  # 6 MiB of text each way: many partial writes
    reply = runtime.call("r", "echo", "k", "echo", {"blob": blob}, 20)
    assert reply["echo"]["blob"] == blob
    assert channel_of(runtime, "echo:k")["connections"] == 1


def test_a_late_reply_on_the_channel_never_reaches_the_next_call(runtime) -> None:
    learn_route(runtime, "echo")
    with pytest.raises(ResourceError) as late:
        runtime.call("r", "echo", "k", "sleep", {"seconds": 0.3}, 0.1)
    assert late.value.code == ErrorCode.DEADLINE
    wait_until(lambda: health_node(runtime.health(), "echo:k")["pending"] == 0)
    assert runtime.call("r", "echo", "k", "echo", {"n": 2}, 5)["echo"] == {"n": 2}


def test_another_process_cannot_call_through_the_channel(runtime) -> None:
    learn_route(runtime, "echo")
    actor_pid = runtime.engine.routes.get(("", "echo", "k")).pid
    call = Call("intruder-1", "r", "echo", "k", "echo", {"n": 1})
    intruder = f"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect({channels.address(os.getpid(), actor_pid)!r})
s.settimeout(5)
try:
    s.sendall({frame(encode(call))!r})
    answer = s.recv(100)
except (BrokenPipeError, ConnectionResetError):
    answer = b""
sys.stdout.write(f"answered {{answer!r}}" if answer else "closed")
"""
    out = subprocess.run(
        [sys.executable, "-c", intruder], capture_output=True, text=True, timeout=20
    )
    assert out.stdout == "closed", out.stderr  # closed on it, unanswered
    assert channel_of(runtime, "echo:k")["refused"] == 1
    assert runtime.call("r", "echo", "k", "echo", {"n": 3}, 5)["echo"] == {"n": 3}


def test_a_corrupt_frame_costs_only_its_own_connection(runtime) -> None:
    learn_route(runtime, "echo")
    route = runtime.engine.routes.get(("", "echo", "k"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(channels.address(os.getpid(), route.pid))  # (this process is the host)
    sock.sendall(b"\xff\xff\xff\xff garbage")
    sock.settimeout(5)
    assert sock.recv(100) == b""
    sock.close()
    assert runtime.call("r", "echo", "k", "echo", {"n": 4}, 5)["echo"] == {"n": 4}
    assert runtime.engine.routes.get(("", "echo", "k")).pid == route.pid


def test_without_a_channel_calls_go_through_thespian(runtime, monkeypatch) -> None:
    learn_route(runtime, "echo_process")
    monkeypatch.setattr(runtime.engine.channels, "get", lambda pid, create_time: None)
    assert runtime.call("r", "echo_process", "k", "echo", {"n": 5}, 5)["echo"] == {"n": 5}
    assert channel_of(runtime, "echo_process:k")["connections"] == 0


@BOTH_SCOPES
def test_a_call_on_a_channel_hears_its_actor_die_at_once(runtime_factory, scope) -> None:
    rt = runtime_factory(kinds=[SLOW_RUN if scope is Scope.RUN else SLOW])
    route = learn_route(rt, "slow")
    t, out = call_in_thread(rt.call, "r", "slow", "k", "hang", {}, 20)
    in_flight(rt, name(scope, "slow"), timeout=3.0)
    assert channel_of(rt, name(scope, "slow"))["connections"] == 1
    os.kill(route.pid, signal.SIGKILL)
    t.join(8)
    err = out[0]
    assert isinstance(err, ResourceError) and err.code == ErrorCode.RESOURCE_DIED
    assert f"its actor process {route.pid} is gone" in err.message


def test_a_gather_waits_on_channels_and_thespian_at_once(runtime) -> None:
    learn_route(runtime, "echo", key="known")  # on a channel; "new" goes via its supervisor
    results = runtime.gather(
        "r", [("echo", "known", "echo", {"n": 1}), ("echo", "new", "sleep", {"seconds": 0.05})], 5
    )
    assert results == [{"echo": {"n": 1}, "key": "known"}, {"slept": 0.05}]
    assert channel_of(runtime, "echo:known")["connections"] == 1


@BOTH_SCOPES
def test_callers_on_channels_get_one_clear_answer_each_while_actors_are_killed(
    runtime, scope
) -> None:
    kind = "echo_run" if scope is Scope.RUN else "echo_process"
    target = ("r" if scope is Scope.RUN else "", kind, "k")
    learn_route(runtime, kind)
    outcomes: list[tuple[float, object]] = []
    stop = threading.Event()

    def caller(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            args = {"n": n, "i": i}
            start = time.monotonic()
            try:
                got: object = runtime.call(
                    "r", kind, "k", Echo(args, idempotent=n % 2 == 0), None, 5
                )
                if got["echo"] != args:  # type: ignore[index]
                    got = ("another call's reply", got)
            except ResourceError as exc:
                got = exc
            outcomes.append((time.monotonic() - start, got))

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()

    def answered() -> int:
        return sum(isinstance(o, dict) for _, o in list(outcomes))

    def route_after(incarnation: int):
        route = runtime.engine.routes.get(target)
        return route if route is not None and route.incarnation > incarnation else None

    killed = 0
    try:
        for _ in range(3):
            victim = wait_until(lambda k=killed: route_after(k), timeout=10)
            killed = victim.incarnation
            before = answered()
            os.kill(victim.pid, signal.SIGKILL)
            # every caller carries on: answers come again from the next incarnation
            wait_until(lambda n=before: answered() > n + 20, timeout=10)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert killed >= 3
    errors = [o for _, o in outcomes if not isinstance(o, dict)]
    assert all(
        isinstance(e, ResourceError) and e.code in (ErrorCode.RESOURCE_DIED, ErrorCode.RESTARTING)
        for e in errors
    ), {str(e)[:200] for e in errors}
    assert max(elapsed for elapsed, _ in outcomes) < 5.5  # within every call's deadline
    assert runtime.call("r", kind, "k", "echo", {"after": 1}, 5)["echo"] == {"after": 1}
