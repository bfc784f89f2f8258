"""Calls through the real tree: routing, errors, concurrency, deadlines, late replies. A test
that faults an actor, leaves a call running past its end, reads which actors run or shuts
the tree down runs its own runtime; the others share the module's (`shared`: run ids of
their own on a healthy tree)."""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import gone, health_node, wait_until
from tether.messages.calls import ErrorCode, ResourceError


def call(rt, kind="echo", key="k", op="echo", args=None, timeout=5.0, run="r1", **kw):
    return rt.call(run, kind, key, op, args or {}, timeout, **kw)


def error_of(fn, *args, **kwargs) -> ResourceError:
    with pytest.raises(ResourceError) as info:
        fn(*args, **kwargs)
    return info.value


def test_echo_shared(shared) -> None:
    assert call(shared, args={"x": [1, "a"]}) == {"echo": {"x": [1, "a"]}, "key": "k"}


def test_echo_through_a_subprocess(shared) -> None:
    assert call(shared, "echo_process", args={"x": 2})["echo"] == {"x": 2}


def test_echo_run_scoped(shared) -> None:
    assert call(shared, "echo_run", args={"x": 3})["echo"] == {"x": 3}


def test_shared_kind_is_one_actor_for_all_runs(shared) -> None:
    assert call(shared, op="pid", run="a") == call(shared, op="pid", run="b")


def test_run_kind_is_one_actor_per_run(shared) -> None:
    assert call(shared, "echo_run", op="pid", run="a") != call(
        shared, "echo_run", op="pid", run="b"
    )


def test_unknown_kind_lists_the_connected_ones(shared) -> None:
    err = error_of(call, shared, kind="nope")
    assert err.code == ErrorCode.BAD_REQUEST
    assert "no resource kind 'nope' in this runtime; connected kinds: " in err.message
    assert "echo, echo_process" in err.message


def test_unknown_op_is_a_bad_request(shared) -> None:
    err = error_of(call, shared, op="frobnicate")
    assert (err.code, err.message) == (
        ErrorCode.BAD_REQUEST,
        "echo:k: echo has no op 'frobnicate'; its ops: crash, echo, fail, pid, raise, sleep, stop",
    )


def test_an_ill_typed_argument_is_a_bad_request_and_the_actor_serves_on(shared) -> None:
    err = error_of(call, shared, op="sleep", args={"seconds": "soon"})
    assert (err.code, err.message) == (
        ErrorCode.BAD_REQUEST,
        "echo:k: echo.sleep: seconds must be float, got str 'soon'",
    )
    assert call(shared, op="sleep", args={"seconds": 0.01}) == {"slept": 0.01}


def test_resource_error_reaches_the_caller(shared) -> None:
    err = error_of(call, shared, op="fail", args={"message": "nope, try X"})
    assert (err.code, err.message) == (ErrorCode.FAILED, "nope, try X")


def test_exception_in_on_call_fails_that_call_only(shared) -> None:
    err = error_of(call, shared, op="raise", args={"message": "boom"})
    assert err.code == ErrorCode.FAILED
    assert err.message == "echo:k failed on 'raise': RuntimeError: boom"
    assert call(shared)["key"] == "k"  # the actor is still serving


def test_arguments_that_cannot_cross_are_refused(shared) -> None:
    err = error_of(call, shared, args={"x": object()})
    assert err.code == ErrorCode.BAD_REQUEST
    assert "arguments of echo.echo cannot be sent to an actor" in err.message


def test_bad_timeout(shared) -> None:
    err = error_of(call, shared, timeout=0)
    assert err.message == "timeout must be a positive number of seconds, got 0"


def test_slow_resource_gets_a_deadline_error_in_time(runtime) -> None:
    start = time.monotonic()
    err = error_of(call, runtime, op="sleep", args={"seconds": 3}, timeout=0.3)
    assert time.monotonic() - start < 0.8
    assert err.code == ErrorCode.DEADLINE
    assert err.message.startswith("echo 'k' did not answer 'sleep' within 0.3 s")


def test_late_reply_never_reaches_the_next_call(shared) -> None:
    error_of(call, shared, op="sleep", args={"seconds": 0.3}, timeout=0.1)
    # the late answer has been sent once the actor holds no call
    wait_until(lambda: health_node(shared.rt.health(), "echo:k")["pending"] == 0)
    assert call(shared, args={"n": 2})["echo"] == {"n": 2}
    assert call(shared, op="sleep", args={"seconds": 0.01}) == {"slept": 0.01}


