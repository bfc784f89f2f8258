"""Supervision on real processes: restarts, give-up, TTL, idle reaping, faults, health.

A test that kills, stops or injects a fault gets a fresh tree of the echo kinds (`runtime`)
or of its own kinds; one that only calls and reads health (its fields, a refused fault,
large echoes) takes the module's tree (`shared`)."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from tests.conftest import health_node as node
from tests.conftest import in_flight, wait_until
from tests.runtime.actors import marker
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import ErrorCode, ResourceError
from tether.messages.echo_ops import HangOnce


def call(rt, kind="echo_process", key="k", op="echo", args=None, timeout=5.0, run="r1", **kw):
    return rt.call(run, kind, key, op, args or {}, timeout, **kw)


def error_of(fn, *args, **kwargs) -> ResourceError:
    with pytest.raises(ResourceError) as info:
        fn(*args, **kwargs)
    return info.value


@pytest.fixture(params=[Scope.SHARED, Scope.RUN], ids=["shared", "run"])
def scope(request) -> Scope:
    """Fault tests run for a shared kind and for its run-scoped twin."""
    return request.param


@pytest.fixture
def runtime(runtime_factory):
    """A fresh tree of the echo kinds, all these tests call (the other kinds' supervisors
    would be booted and stopped for nothing)."""
    return runtime_factory(kind_modules=["tether.actors.echo"])


def nm(scope: Scope, name: str, run: str = "r1") -> str:
    """An actor's name in health: run-scoped ones live under their run."""
    return f"run:{run}/{name}" if scope is Scope.RUN else name


def serving(rt, kind="echo_process", key="k", run="r1", op="echo"):
    try:
        return call(rt, kind, key, op=op, timeout=0.5, run=run)
    except ResourceError:
        return None


def test_restart_after_sigkill_of_the_owned_subprocess(runtime) -> None:
    pid = call(runtime, op="pid")["pid"]
    os.kill(pid, signal.SIGKILL)
    start = time.monotonic()
    wait_until(lambda: serving(runtime), timeout=3.0)
    assert time.monotonic() - start < 3.0
    assert call(runtime, op="pid")["pid"] != pid
    health = runtime.health()
    assert node(health, "echo_process:k")["restarts"] == 1
    assert "was killed by signal 9" in node(health, "echo_process:k")["last_error"]


def test_in_flight_call_gets_resource_died_when_the_process_dies(runtime_factory, scope) -> None:
    slow = KindSpec(
        "slow", "tests.runtime.actors:SlowProcessActor", scope, ChildSpec(Restart.PERMANENT)
    )
    rt = runtime_factory(kinds=[slow])
    pid = rt.call("r", "slow", "k", "pid", {}, 5)["pid"]
    import threading

    errors = []
    t = threading.Thread(
        target=lambda: errors.append(error_of(rt.call, "r", "slow", "k", "hang", {}, 5))
    )
    t.start()
    in_flight(rt, nm(scope, "slow:k", "r"))
    os.kill(pid, signal.SIGKILL)
    t.join(3)
    assert errors[0].code == ErrorCode.RESOURCE_DIED
    assert "was killed by signal 9" in errors[0].message and "call again" in errors[0].message


def test_idempotent_call_is_retried_once_on_the_new_incarnation(
    runtime_factory, scope, tmp_path
) -> None:
    slow = KindSpec(
        "slow",
        "tests.runtime.actors:SlowProcessActor",
        scope,
        ChildSpec(Restart.PERMANENT, backoff_initial=0.05),
    )
    rt = runtime_factory(kinds=[slow])
    pid = rt.call("r", "slow", "k", "pid", {}, 5)["pid"]
    import threading

    results = []
    t = threading.Thread(
        target=lambda: results.append(
            rt.call("r", "slow", "k", HangOnce(**marker(tmp_path), idempotent=True), None, 5)
        )
    )
    t.start()
    in_flight(rt, nm(scope, "slow:k", "r"))
    os.kill(pid, signal.SIGKILL)
    t.join(5)
    assert results and results[0]["pid"] != pid


