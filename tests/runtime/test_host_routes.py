"""The host sends calls straight to their actor, and loses none when it goes.

Every case runs for a SHARED kind (host -> kind supervisor -> actor on a first call) and
for a RUN kind (host -> RunActor -> actor): one path, the same guarantees.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from tests.conftest import health_node, in_flight, wait_until
from tests.runtime.actors import marker
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import ErrorCode, ResourceError
from tether.messages.echo_ops import Echo, Hang, HangOnce, Pid

SLOW = KindSpec(
    "slow",
    "tests.runtime.actors:SlowProcessActor",
    Scope.SHARED,
    ChildSpec(Restart.PERMANENT, backoff_initial=0.05),
)
SLOW_RUN = KindSpec(
    "slow",
    "tests.runtime.actors:SlowProcessActor",
    Scope.RUN,
    ChildSpec(Restart.PERMANENT, backoff_initial=0.05),
)
TTL = KindSpec(
    "echo_ttl", "tether.actors.echo:EchoActor", Scope.SHARED, ChildSpec(Restart.TRANSIENT, ttl=0.5)
)
TTL_RUN = KindSpec(
    "echo_ttl", "tether.actors.echo:EchoActor", Scope.RUN, ChildSpec(Restart.TRANSIENT, ttl=0.5)
)


@pytest.fixture(params=[Scope.SHARED, Scope.RUN], ids=["shared", "run"])
def scope(request) -> Scope:
    return request.param


@pytest.fixture
def runtime(runtime_factory):
    """A fresh tree of the echo kinds, all these tests call (the other kinds' supervisors
    would be booted and stopped for nothing)."""
    return runtime_factory(kind_modules=["tether.actors.echo"])


def name(scope: Scope, kind: str, key: str = "k") -> str:
    """The actor's name in health (run-scoped ones live under run "r")."""
    return f"run:r/{kind}:{key}" if scope is Scope.RUN else f"{kind}:{key}"


def supervisor_of(scope: Scope, kind: str) -> str:
    return "run:r" if scope is Scope.RUN else f"supervisor:{kind}"


def learn_route(rt, kind: str, key: str = "k", op: str = "pid"):
    """Call until the host knows the actor's address (RouteInfo arrives beside a call)."""
    spec = rt.kinds[kind]
    target = ("r" if spec.scope is Scope.RUN else "", kind, key)

    def known():
        rt.call("r", kind, key, op, {}, 5)
        return rt.engine.routes.get(target)

    return wait_until(known, timeout=5.0)


def pid_of(rt, name: str) -> int:
    return health_node(rt.health(), name)["pids"][0]["pid"]


def call_in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, list]:
    out: list = []

    def run() -> None:
        try:
            out.append(fn(*args, **kwargs))
        except ResourceError as exc:
            out.append(exc)

    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_a_known_actor_is_called_without_its_supervisor(runtime, scope) -> None:
    kind = "echo_run" if scope is Scope.RUN else "echo_process"
    learn_route(runtime, kind)
    supervisor = pid_of(runtime, supervisor_of(scope, kind))
    os.kill(supervisor, signal.SIGSTOP)  # a call through the supervisor would now hang
    try:
        reply = runtime.call("r", kind, "k", "echo", {"x": 1}, 3)
    finally:
        os.kill(supervisor, signal.SIGCONT)
    assert reply["echo"] == {"x": 1}


def test_shared_calls_start_no_run_actor(runtime) -> None:
    runtime.call("only-shared", "echo", "k", "echo", {}, 5)
    names = str(runtime.health())
    assert "run:only-shared" not in names


def test_an_idempotent_call_survives_its_actor_process_being_killed(
    runtime_factory, tmp_path, scope
) -> None:
    rt = runtime_factory(kinds=[SLOW_RUN if scope is Scope.RUN else SLOW])
    first = learn_route(rt, "slow")
    t, out = call_in_thread(
        rt.call, "r", "slow", "k", HangOnce(**marker(tmp_path), idempotent=True), None, 10
    )
    in_flight(rt, name(scope, "slow"), timeout=3.0)
    start = time.monotonic()
    rt.inject("crash_actor", target=name(scope, "slow"))
    t.join(8)
    assert out and not isinstance(out[0], ResourceError), out
    assert time.monotonic() - start < 3.0  # noticed within the watch period, then retried
    again = wait_until(lambda: learn_route(rt, "slow"), timeout=5.0)
    assert again.incarnation > first.incarnation and again.pid != first.pid


def test_a_plain_call_hears_its_actor_process_died(runtime_factory, scope) -> None:
    rt = runtime_factory(kinds=[SLOW_RUN if scope is Scope.RUN else SLOW])
    route = learn_route(rt, "slow")
    t, out = call_in_thread(rt.call, "r", "slow", "k", "hang", {}, 20)
    in_flight(rt, name(scope, "slow"), timeout=3.0)
    start = time.monotonic()
    rt.inject("crash_actor", target=name(scope, "slow"))
    t.join(8)
    assert time.monotonic() - start < 3.0
    err = out[0]
    assert isinstance(err, ResourceError) and err.code == ErrorCode.RESOURCE_DIED
    assert f"its actor process {route.pid} is gone" in err.message
    assert "call again" in err.message


