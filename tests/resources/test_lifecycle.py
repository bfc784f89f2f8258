"""tether.resources.lifecycle: what a call arriving now gets, and the start's error."""

from __future__ import annotations

import pytest

from tether.messages.calls import ErrorCode
from tether.resources.lifecycle import Admission, Lifecycle


def _life(started: bool = False, stopping: bool = False, failed: bool = False) -> Lifecycle:
    life = Lifecycle()
    life.started, life.stopping = started, stopping
    if failed:
        life.start_failed("echo:k", "no binary", unavailable=True)
    return life


@pytest.mark.parametrize(
    "started, stopping, failed, state, admission",
    [
        (False, False, False, "starting", Admission.QUEUE),
        (True, False, False, "starting", Admission.QUEUE),  # started, not ready yet
        (True, False, False, "ready", Admission.DELIVER),
        (True, False, False, "busy", Admission.DELIVER),
        (True, True, False, "ready", Admission.MOVED),
        (True, False, False, "stopped", Admission.MOVED),
        (False, False, False, "failed", Admission.MOVED),
        (False, False, True, "failed", Admission.FAIL),
    ],
)
def test_admit(
    started: bool, stopping: bool, failed: bool, state: str, admission: Admission
) -> None:
    assert _life(started, stopping, failed).admit(state) is admission


def test_the_start_error_says_unavailable_or_a_crash_by_name() -> None:
    assert _life(failed=True).start_error == (ErrorCode.UNAVAILABLE, "no binary")
    crash = Lifecycle().start_failed("echo:k", "ValueError: x", unavailable=False)
    assert crash == (ErrorCode.RESOURCE_DIED, "echo:k failed to start: ValueError: x")


def test_a_deferred_start_ends_once_and_not_while_stopping() -> None:
    life = Lifecycle()
    assert not life.may_end_deferred()  # nothing deferred
    life.deferred = True
    assert life.may_end_deferred() and not life.may_end_deferred()
    life.deferred, life.stopping = True, True
    assert not life.may_end_deferred()
