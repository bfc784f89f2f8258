"""tether.resources.faults: injected delays and dropped replies, counted down."""

from __future__ import annotations

import pytest

from tether.resources.faults import Faults


@pytest.mark.parametrize(
    "fault, args, said",
    [
        ("delay", {}, "the next 1 call(s) to echo:k wait 1 s"),
        ("delay", {"seconds": 0.25, "count": 2}, "the next 2 call(s) to echo:k wait 0.25 s"),
        ("drop_reply", {"count": 3}, "the next 3 reply(ies) of echo:k will be dropped"),
        ("kill_process", {}, None),
        ("no_such_fault", {}, None),
    ],
)
def test_plan_says_what_will_happen_or_none_for_the_actors_own(
    fault: str, args: dict[str, float], said: str | None
) -> None:
    assert Faults().plan(fault, args, "echo:k") == said


def test_delays_are_one_per_next_call_in_order() -> None:
    f = Faults()
    f.plan("delay", {"seconds": 2, "count": 2}, "a")
    f.plan("delay", {"seconds": 0.5}, "a")
    assert [f.next_delay(), f.next_delay(), f.next_delay(), f.next_delay()] == [2, 2, 0.5, None]


def test_drops_count_down_to_none() -> None:
    f = Faults()
    f.plan("drop_reply", {"count": 2}, "a")
    assert [f.drop(), f.drop(), f.drop()] == [True, True, False]
