"""The governor on a real tree (tether.capacity.governor): admission, eviction as a normal
stop, the capacity error, rt.capacity(), memory_pressure. Sizes are set through the kinds'
`capacity` config, the budget through memory_pressure, so each case is exact."""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import health_node, wait_until
from tether.actors.echo import KINDS as ECHO_KINDS
from tether.capacity.policy import Settings
from tether.capacity.usage import EVICTED, MIB, traits_of
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import ErrorCode, ResourceError

CACHE = KindSpec(  # stateless and shared, as a language server is
    "cache",
    "tether.actors.echo:EchoProcessActor",
    Scope.SHARED,
    ChildSpec(Restart.TRANSIENT),
    config={"capacity": {"expected_mb": 50}},
)
MEMO = KindSpec(  # a conversation's state, as a kernel is
    "memo",
    "tether.actors.echo:EchoProcessActor",
    Scope.RUN,
    ChildSpec(Restart.TRANSIENT),
    config={"capacity": {"expected_mb": 50, "holds_state": True}},
)
KINDS = [*ECHO_KINDS, CACHE, MEMO]


@pytest.fixture
def rt(runtime_factory):
    rt = runtime_factory(kinds=KINDS)
    rt.governor.settings = Settings(min_idle=0.2)  # (the default 2 s, shortened for tests)
    return rt


def squeeze(rt, free_mib: float) -> None:
    """Shrink the budget to what the tree holds now plus `free_mib`."""
    rt.governor.sample()
    cap = rt.capacity()
    rt.inject("memory_pressure", budget=int(cap["used"] + cap["reserved"] + free_mib * MIB))


def idle(rt, name: str, seconds: float) -> None:
    """Wait (bounded) until the sampled record of `name` is idle `seconds`."""

    def done() -> bool:
        rt.governor.sample()
        rec = next((r for r in rt.governor.records if r.name == name), None)
        return rec is not None and time.monotonic() - rec.last_use >= seconds

    wait_until(done, timeout=10.0, interval=0.1)


def test_capacity_and_health_say_the_budget(rt):
    cap = rt.capacity()
    assert cap["budget"] > 0 and cap["used"] > 10 * MIB
    assert cap["budget_source"] in ("0.8 of physical memory",) or "cgroup" in cap["budget_source"]
    assert cap["by_kind"]["tree"]["count"] >= 2  # root, runs (and the called kinds' supervisors)
    room = cap["budget"] - cap["used"] - cap["reserved"] + cap["evictable"]
    assert cap["fit"] == room // cap["average_conversation"] > 0
    assert rt.health()["capacity"]["budget"] == cap["budget"]


def test_a_budget_that_cannot_hold_a_start_refuses_it_at_once(rt):
    rt._open_run_actor("c1")
    rt.call("c1", "memo", "a", "echo", {"x": 1})
    squeeze(rt, 10)  # 10 MiB free; memo needs 50; the only other resource holds state
    started = time.monotonic()
    with pytest.raises(ResourceError) as refused:
        rt.call("c1", "memo", "b", "echo", {"x": 2})
    assert time.monotonic() - started < 1.0
    assert refused.value.code == ErrorCode.CAPACITY
    text = refused.value.message
    assert "run:c1/memo:b (~50 MiB) cannot start" in text
    assert "Held by kind:" in text and "memo" in text
    assert "1 hold conversations' state" in text
    assert "close a conversation" in text and "memory_budget" in text
    assert rt.capacity()["refusals"] == 1
    # the conversation's state was kept, and it still answers
    assert rt.call("c1", "memo", "a", "echo", {"x": 3})["echo"] == {"x": 3}


def test_an_idle_stateless_resource_makes_room_and_says_so_when_called_again(rt):
    rt._open_run_actor("c1")
    rt.call("", "cache", "a", "echo", {"x": 1})
    idle(rt, "cache:a", 0.3)
    squeeze(rt, 45)  # memo needs 50: 5 MiB must go, and cache:a may
    assert rt.call("c1", "memo", "m", "echo", {"x": 2})["echo"] == {"x": 2}
    assert rt.capacity()["evictions"] == {"cache": 1}
    wait_until(lambda: health_node(rt.health(), "cache:a") is None, timeout=5.0)
    supervisor = health_node(rt.health(), "supervisor:cache")
    assert supervisor["last_error"] == "" and supervisor["children"] == []  # a normal stop
    rt.inject("memory_pressure", budget=1.0)
    again = rt.call("", "cache", "a", "echo", {"x": 3})  # started again: a cold start
    assert again["echo"] == {"x": 3} and "notes" not in again  # (typed replies stay as typed)


