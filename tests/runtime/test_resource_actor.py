"""tether.actors.base.ResourceActor in-process: its glue over the parts of tether.resources,
with thespian's send and wakeupAfter recorded instead of sent (no actor system; the tree
itself is tests/runtime/test_supervision.py's)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tether.actors import actor as actor_module
from tether.actors.base import ResourceActor
from tether.messages.calls import Call, ErrorCode, Reply
from tether.messages.codec import decode
from tether.messages.control import CancelCall, Inject
from tether.resources.timers import Delayed, Sweep


class Holder(ResourceActor):
    """Answers "now" calls at once and holds the others open; records cancels."""

    myAddress = "holder-address"  # noqa: N815 (thespian's property, without a system)

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[Any, Any]] = []
        self.timers: list[tuple[float, Any]] = []
        self.cancels: list[tuple[str, str]] = []
        self.name, self.kind, self.key = "holder:k", "holder", "k"

    def send(self, target: Any, msg: Any) -> None:  # (thespian's, recorded)
        self.sent.append((target, decode(msg) if isinstance(msg, bytes) else msg))

    def wakeupAfter(self, seconds: float, payload: Any = None) -> None:  # noqa: N802
        self.timers.append((seconds, payload))

    def on_call(self, call: Call) -> None:
        if call.op == "now":
            self.reply(call, {"notes": [], "n": call.args.get("n", 0)})

    def on_cancel(self, call: Call, reason: str) -> None:
        self.cancels.append((call.call_id, reason))

    def replies(self) -> list[Reply]:
        return [msg for _, msg in self.sent if isinstance(msg, Reply)]


@pytest.fixture
def holder(monkeypatch: pytest.MonkeyPatch) -> Holder:
    # (an actor's constructor ties its process to its parent's life: not this test's)
    monkeypatch.setattr(actor_module, "die_with_parent", lambda sig: None)
    monkeypatch.setattr(actor_module.gc, "freeze", lambda: None)
    return Holder()


def _ready(a: Holder) -> Holder:
    a._life.started = True
    a.set_state("ready")
    return a


def _call(n: int, op: str = "now", deadline: float = 0.0) -> Call:
    return Call(f"c{n}", "r", "holder", "k", op, {"n": n}, deadline=deadline)


def test_calls_before_the_start_wait_and_go_in_order_once_ready(holder: Holder) -> None:
    holder._receive_call(_call(1), "host")
    holder._receive_call(_call(2), "host")
    assert holder.replies() == [] and holder.health_node()["pending"] == 2
    _ready(holder)
    assert [r.payload["n"] for r in holder.replies()] == [1, 2]


def test_a_call_is_answered_once(holder: Holder) -> None:
    _ready(holder)._receive_call(_call(1, op="hold"), "host")
    holder.reply(_call(1), {"first": True})
    holder.fail(_call(1), ErrorCode.FAILED, "second")
    assert [r.payload for r in holder.replies()] == [{"first": True}]


def test_a_stopping_actor_moves_a_new_call_to_the_next_incarnation(holder: Holder) -> None:
    _ready(holder).stop("shutdown", "reaped")
    holder._receive_call(_call(1), "host")
    [reply] = holder.replies()
    assert (reply.error, reply.payload["started"]) == (ErrorCode.MOVED, False)
    assert "holder:k is stopping (reaped); call again" in reply.message


def test_a_failed_start_fails_every_call_with_its_error(holder: Holder) -> None:
    holder._receive_call(_call(1), "host")  # (queued for the start)
    holder._start_failed("no binary here", unavailable=True)
    holder._receive_call(_call(2), "host")
    assert [(r.error, r.message) for r in holder.replies()] == [
        (ErrorCode.UNAVAILABLE, "no binary here"),
        (ErrorCode.UNAVAILABLE, "no binary here"),
    ]


def test_injected_delay_and_drop_reply(holder: Holder) -> None:
    _ready(holder)._inject(Inject("i1", "delay", "holder:k", {"seconds": 2.0}), "tester")
    holder._inject(Inject("i2", "drop_reply", "holder:k"), "tester")
    assert [r.ok for r in holder.replies()] == [True, True]
    holder._receive_call(_call(1), "host")
    assert (2.0, Delayed("c1")) in holder.timers and len(holder.replies()) == 2
    holder.handle_wakeup(Delayed("c1"))  # delivered now; its reply is the one dropped
    holder._receive_call(_call(2), "host")
    assert [r.call_id for r in holder.replies()] == ["i1", "i2", "c2"]


def test_an_unknown_fault_is_refused_saying_so(holder: Holder) -> None:
    _ready(holder)._inject(Inject("i1", "melt", "holder:k"), "tester")
    [reply] = holder.replies()
    assert (reply.error, reply.message) == (
        ErrorCode.BAD_REQUEST,
        "holder:k does not handle fault 'melt'",
    )


def test_a_cancel_that_overtook_its_call_reaches_it_after_on_call(holder: Holder) -> None:
    _ready(holder)._cancel(CancelCall("c1", "gave up"))
    holder._receive_call(_call(1, op="hold"), "host")
    assert holder.cancels == [("c1", "gave up")]
    holder._receive_call(_call(2, op="hold"), "host")  # (no cancel for this one)
    assert holder.cancels == [("c1", "gave up")]


def test_an_open_call_past_its_deadline_fails_at_the_sweep(holder: Holder) -> None:
    _ready(holder)._receive_call(_call(1, op="hold", deadline=time.monotonic() - 1), "host")
    assert (0.5, Sweep()) in holder.timers
    holder.handle_wakeup(Sweep())
    [reply] = holder.replies()
    assert (reply.error, reply.message) == (
        ErrorCode.DEADLINE,
        "holder:k did not answer 'hold' before its deadline",
    )
    assert holder.health_node()["pending"] == 0


def test_an_exception_in_on_call_fails_that_call_only(holder: Holder) -> None:
    def boom(call: Call) -> None:
        raise ValueError("bad input")

    _ready(holder).on_call = boom  # type: ignore[method-assign]
    holder._receive_call(_call(1), "host")
    [reply] = holder.replies()
    assert reply.error == ErrorCode.FAILED
    assert reply.message == "holder:k failed on 'now': ValueError: bad input"
    assert holder.state == "ready"