def test_a_call_sent_through_the_supervisor_hears_its_actor_process_died(
    runtime_factory, scope
) -> None:
    rt = runtime_factory(kinds=[SLOW_RUN if scope is Scope.RUN else SLOW])
    route = learn_route(rt, "slow")
    rt.engine.routes.clear()  # the next call goes through the supervisor, like a first call
    t, out = call_in_thread(rt.call, "r", "slow", "k", "hang", {}, 20)
    in_flight(rt, name(scope, "slow"), timeout=3.0)
    start = time.monotonic()
    os.kill(route.pid, signal.SIGKILL)
    t.join(8)
    assert time.monotonic() - start < 3.0  # (the pid it was handed to is watched)
    err = out[0]
    assert isinstance(err, ResourceError) and err.code == ErrorCode.RESOURCE_DIED
    assert f"its actor process {route.pid} is gone" in err.message


def test_an_idempotent_call_moves_when_the_server_under_its_actor_dies(
    runtime_factory, tmp_path, scope
) -> None:
    rt = runtime_factory(kinds=[SLOW_RUN if scope is Scope.RUN else SLOW])
    learn_route(rt, "slow")
    server = rt.call("r", "slow", "k", "pid", {}, 5)["pid"]
    t, out = call_in_thread(
        rt.call, "r", "slow", "k", HangOnce(**marker(tmp_path), idempotent=True), None, 10
    )
    in_flight(rt, name(scope, "slow"), timeout=3.0)
    os.kill(server, signal.SIGKILL)  # the actor says MOVED; the host sends it once more
    t.join(8)
    assert out and not isinstance(out[0], ResourceError), out
    assert out[0]["pid"] != server


def _live_server(rt, killed: list[int]) -> int | None:
    pid = rt.call("r", "slow", "k", Pid(idempotent=True), None, 5)["pid"]
    return pid if pid not in killed and psutil.pid_exists(pid) else None


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_retried_call_is_retried_only_once(runtime_factory, scope, idempotent) -> None:
    rt = runtime_factory(kinds=[SLOW_RUN if scope is Scope.RUN else SLOW])
    learn_route(rt, "slow")
    t, out = call_in_thread(rt.call, "r", "slow", "k", Hang(idempotent=idempotent), None, 15)
    killed: list[int] = []
    for _ in range(2 if idempotent else 1):  # kill the first incarnation, then the retry's
        in_flight(rt, name(scope, "slow"), timeout=5.0)
        # (the going incarnation may still answer with its dead server's pid)
        server = wait_until(lambda: _live_server(rt, killed), timeout=5.0)
        os.kill(server, signal.SIGKILL)
        killed.append(server)
    t.join(8)
    err = out[0]
    assert isinstance(err, ResourceError) and err.code == ErrorCode.RESOURCE_DIED, err


def test_incarnations_keep_growing_after_an_actor_is_forgotten(runtime_factory, scope) -> None:
    rt = runtime_factory(kinds=[TTL_RUN if scope is Scope.RUN else TTL])
    first = learn_route(rt, "echo_ttl")
    wait_until(lambda: not first.alive(), timeout=5.0)  # its TTL ended it; nothing restarts it
    again = learn_route(rt, "echo_ttl")
    # a host retry waits for an incarnation newer than the one it saw go: numbering must
    # not start over with a fresh record
    assert again.incarnation > first.incarnation


def test_a_call_waiting_for_a_newer_incarnation_gets_a_fresh_actor(runtime_factory, scope) -> None:
    from tether.host.routes import Flight

    rt = runtime_factory(kinds=[TTL_RUN if scope is Scope.RUN else TTL])
    route = learn_route(rt, "echo_ttl")
    # what a host sends after it saw this incarnation go: the supervisor holds it for a
    # newer one; the TTL stop forgets the record, and the waiting call starts a fresh actor
    call, data = rt.engine.make_call("r", "echo_ttl", "k", Pid(idempotent=True), None, 5.0)
    flight = Flight(call, data)
    flight.send_after(route.incarnation, as_retry=False)
    [(_, reply)] = rt.engine.run_flights([flight], call.deadline)
    assert not isinstance(reply, ResourceError) and reply.ok, reply
    assert reply.payload["pid"] != route.pid


