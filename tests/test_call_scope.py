"""tether.call_scope: one-shot cancel from any thread, callbacks, deadlines clamped."""

from __future__ import annotations

import threading
import time

import pytest

from tether.call_scope import CallScope, CancelHandle


def test_cancel_is_one_shot_and_keeps_the_first_reason() -> None:
    handle = CancelHandle()
    assert not handle.cancelled
    assert handle.cancel("first") and not handle.cancel("second")
    assert handle.cancelled and handle.reason == "first"


def test_callbacks_run_once_on_cancel_and_at_once_when_late() -> None:
    handle, seen = CancelHandle(), []
    unregister = handle.on_cancel(seen.append)
    dropped = handle.on_cancel(lambda r: seen.append("dropped"))
    dropped_unregister = dropped
    dropped_unregister()
    handle.cancel("why")
    handle.on_cancel(lambda r: seen.append("late:" + r))
    unregister()  # (after the fact: harmless)
    assert seen == ["why", "late:why"]


def test_wait_returns_when_another_thread_cancels() -> None:
    handle = CancelHandle()
    threading.Timer(0.05, handle.cancel).start()
    assert handle.wait(5.0)


def test_clamp_shortens_to_the_deadline_and_never_below_zero() -> None:
    scope = CallScope.start(timeout=0.5, call_id="c1")
    assert scope.call_id == "c1"
    assert 0 < scope.clamp(30) <= 0.5 and scope.clamp(0.1) == 0.1
    assert CallScope.start().clamp(30) == 30 and CallScope.start().remaining() is None
    past = CallScope(call_id="c2", deadline=time.monotonic() - 1)
    assert past.clamp(30) == 0.0


@pytest.mark.parametrize("bad", [0, -1.0])
def test_a_timeout_that_is_not_positive_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        CallScope.start(timeout=bad)


def test_ids_are_unique_when_not_given() -> None:
    assert CallScope.start().call_id != CallScope.start().call_id