def test_state_goes_only_when_the_host_opted_in(rt):
    rt._open_run_actor("c1")
    rt.call("c1", "memo", "old", "echo", {"x": 1})
    idle(rt, "run:c1/memo:old", 0.3)
    squeeze(rt, 45)
    with pytest.raises(ResourceError, match="hold conversations' state"):
        rt.call("c1", "memo", "new", "echo", {})
    rt.governor.settings = Settings(evict_idle_kernels_after=0.2, min_idle=0.2)
    assert rt.call("c1", "memo", "new", "echo", {"x": 2})["echo"] == {"x": 2}
    assert rt.capacity()["evictions"] == {"memo": 1}
    rt.inject("memory_pressure", budget=1.0)
    assert rt.call("c1", "memo", "old", "echo", {"x": 3})["echo"] == {"x": 3}


def test_an_evicted_kernel_says_its_state_was_lost(runtime_factory, tmp_path):
    from tether.actors.kernel import kinds

    rt = runtime_factory(kinds=[*kinds(spares=0)], evict_idle_kernels_after=0.005)  # 0.3 s
    rt.governor.settings = Settings(evict_idle_kernels_after=0.3, min_idle=0.2)
    first, second = rt.open_run("k1", workdir=tmp_path), rt.open_run("k2", workdir=tmp_path)
    what = "keep a number in the kernel state"
    assert not first.call("eval", {"code": "kept = 7", "description": what}).is_error
    idle(rt, "run:k1/kernel:python", 0.4)
    # a second kernel (~100 MiB expected) fits only in the first one's place: the room
    # left is what the first lacks of that, and a little (it holds ~60 MiB since jedi and
    # debugpy are held off; the pool, with no spares, only its actor)
    held = next(r.bytes for r in rt.governor.records if r.name == "run:k1/kernel:python")
    squeeze(rt, (traits_of("kernel").expected_bytes - held) / MIB + 4)
    assert not second.call("eval", {"code": "1 + 1", "description": what}).is_error
    assert rt.capacity()["evictions"]["kernel"] == 1  # (and the empty pool, a spare, first)
    rt.inject("memory_pressure", budget=1.0)
    again = first.call("eval", {"code": "'kept' in dir()", "description": what})
    # (the result's text in the message: this has failed now and then under load, issue 23)
    assert again.text.splitlines()[0] == "False", again.text
    assert EVICTED in again.text and "its state (variables, imports, data" in again.text, again.text


def test_pressure_evicts_what_it_may_and_never_a_resource_inside_a_call(rt):
    rt.call("", "cache", "a", "echo", {})
    rt.call("", "echo", "slow", "echo", {})
    idle(rt, "cache:a", 0.3)
    done = threading.Event()

    def slow() -> None:
        rt.call("", "echo", "slow", "sleep", {"seconds": 2.0})
        done.set()

    caller = threading.Thread(target=slow)
    caller.start()
    wait_until(lambda: (health_node(rt.health(), "echo:slow") or {}).get("pending"), timeout=3.0)
    rt.inject("memory_pressure", budget=64 * MIB, seconds=30)  # far below what the tree holds
    assert rt.capacity()["evictions"].get("cache") == 1
    assert "echo" not in rt.capacity()["evictions"]  # busy: kept
    assert not rt._evict("echo:slow", "a test")  # the actor refuses too, while inside a call
    caller.join(5.0)
    assert done.is_set()  # and its call was answered


def test_a_full_tree_refuses_a_new_conversation(rt):
    squeeze(rt, 1)
    with pytest.raises(ResourceError) as refused:
        rt.open_run("c9")
    assert refused.value.code == ErrorCode.CAPACITY and "run:c9" in refused.value.message


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({}, "memory_pressure takes budget="),
        ({"budget": 0.5, "count": 2}, "got \\['budget', 'count'\\]"),
        ({"budget": 2.0}, "fraction must be <= 1"),
        ({"budget": "half"}, "got 'half'"),
    ],
)
def test_memory_pressure_arguments(rt, args, error):
    with pytest.raises(ValueError, match=error):
        rt.inject("memory_pressure", **args)


def test_a_bad_budget_fails_the_start(runtime_factory):
    from tether.runtime import RuntimeStartError

    with pytest.raises(RuntimeStartError, match="memory_budget must be bytes .* got 1.5"):
        runtime_factory(kinds=ECHO_KINDS, memory_budget=1.5)


def test_taking_back_the_spares_keeps_the_kernels_the_pool_handed_over(runtime_factory, tmp_path):
    # regression (benchmarks/capacity.py): evicting the pool stopped its actor, and the
    # kernel it had handed to a conversation died with it (its parent), state and all
    from tether.actors.kernel import kinds

    rt = runtime_factory(kinds=kinds(spares=1))
    run = rt.open_run("p1", workdir=tmp_path)
    what = "keep a number in the kernel state"
    assert not run.call("eval", {"code": "kept = 5", "description": what}).is_error

    def pool() -> dict:
        return (health_node(rt.health(), "kernel_pool:python") or {}).get("extra", {})

    wait_until(lambda: pool().get("ready") == 1, timeout=30.0)  # the replacement spare
    assert rt._evict("kernel_pool:python", "a test")
    wait_until(lambda: pool().get("ready") == 0 and pool().get("starting") == 0, timeout=5.0)
    assert run.call("eval", {"code": "kept", "description": what}).text.strip() == "5"
