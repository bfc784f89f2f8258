"""The usage record every health node carries (tether.capacity.usage), against a real tree."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import health_node, wait_until
from tether.actors.echo import KINDS as ECHO_KINDS
from tether.capacity import usage
from tether.capacity.usage import (
    KIND_TRAITS,
    MIB,
    KindTraits,
    UsageRecord,
    by_kind,
    pss_bytes,
    records,
    traits_of,
)
from tether.kinds import ChildSpec, KindSpec, Restart, Scope

# a run-scoped kind that holds a conversation's state, as a kernel does
STATEFUL = KindSpec(
    "memo",
    "tether.actors.echo:EchoProcessActor",
    Scope.RUN,
    ChildSpec(Restart.TRANSIENT),
    config={"capacity": {"holds_state": True, "expected_mb": 12}},
)


@pytest.mark.parametrize(
    ("kind", "config", "holds_state", "spare", "evictable", "expected"),
    [
        ("kernel", None, True, False, True, KIND_TRAITS["kernel"].expected_bytes),
        ("debug_session", None, True, False, True, KIND_TRAITS["debug_session"].expected_bytes),
        ("language_server", None, False, False, True, 200 * MIB),
        ("kernel_pool", None, False, True, True, KIND_TRAITS["kernel_pool"].expected_bytes),
        ("vibe_worker", None, False, False, False, KIND_TRAITS["vibe_worker"].expected_bytes),
        ("echo", {"capacity": {"expected_mb": 3, "holds_state": True}}, True, False, True, 3 * MIB),
    ],
)
def test_traits(kind, config, holds_state, spare, evictable, expected):
    traits = traits_of(kind, config)
    assert (traits.holds_state, traits.spare, traits.evictable) == (holds_state, spare, evictable)
    assert traits.expected_bytes == expected


def test_a_bad_capacity_setting_is_named():
    with pytest.raises(ValueError, match="unknown capacity setting.*size_mb.*known: evictable"):
        traits_of("echo", {"capacity": {"size_mb": 3}})
    with pytest.raises(ValueError, match="expected_bytes must be an int >= 0, got -1"):
        KindTraits(-1)


def test_wire_round_trip_and_run_id():
    rec = UsageRecord("run:c1/kernel:python", "kernel", 5, 1.5, True, False)
    assert UsageRecord.from_wire(rec.to_wire()) == rec
    assert rec.run_id == "c1"
    assert UsageRecord("language_server:x:/r", "language_server", 1, 0, False, False).run_id == ""


def test_a_steady_process_is_read_once_a_period_and_the_others_at_every_call(monkeypatch):
    reads: list[int] = []
    real = usage._pss
    monkeypatch.setattr(usage, "_pss", lambda proc: reads.append(proc.pid) or real(proc))
    monkeypatch.setattr(usage, "_steady", {})
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        me, other = os.getpid(), child.pid
        first = pss_bytes([me, other], steady=[me])
        second = pss_bytes([me, other], steady=[me])
        assert reads == [me, other, other] and first > 5 * MIB and second > 5 * MIB
        monkeypatch.setattr(usage, "STEADY_PERIOD", 0.0)  # (its period is over: read again)
        pss_bytes([me], steady=[me])
        assert reads == [me, other, other, me]
    finally:
        child.kill()
        child.wait()


def test_every_node_of_a_real_tree_carries_one(runtime_factory):
    rt = runtime_factory(kinds=[*ECHO_KINDS, STATEFUL])
    rt._open_run_actor("c1")  # (the RunActor alone: no tools needed here)
    before = time.monotonic()
    rt.call("", "echo_process", "k", "echo", {"x": 1})
    rt.call("c1", "memo", "m", "echo", {"x": 2})
    tree = rt.health()
    found = {r.name: r for r in records(tree)}
    shared = found["echo_process:k"]
    assert shared.bytes > 2 * MIB  # the actor process and its python subprocess
    assert shared.last_use >= before and not shared.busy and not shared.holds_state
    memo = found["run:c1/memo:m"]
    assert memo.holds_state and memo.run_id == "c1" and memo.evictable
    assert not found["root"].evictable and not found["runs"].evictable
    totals = by_kind(found.values())
    assert totals["tree"] > 0 and totals["echo_process"] == shared.bytes


def test_busy_while_a_call_is_in_flight(runtime_factory):
    rt = runtime_factory(kinds=ECHO_KINDS)
    rt.call("", "echo", "slow", "echo", {})
    done = threading.Event()
    caller = threading.Thread(
        target=lambda: (rt.call("", "echo", "slow", "sleep", {"seconds": 1.5}), done.set())
    )
    caller.start()
    busy = wait_until(
        lambda: (health_node(rt.health(), "echo:slow") or {}).get("usage", {}).get("busy"),
        timeout=3.0,
    )
    assert busy is True
    caller.join(5.0)
    assert done.is_set()
    usage = health_node(rt.health(), "echo:slow")["usage"]
    assert usage["busy"] is False