def test_give_up_after_intensity_is_exceeded_is_visible_in_health(runtime_factory, scope) -> None:
    flaky = KindSpec(
        "flaky",
        "tether.actors.echo:EchoProcessActor",
        scope,
        ChildSpec(Restart.PERMANENT, max_restarts=2, period=30.0, backoff_initial=0.02),
    )
    rt = runtime_factory(kinds=[flaky])
    for _ in range(3):
        wait_until(lambda: serving(rt, "flaky"), timeout=10.0)
        rt.inject("kill_process", target=nm(scope, "flaky:k"))
    name = nm(scope, "flaky:k")
    state = wait_until(
        lambda: (n := node(rt.health(), name)) and n["state"] == "failed" and n, timeout=3.0
    )
    assert state["last_error"].startswith(
        f"gave up on {name} after 2 restarts in 30 s; last error: {name}: python"
    )
    err = error_of(call, rt, "flaky")
    assert err.code == ErrorCode.GAVE_UP and err.message.startswith(f"gave up on {name}")


def test_restarting_resource_answers_with_a_clear_error(runtime_factory, scope) -> None:
    slow_restart = KindSpec(
        "echo_process",
        "tether.actors.echo:EchoProcessActor",
        scope,
        ChildSpec(Restart.PERMANENT, backoff_initial=1.0),
    )
    rt = runtime_factory(kinds=[slow_restart])
    call(rt)
    name = nm(scope, "echo_process:k")
    rt.inject("kill_process", target=name)
    err = wait_until(lambda: _restarting_error(rt), timeout=2.0)
    assert err.startswith(
        f"{name} is restarting (restart 1 of 5 in 60 s; last error: {name}: python"
    )
    assert err.endswith("try again in a moment")


def _restarting_error(rt) -> str | None:
    try:
        call(rt, timeout=0.5)
    except ResourceError as exc:
        if exc.code == ErrorCode.RESTARTING:
            return exc.message
    return None


def test_ttl_expiry_stops_the_child_and_the_next_call_starts_a_fresh_one(
    runtime_factory, scope
) -> None:
    short = KindSpec(
        "echo_process",
        "tether.actors.echo:EchoProcessActor",
        scope,
        ChildSpec(Restart.PERMANENT, ttl=0.4),
    )
    rt = runtime_factory(kinds=[short])
    pid = call(rt, op="pid")["pid"]
    wait_until(lambda: not psutil.pid_exists(pid), timeout=10.0)

    def forgotten() -> bool:  # the process dies before its actor is out of the table
        entry = node(rt.health(), nm(scope, "echo_process:k"))
        assert entry is None or entry["restarts"] == 0, f"restarted after its TTL: {entry}"
        return entry is None

    wait_until(forgotten, timeout=10.0)
    assert call(rt, op="pid")["pid"] != pid


def test_idle_reaping(runtime_factory) -> None:
    idle = KindSpec(
        "echo_run", "tether.actors.echo:EchoProcessActor", Scope.RUN, ChildSpec(idle_ttl=1.0)
    )
    rt = runtime_factory(kinds=[idle])
    pid = call(rt, "echo_run", op="pid")["pid"]
    for _ in range(4):  # calls keep it alive
        time.sleep(0.25)  # gaps well inside the idle TTL, even on a loaded machine
        assert call(rt, "echo_run", op="pid")["pid"] == pid
    wait_until(lambda: not psutil.pid_exists(pid), timeout=10.0)
    assert node(rt.health(), "run:r1/echo_run:k") is None


def test_unavailable_resource_is_not_restarted(runtime_factory, scope) -> None:
    missing = KindSpec("missing", "tests.runtime.actors:UnavailableActor", scope)
    rt = runtime_factory(kinds=[missing])
    err = error_of(call, rt, "missing")
    assert (err.code, err.message) == (
        ErrorCode.UNAVAILABLE,
        "frob not on PATH: install frob or call status",
    )
    err = error_of(call, rt, "missing")
    assert err.code == ErrorCode.UNAVAILABLE
    assert node(rt.health(), nm(scope, "missing:k"))["restarts"] == 0


def test_actor_class_that_does_not_load_is_unavailable(runtime_factory, scope) -> None:
    broken = KindSpec("broken", "tests.runtime.nonexistent:Nope", scope)
    rt = runtime_factory(kinds=[broken])
    err = error_of(call, rt, "broken")
    assert err.code == ErrorCode.UNAVAILABLE
    assert "actor class 'tests.runtime.nonexistent:Nope' failed to load" in err.message


def test_crash_actor_is_restarted(runtime, scope) -> None:
    kind = "echo_run" if scope is Scope.RUN else "echo_process"
    name = nm(scope, f"{kind}:k")
    before = call(runtime, kind, op="pid")["actor_pid"]
    message = runtime.inject("crash_actor", target=name)["message"]
    assert message.startswith(f"SIGKILLed the actor process of {name} (pid {before})")
    wait_until(lambda: serving(runtime, kind), timeout=10.0)
    assert call(runtime, kind, op="pid")["actor_pid"] != before