def test_a_stuck_actor_gives_every_caller_a_deadline_error(runtime) -> None:
    call(runtime)
    runtime.inject("delay", target="echo:k", seconds=5.0, count=4)
    errors: list[ResourceError] = []

    def one() -> None:
        errors.append(error_of(call, runtime, timeout=0.5))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(3)
    assert [e.code for e in errors] == [ErrorCode.DEADLINE] * 4


def test_gather_fans_out_and_keeps_order(shared) -> None:
    results = shared.rt.gather(
        shared.run_id("r1"),
        [("echo", str(i), "echo", {"i": i}) for i in range(6)] + [("echo", "x", "fail", {})],
        5.0,
    )
    assert [r["echo"]["i"] for r in results[:6]] == list(range(6))
    assert isinstance(results[6], ResourceError) and results[6].code == ErrorCode.FAILED


def test_gather_is_bounded_by_its_timeout(runtime) -> None:
    start = time.monotonic()
    results = runtime.gather(
        "r1", [("echo", "a", "sleep", {"seconds": 2}), ("echo", "b", "echo", {})], 0.4
    )
    assert time.monotonic() - start < 1.0
    assert isinstance(results[0], ResourceError) and results[0].code == ErrorCode.DEADLINE
    assert results[1]["key"] == "b"


def test_sixteen_threads_times_a_hundred_calls_through_several_runs(shared) -> None:
    failures: list[object] = []
    counts = [0] * 16
    runs = [shared.run_id(f"run-{n}") for n in range(4)]

    def worker(n: int) -> None:
        for i in range(100):
            kind = ("echo", "echo_process", "echo_run")[i % 3]
            try:
                got = shared.rt.call(runs[n % 4], kind, f"k{n % 2}", "echo", {"n": n, "i": i}, 20.0)
                assert got["echo"] == {"n": n, "i": i}
                counts[n] += 1
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                failures.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert failures == []
    assert counts == [100] * 16


def test_kind_keys_lists_running_shared_actors(runtime) -> None:
    call(runtime, key="b")
    call(runtime, key="a")
    assert runtime.kind_keys("echo") == ["a", "b"]
    assert runtime.kind_keys("echo_run") == []
    err = error_of(runtime.kind_keys, "nope")
    assert err.message.startswith("no resource kind 'nope'; connected kinds: ")
    assert "echo, echo_process" in err.message


def test_connected_kinds(shared) -> None:
    assert {"echo", "echo_process", "echo_run"} <= shared.rt.connected_kinds()


def test_close_run_stops_its_actors(shared) -> None:
    pid = call(shared, "echo_run", op="pid", run="gone")["pid"]
    shared.rt.close_run(shared.run_id("gone"))

    wait_until(
        lambda: gone([pid]),
        5,
    )


def test_calls_after_shutdown_say_so(runtime) -> None:
    runtime.shutdown()
    err = error_of(call, runtime)
    assert err.message == "the runtime is shut down; start a new one with Runtime.start()"


def test_async_callers_share_a_runtime(shared) -> None:
    import asyncio

    async def main() -> list[dict]:
        return await asyncio.gather(
            *(asyncio.to_thread(call, shared, args={"i": i}) for i in range(20))
        )

    assert [r["echo"]["i"] for r in asyncio.run(main())] == list(range(20))


def test_open_run_builds_a_run_backed_by_this_runtime(shared, tmp_path) -> None:
    from tether.run import Run

    run = shared.open_run("conv-1", workdir=tmp_path)
    assert (
        isinstance(run, Run) and run.runtime is shared.rt and run.run_id == shared.run_id("conv-1")
    )
    assert run.tools()  # at least the harness tools are on the surface
    run.close()


def test_open_run_rejects_an_empty_id(shared) -> None:
    with pytest.raises(ValueError, match="run_id must be a non-empty str, got ''"):
        shared.rt.open_run("")


def test_a_closed_run_can_be_opened_again(shared) -> None:
    call(shared, "echo_run", run="again")
    shared.rt.close_run(shared.run_id("again"))
    got = wait_until(
        lambda: _try(lambda: call(shared, "echo_run", run="again", args={"n": 1})), timeout=5
    )
    assert got["echo"] == {"n": 1}


def _try(fn):
    try:
        return fn()
    except ResourceError:
        return None
