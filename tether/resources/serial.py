"""`SerialRuns`: one run at a time of a subprocess that answers a batch of calls.

The checker (`tether.actors.checker`) and git (`tether.actors.git`) actors are the same
machine: a call asks for a run of a program over a project; while one runs, the calls that
arrive wait and are answered together by the next run (which sees every write made before
they were sent), so a burst of calls costs two runs, not one each. A run's output is kept
up to a bound (past it the run is stopped: a runaway must not fill the actor's memory),
and a run has a number, so that a timer armed for an earlier run is recognised and
ignored. What a run is, and how its output becomes replies, stays with each actor; this
is the bookkeeping they share, with no actor or process in it (tested with plain calls in
tests/resources/test_serial.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from tether.json_types import JSONObject
from tether.messages.calls import Call


@dataclass(frozen=True)
class RunDeadline:
    """Timer tag: run `run_no` has had its time."""

    run_no: int


@dataclass(frozen=True)
class CallersCheck:
    """Timer tag: does run `run_no` still have a caller waiting?"""

    run_no: int


class SerialRuns:
    """The batch a run answers, the batch waiting for the next, and the run's output.

    `start` is called with `running` set to a fresh, non-empty batch; the actor starts its
    run there (or settles the batch at once: nothing to run). When the run ended, the
    actor takes the batch with `finish()`, answers it, and calls `next()`.
    """

    def __init__(self, start: Callable[[], None], max_output: int) -> None:
        self._start = start
        self.max_output = max_output
        self.running: list[Call] = []  # the calls the current run answers
        self.waiting: list[Call] = []  # the calls the next run answers
        self.run_no = 0
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        self.size = 0

    def add(self, call: Call) -> None:
        """`call` is answered by the next run, which starts now if none is going."""
        self.waiting.append(call)
        if not self.running:
            self.next()

    def next(self) -> None:
        """Start the next run, if a call waits for one (and none is going)."""
        if not self.running and self.waiting:
            self.running, self.waiting = self.waiting, []
            self._start()

    def begin(self) -> int:
        """A process of this run is about to start: its number, the output emptied."""
        self.run_no += 1
        self.restart_output()
        return self.run_no

    def restart_output(self) -> None:
        """Forget the output so far (a run of several steps keeps only its last's)."""
        self.out, self.err, self.size = [], [], 0

    def keep(self, stream: Literal["out", "err"], data: bytes) -> bool:
        """Keep `data` of the run's stdout or stderr; False (and nothing kept) once the
        run has printed more than `max_output` bytes: the actor stops it then."""
        self.size += len(data)
        if self.over():
            return False
        (self.out if stream == "out" else self.err).append(data)
        return True

    def over(self) -> bool:
        return self.size > self.max_output

    def finish(self) -> list[Call]:
        """The batch the run answers (to settle now); no run is going any more."""
        batch, self.running = self.running, []
        return batch

    def is_current(self, tag: RunDeadline | CallersCheck) -> bool:
        """Is the timer `tag` about the run going now (not an earlier one)?"""
        return bool(self.running) and tag.run_no == self.run_no

    def callers_left(self, open_calls: Iterable[Call]) -> bool:
        """Does a call of the running batch still wait (`open_calls`: the actor's)?"""
        waiting = {call.call_id for call in open_calls}
        return any(call.call_id in waiting for call in self.running)

    def health(self) -> JSONObject:
        return {"waiting": len(self.waiting), "runs": self.run_no}