def test_crash_of_a_run_actor_recovers(runtime) -> None:
    call(runtime, "echo_run", run="r9")
    runtime.inject("crash_actor", target="run:r9")
    wait_until(
        lambda: serving(runtime, "echo_run", run="r9"), timeout=10.0
    )  # measured 0.5 s; generous for a loaded CI machine


def test_drop_reply_makes_the_caller_time_out_once(runtime) -> None:
    call(runtime, "echo")
    runtime.inject("drop_reply", target="echo:k")
    assert error_of(call, runtime, "echo", timeout=0.3).code == ErrorCode.DEADLINE
    assert call(runtime, "echo")["key"] == "k"


def test_delay_postpones_the_next_call(runtime) -> None:
    call(runtime, "echo")
    runtime.inject("delay", target="echo:k", seconds=0.3)
    start = time.monotonic()
    call(runtime, "echo")
    assert 0.25 < time.monotonic() - start < 1.5


@pytest.mark.parametrize(
    "fault, target, kwargs, message",
    [
        (
            "kill_process",
            "echo:k",
            {},
            "echo:k owns no OS process; use crash_actor to kill the actor itself",
        ),
        (
            "delay",
            "nope:k",
            {"seconds": 1},
            # (then the supervisors of the kinds the module's tests called so far)
            "no actor named 'nope:k' under root; known here: runs, supervisor:",
        ),
        (
            "kill_process",
            "echo:zz",
            {},
            "no actor named 'echo:zz' under supervisor:echo; known here: echo:k",
        ),
        (
            "delay",
            "supervisor:echo",
            {"seconds": 1},
            "supervisor:echo is a supervisor: faults target resource actors",
        ),
        ("drop_reply", "run:{r1}", {}, "run:{r1} is a run: only crash_actor applies to it"),
    ],
)
def test_fault_target_errors(shared, fault, target, kwargs, message) -> None:
    # (a refused fault touches nothing: the module's tree serves)
    r1 = shared.run_id("r1")
    call(shared.rt, "echo", run=r1)
    call(shared.rt, "echo_run", run=r1)  # a run kind starts run:<r1>
    err = error_of(shared.rt.inject, fault, target=target.format(r1=r1), **kwargs)
    assert err.code == ErrorCode.BAD_REQUEST
    assert err.message.startswith(message.format(r1=r1))


def test_unknown_fault(shared) -> None:
    with pytest.raises(
        ValueError,
        match="unknown fault 'melt'; faults: kill_process, crash_actor, delay, drop_reply",
    ):
        shared.rt.inject("melt", target="echo:k")


def test_a_shared_kinds_supervisor_starts_with_the_kinds_first_call(runtime) -> None:
    def tree() -> set[str]:
        return {child["name"] for child in runtime.health()["children"]}

    assert tree() == {"runs"}, "a fresh tree carries no process for a kind nobody called"
    assert runtime.kind_keys("echo") == []  # (asked before its supervisor exists)
    call(runtime, "echo")
    assert tree() == {"runs", "supervisor:echo"}
    assert runtime.kind_keys("echo") == ["k"]
    call(runtime, "echo", key="k2")  # (the next key goes to the same supervisor)
    assert tree() == {"runs", "supervisor:echo"} and runtime.kind_keys("echo") == ["k", "k2"]


def test_health_tree_fields(shared) -> None:
    rt, r1 = shared.rt, shared.run_id("r1")
    call(rt, run=r1)
    call(rt, "echo_run", run=r1)
    health = rt.health()
    assert health["name"] == "root" and health["admin_port"] == rt.admin_port
    names = {c["name"] for c in health["children"]}
    assert {"runs", "supervisor:echo", "supervisor:echo_process", "supervisor:echo_run"} - {
        "supervisor:echo_run"
    } <= names
    leaf = node(health, "echo_process:k")
    assert {
        "name",
        "kind",
        "key",
        "state",
        "uptime",
        "restarts",
        "last_error",
        "pending",
        "pids",
    } <= set(leaf)
    assert (leaf["kind"], leaf["key"], leaf["state"], leaf["restarts"]) == (
        "echo_process",
        "k",
        "ready",
        0,
    )
    assert len(leaf["pids"]) == 2 and all(p["rss"] > 0 for p in leaf["pids"])
    assert node(health, f"run:{r1}/echo_run:k")["state"] == "ready"


