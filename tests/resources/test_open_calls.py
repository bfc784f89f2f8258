"""tether.resources.open_calls: each call settled once, the queue, cancels ahead, expiry."""

from __future__ import annotations

from tether.messages.calls import Call
from tether.resources.open_calls import CANCELS_KEPT, OpenCalls


def _call(n: int, deadline: float = 0.0) -> Call:
    return Call(f"c{n}", "run", "echo", "k", "echo", deadline=deadline)


def test_a_call_is_settled_once_and_its_reply_goes_where_it_came_from() -> None:
    t = OpenCalls()
    t.enter(_call(1), "peer-1")
    assert "c1" in t and t.get("c1") == _call(1) and t.pending == 1 and t.busy
    assert t.settle("c1") == (_call(1), "peer-1")
    assert t.settle("c1") is None and "c1" not in t and not t.busy  # the second is dropped


def test_queued_calls_wait_in_order_and_a_cancel_takes_one_out() -> None:
    t = OpenCalls()
    for n in (1, 2, 3):
        t.queue(_call(n), f"peer-{n}")
    assert t.busy and t.pending == 3 and t.calls() == []
    assert t.unqueue("c2") and not t.unqueue("c2")
    assert [c.call_id for c, _ in t.take_queued()] == ["c1", "c3"] and t.queued == []


def test_a_cancel_ahead_of_its_call_is_kept_once_and_bounded() -> None:
    t = OpenCalls()
    t.cancel_ahead("c1", "gave up")
    assert t.cancelled_ahead("c1") == "gave up" and t.cancelled_ahead("c1") is None
    for n in range(CANCELS_KEPT + 5):
        t.cancel_ahead(f"x{n}", "why")
    assert t.cancelled_ahead("x0") is None  # the oldest went first
    assert t.cancelled_ahead(f"x{CANCELS_KEPT + 4}") == "why"


def test_expired_names_open_calls_past_their_deadline_and_drops_queued_ones() -> None:
    t = OpenCalls()
    t.enter(_call(1, deadline=10.0), "a")
    t.enter(_call(2, deadline=30.0), "b")
    t.enter(_call(3), "c")  # no deadline: never expires
    t.queue(_call(4, deadline=10.0), "d")
    t.queue(_call(5, deadline=30.0), "e")
    assert [c.call_id for c in t.expired(20.0)] == ["c1"]
    assert "c1" in t  # (the actor fails it: that settles it)
    assert [c.call_id for c, _ in t.queued] == ["c5"] and t.pending == 4