def test_idle_caller_threads_never_stall_a_supervisor(runtime, scope) -> None:
    # 25 threads route a call through the supervisor (each its own thespian endpoint), then
    # idle with their endpoints open. When the actor dies, nothing may be sent to them that
    # they will not read: thespian holds at most 20 unanswered sends per actor, and the
    # supervisor would then start nothing and route nothing for minutes.
    kind = "echo_run" if scope is Scope.RUN else "echo_process"
    idle = threading.Event()
    routed = []

    def route_then_idle() -> None:
        runtime.engine.routes.clear()  # through the supervisor, like a first call
        routed.append(runtime.call("r", kind, "k", "pid", {}, 10))
        idle.wait(60)

    threads = [threading.Thread(target=route_then_idle) for _ in range(25)]
    try:
        for t in threads:
            t.start()
        wait_until(lambda: len(routed) == 25, timeout=20)
        os.kill(routed[-1]["actor_pid"], signal.SIGKILL)
        start = time.monotonic()
        assert runtime.call("r", kind, "other", "echo", {"n": 1}, 5)["echo"] == {"n": 1}
        again = runtime.call("r", kind, "k", Echo({"n": 2}, idempotent=True), None, 5)
        assert again["echo"] == {"n": 2}  # (idempotent: it waits out the restart)
        assert time.monotonic() - start < 3.0
    finally:
        idle.set()
        for t in threads:
            t.join(10)


@pytest.mark.parametrize("idempotent", [False, True])
@pytest.mark.parametrize("victim", ["run:r", "runs"])
def test_a_call_survives_or_hears_of_its_run_supervisors_dying(
    runtime_factory, tmp_path, victim, idempotent
) -> None:
    # SIGKILL the RunActor, or the supervisor of every run, while a run-scoped call is open:
    # its resource actor dies with them; the call is retried once (idempotent) through the
    # restarted tree, or fails at once with resource_died
    rt = runtime_factory(kinds=[SLOW_RUN])
    first = learn_route(rt, "slow")
    t, out = call_in_thread(
        rt.call, "r", "slow", "k", HangOnce(**marker(tmp_path), idempotent=idempotent), None, 10
    )
    in_flight(rt, name(Scope.RUN, "slow"), timeout=3.0)
    start = time.monotonic()
    os.kill(pid_of(rt, victim), signal.SIGKILL)
    t.join(9)
    took = time.monotonic() - start
    assert out, "the call never returned"
    if idempotent:
        assert not isinstance(out[0], ResourceError), out
        again = learn_route(rt, "slow")
        assert again.pid != first.pid
    else:
        err = out[0]
        assert isinstance(err, ResourceError) and err.code == ErrorCode.RESOURCE_DIED, err
        # (the actor, or its server it takes down as it goes, says so first)
        assert err.message.startswith("run:r/slow:k") and "call again" in err.message, err
    assert took < 3.0, f"took {took:.2f} s"
    # and the run works again (an idempotent call rides out what is still restarting)
    assert rt.call("r", "slow", "k", Pid(idempotent=True), None, 5)["pid"]


def test_a_stopped_supervisor_on_the_way_holds_its_caller_no_longer_than_the_deadline(
    runtime_factory, scope
) -> None:
    # thespian's tell waits up to 60 s for the receiving process to take a message: a first
    # call whose supervisor is stopped must cost its caller the call's deadline, no more
    rt = runtime_factory(kinds=[SLOW_RUN if scope is Scope.RUN else SLOW])
    learn_route(rt, "slow")
    supervisor = pid_of(rt, supervisor_of(scope, "slow"))
    rt.engine.routes.clear()  # the next call goes through the supervisor, like a first call
    os.kill(supervisor, signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(ResourceError) as err:
            rt.call("r", "slow", "k", "pid", {}, 1.0)
        took = time.monotonic() - start
    finally:
        os.kill(supervisor, signal.SIGCONT)
    assert err.value.code == ErrorCode.DEADLINE, err.value
    assert took < 1.5, f"took {took:.2f} s"
    # and once it runs again, so does the tool
    assert rt.call("r", "slow", "k", Pid(idempotent=True), None, 5)["pid"]


def test_a_first_call_survives_its_run_actor_dying_on_the_way(runtime_factory) -> None:
    # the RunActor is stopped (SIGSTOP) so the Route waits in it, then killed: the host,
    # watching the supervisor that holds the call, sends it again through the runs supervisor
    rt = runtime_factory(kinds=[SLOW_RUN])
    learn_route(rt, "slow")
    run_actor = pid_of(rt, "run:r")
    rt.engine.routes.clear()  # the next call goes through the RunActor, like a first call
    os.kill(run_actor, signal.SIGSTOP)
    t, out = call_in_thread(rt.call, "r", "slow", "k", Pid(idempotent=True), None, 10)
    wait_until(
        lambda: rt.engine.routes.get(("", "run", "r")) is not None and t.is_alive(), timeout=10.0
    )
    os.kill(run_actor, signal.SIGKILL)
    t.join(8)
    assert out and not isinstance(out[0], ResourceError), out
    assert pid_of(rt, "run:r") != run_actor