def test_busy_and_pending_in_health(shared) -> None:
    import threading

    rt, r1 = shared.rt, shared.run_id("r1")
    t = threading.Thread(target=lambda: call(rt, "echo", op="sleep", args={"seconds": 0.6}, run=r1))
    t.start()
    # (the health that shows the call is the one asserted on: a second look may come after
    # the 0.6 s on a loaded machine)
    leaf = wait_until(lambda: (n := node(rt.health(), "echo:k")) and n["pending"] >= 1 and n)
    t.join(2)
    assert (leaf["state"], leaf["pending"]) == ("busy", 1)


def test_unresponsive_actor_does_not_stall_health(runtime) -> None:
    call(runtime, "echo_process")
    pid = call(runtime, "echo_process", op="pid")["actor_pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        health = runtime.health(timeout=1.0)
        assert time.monotonic() - start < 1.5
        assert node(health, "echo_process:k")["state"] == "unresponsive"
    finally:
        os.kill(pid, signal.SIGCONT)


def test_subprocess_death_is_noticed_at_once(runtime_factory) -> None:
    import threading

    slow = KindSpec(
        "slow", "tests.runtime.actors:SlowProcessActor", Scope.SHARED, ChildSpec(Restart.PERMANENT)
    )
    rt = runtime_factory(kinds=[slow])
    pid = rt.call("r", "slow", "k", "pid", {}, 5)["pid"]
    got: list[float] = []

    def waiter() -> None:
        error_of(rt.call, "r", "slow", "k", "hang", {}, 5)
        got.append(time.monotonic())

    t = threading.Thread(target=waiter)
    t.start()
    in_flight(rt, "slow:k")
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    t.join(3)
    # pidfd watched by ThespianWatch: the actor hears of the death at once and fails the
    # call; the bound is 100 ms for noticing, and this includes the reply's trip
    assert got, "the call in flight was never answered"
    print(f"death noticed and the call failed in {(got[0] - killed) * 1000:.1f} ms")
    assert got[0] - killed < 0.1, got[0] - killed


def test_large_writes_and_reads_do_not_block_the_actor(shared) -> None:
    blob = "x" * 1_000_000  # far beyond a pipe's 64 KiB buffer, both ways
    r1 = shared.run_id("r1")
    assert call(shared.rt, args={"blob": blob}, timeout=20, run=r1)["echo"]["blob"] == blob
    assert call(shared.rt, args={"small": 1}, run=r1)["echo"] == {"small": 1}


def test_stderr_tail_is_kept_for_status(shared) -> None:
    said = f"warning: something odd ({shared.prefix})"  # (this test's line, not another's)
    call(shared.rt, op="stderr", args={"text": said}, run=shared.run_id("r1"))
    leaf = node(shared.rt.health(), "echo_process:k")
    assert said in leaf["extra"]["stderr_tail"]


def test_run_scoped_resources_are_supervised_by_their_run(runtime) -> None:
    pid = call(runtime, "echo_run", op="pid")["pid"]
    message = runtime.inject("kill_process", target="run:r1/echo_run:k")["message"]
    assert message == f"sent SIGKILL to run:r1/echo_run:k's process group {pid}"
    wait_until(lambda: serving(runtime, "echo_run"), timeout=10.0)
    assert call(runtime, "echo_run", op="pid")["pid"] != pid
    assert node(runtime.health(), "run:r1/echo_run:k")["restarts"] == 1


def test_a_caller_waiting_on_a_run_whose_actor_dies_hears_it_at_once(runtime_factory) -> None:
    import threading

    slow_run = KindSpec(
        "slow_run", "tests.runtime.actors:SlowProcessActor", Scope.RUN, ChildSpec(Restart.TRANSIENT)
    )
    rt = runtime_factory(kinds=[slow_run])
    call(rt, "slow_run", op="pid")
    errors: list[ResourceError] = []
    t = threading.Thread(
        target=lambda: errors.append(error_of(call, rt, "slow_run", op="hang", timeout=20))
    )
    t.start()
    in_flight(rt, "run:r1/slow_run:k")
    start = time.monotonic()
    rt.inject("crash_actor", target="run:r1")
    t.join(5)
    assert time.monotonic() - start < 2.0
    assert errors[0].code == ErrorCode.RESOURCE_DIED
    assert errors[0].message.startswith(
        "run:r1/slow_run:k went away while handling 'hang' (crash: "
    )
    assert errors[0].message.endswith("it is restarted on the next call — call again")
    wait_until(lambda: serving(rt, "slow_run", op="pid"), timeout=5.0)
