"""What one search may spend: wall time and matcher steps, and how it is stopped.

A pattern with several `$$$` against a long list, or code nested thousands of levels, can
make one search cost far more than its peers; the budget turns that into a clear error
naming what to narrow, instead of a parser slot busy for minutes. `cancel()` stops it at
the next step (the caller gave up, the run closed).
"""

from __future__ import annotations

import time

DEFAULT_SECONDS = 30.0
DEFAULT_STEPS = 50_000_000
_CHECK_EVERY = 4096  # steps between clock reads (a read costs more than a step)


class BudgetExceeded(Exception):
    """The search spent its budget or was cancelled; the message says what to narrow."""


class Budget:
    def __init__(self, seconds: float = DEFAULT_SECONDS, steps: int = DEFAULT_STEPS):
        self.seconds = seconds
        self.max_steps = steps
        self.started = time.monotonic()
        self.steps = 0
        self.where = ""  # the file being searched, for the message
        self.cancelled = ""

    def step(self, n: int = 1) -> None:
        before = self.steps
        self.steps = before + n
        if self.steps // _CHECK_EVERY != before // _CHECK_EVERY or self.steps > self.max_steps:
            self.check()

    def check(self) -> None:
        if self.cancelled:
            raise BudgetExceeded(f"the search was cancelled ({self.cancelled}).")
        if self.steps > self.max_steps:
            raise BudgetExceeded(self._message(f"{self.max_steps:,} matching steps"))
        if time.monotonic() - self.started > self.seconds:
            raise BudgetExceeded(self._message(f"{self.seconds:g} s"))

    def cancel(self, reason: str) -> None:
        self.cancelled = reason

    def _message(self, spent: str) -> str:
        where = f" (it was in {self.where})" if self.where else ""
        return (
            f"the search stopped after {spent}, its budget{where}, and found no complete "
            f"answer. Narrow it: pass a smaller `path`, or make the pattern more specific "
            f"(fewer `$$$` runs side by side, more literal code such as a function name)."
        )


def unlimited() -> Budget:
    """A budget that never runs out (in-process helpers and tests of other things)."""
    return Budget(seconds=float("inf"), steps=2**62)
