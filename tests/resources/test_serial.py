"""tether.resources.serial: one run at a time, batches, bounded output, run numbers (no actor,
no process: the bookkeeping the checker and git actors share, fed plain calls)."""

from __future__ import annotations

from tether.messages.calls import Call
from tether.resources.serial import CallersCheck, RunDeadline, SerialRuns


def _call(n: int) -> Call:
    return Call(f"c{n}", "run", "git", "/root", "list_files")


class _Actor:
    """Starts a 'run' each time the runner asks, and records the batch it answers."""

    def __init__(self, max_output: int = 10) -> None:
        self.runs = SerialRuns(self.start, max_output)
        self.started: list[list[str]] = []

    def start(self) -> None:
        self.runs.begin()
        self.started.append([c.call_id for c in self.runs.running])


def test_calls_arriving_during_a_run_are_answered_together_by_the_next() -> None:
    a = _Actor()
    a.runs.add(_call(1))
    a.runs.add(_call(2))
    a.runs.add(_call(3))
    assert a.started == [["c1"]] and [c.call_id for c in a.runs.waiting] == ["c2", "c3"]
    assert [c.call_id for c in a.runs.finish()] == ["c1"] and a.runs.running == []
    a.runs.next()
    assert a.started == [["c1"], ["c2", "c3"]] and a.runs.run_no == 2
    a.runs.finish()
    a.runs.next()  # nothing waits: no run
    assert len(a.started) == 2 and a.runs.health() == {"waiting": 0, "runs": 2}


def test_a_run_settled_at_once_lets_the_next_call_start_one() -> None:
    a = _Actor()
    a.runs = SerialRuns(lambda: a.started.append([c.call_id for c in a.runs.finish()]), 10)
    a.runs.add(_call(1))
    a.runs.add(_call(2))
    assert a.started == [["c1"], ["c2"]]


def test_output_is_kept_up_to_its_bound_then_refused() -> None:
    a = _Actor(max_output=6)
    a.runs.add(_call(1))
    assert a.runs.keep("out", b"abc") and a.runs.keep("err", b"de")
    assert not a.runs.keep("out", b"fg") and a.runs.over()
    assert (a.runs.out, a.runs.err, a.runs.size) == ([b"abc"], [b"de"], 7)
    a.runs.restart_output()
    assert (a.runs.out, a.runs.err, a.runs.size, a.runs.over()) == ([], [], 0, False)


def test_a_timer_of_an_earlier_run_is_not_current() -> None:
    a = _Actor()
    a.runs.add(_call(1))
    assert a.runs.is_current(RunDeadline(1)) and a.runs.is_current(CallersCheck(1))
    a.runs.add(_call(2))
    a.runs.finish()
    assert not a.runs.is_current(RunDeadline(1))  # no run going
    a.runs.next()
    assert not a.runs.is_current(RunDeadline(1)) and a.runs.is_current(RunDeadline(2))


def test_callers_left_is_whether_a_call_of_the_running_batch_is_still_open() -> None:
    a = _Actor()
    a.runs.add(_call(1))
    a.runs.add(_call(2))  # waits for the next run: not the running batch's
    assert a.runs.callers_left([_call(1), _call(2)])
    assert not a.runs.callers_left([_call(2)])
    assert not a.runs.callers_left([])
