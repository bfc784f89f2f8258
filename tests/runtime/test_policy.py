"""The restart decision as a table, intensity, backoff, and spec validation errors."""

from __future__ import annotations

import pytest

from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import Call, ErrorCode
from tether.supervisors.policy import (
    Decision,
    ExitReason,
    GoneAction,
    backoff,
    call_outcome_when_gone,
    decide,
    within_intensity,
)

P, T, TMP = Restart.PERMANENT, Restart.TRANSIENT, Restart.TEMPORARY
N, S, C, U = ExitReason.NORMAL, ExitReason.SHUTDOWN, ExitReason.CRASH, ExitReason.UNAVAILABLE


@pytest.mark.parametrize(
    "restart, reason, decision",
    [
        (P, N, Decision.RESTART),
        (P, C, Decision.RESTART),
        (P, S, Decision.FORGET),
        (P, U, Decision.ESCALATE),
        (T, N, Decision.FORGET),
        (T, C, Decision.RESTART),
        (T, S, Decision.FORGET),
        (T, U, Decision.ESCALATE),
        (TMP, N, Decision.FORGET),
        (TMP, C, Decision.FORGET),
        (TMP, S, Decision.FORGET),
        (TMP, U, Decision.ESCALATE),
    ],
)
def test_decide(restart: Restart, reason: ExitReason, decision: Decision) -> None:
    assert decide(ChildSpec(restart), reason) is decision


SPEC = ChildSpec(max_restarts=3, period=10.0)


@pytest.mark.parametrize(
    "times, now, ok",
    [
        ([], 100.0, True),
        ([95.0, 96.0], 100.0, True),
        ([95.0, 96.0, 97.0], 100.0, False),
        ([85.0, 96.0, 97.0], 100.0, True),  # the first one left the window
        ([90.0, 90.5, 91.0], 100.0, True),  # exactly `period` ago no longer counts
    ],
)
def test_within_intensity(times: list[float], now: float, ok: bool) -> None:
    assert within_intensity(times, now, SPEC) is ok


def test_zero_restarts_means_never() -> None:
    assert within_intensity([], 0.0, ChildSpec(max_restarts=0)) is False


@pytest.mark.parametrize("n, delay", [(0, 0.1), (1, 0.2), (2, 0.4), (5, 3.2), (6, 5.0), (60, 5.0)])
def test_backoff(n: int, delay: float) -> None:
    assert backoff(ChildSpec(), n) == pytest.approx(delay)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"restart": "permanent"}, "ChildSpec.restart must be a Restart"),
        ({"max_restarts": -1}, "ChildSpec.max_restarts must be an int >= 0, got -1"),
        ({"period": 0}, "ChildSpec.period must be a positive number of seconds, got 0"),
        ({"ttl": -5}, "ChildSpec.ttl must be a positive number of seconds, got -5"),
        ({"idle_ttl": "10"}, "ChildSpec.idle_ttl must be a positive number of seconds, got '10'"),
        (
            {"backoff_initial": 2.0, "backoff_max": 1.0},
            "backoff_max (1.0) must be >= backoff_initial",
        ),
    ],
)
def test_child_spec_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ChildSpec(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kind": "", "actor_class": "m:C"}, "KindSpec.kind must be a non-empty identifier"),
        ({"kind": "a b", "actor_class": "m:C"}, "KindSpec.kind must be a non-empty identifier"),
        (
            {"kind": "k", "actor_class": "m.C"},
            "KindSpec.actor_class must be 'module.path:ClassName'",
        ),
        ({"kind": "k", "actor_class": "m:C", "scope": "shared"}, "KindSpec.scope must be Scope"),
        (
            {"kind": "k", "actor_class": "m:C", "config": {"keys": "abc"}},
            "config\\['keys'\\] must be a list of str",
        ),
    ],
)
def test_kind_spec_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KindSpec(**kwargs)


def test_specs_round_trip_their_wire_form() -> None:
    spec = KindSpec("k", "m:C", Scope.RUN, ChildSpec(Restart.PERMANENT, ttl=3.0), {"keys": ["a"]})
    assert KindSpec.from_wire(spec.to_wire()) == spec


def _call(deadline: float = 0.0, idempotent: bool = False) -> Call:
    return Call("c1", "r", "echo", "k", "echo", deadline=deadline, idempotent=idempotent)


@pytest.mark.parametrize(
    "call, retried, reason, action, code",
    [
        (_call(deadline=1.0), False, "crash", GoneAction.DROP, None),  # the caller gave up
        (_call(), False, "unavailable", GoneAction.ERROR, ErrorCode.UNAVAILABLE),
        (_call(idempotent=True), False, "crash", GoneAction.RETRY, None),
        (_call(idempotent=True), True, "crash", GoneAction.ERROR, ErrorCode.RESOURCE_DIED),
        (_call(), False, "crash", GoneAction.ERROR, ErrorCode.RESOURCE_DIED),
    ],
)
def test_call_outcome_when_gone(call, retried, reason, action, code):
    outcome = call_outcome_when_gone(call, retried, reason, "boom", now=2.0)
    assert (outcome.action, outcome.code) == (action, code)
    if code is ErrorCode.RESOURCE_DIED:
        assert "echo:k went away while handling 'echo' (crash: boom)" in outcome.message
