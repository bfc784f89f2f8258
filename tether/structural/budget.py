"""What one search may spend: wall time and matcher steps, and how it is stopped.

A pattern with several `$$$` against a long list, or code nested thousands of levels, can
make one search cost far more than its peers; the budget turns that into a clear error
naming what to narrow, instead of a parser slot busy for minutes. `cancel()` stops it at
the next step (the caller gave up, the run closed).

`pause`, when set, is called at every check (a few thousand steps, about a millisecond
apart): the parser slot's scheduler uses it to serve other work in the middle of one long
candidate, which the search's generator cannot yield out of.
"""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_SECONDS = 30.0
DEFAULT_STEPS = 50_000_000
# One candidate node may take this many steps (about 0.05 s, more on a loaded machine): a
# pattern that needs more is better made more specific, and the error says where.
DEFAULT_NODE_STEPS = 100_000
_CHECK_EVERY = 4096  # steps between clock reads (a read costs more than a step)


class BudgetExceeded(Exception):
    """The search spent its budget or was cancelled; the message says what to narrow."""


class Budget:
    def __init__(
        self,
        seconds: float = DEFAULT_SECONDS,
        steps: int = DEFAULT_STEPS,
        node_steps: int = DEFAULT_NODE_STEPS,
    ):
        self.seconds = seconds
        self.max_steps = steps
        self.max_node_steps = node_steps
        self.started = time.monotonic()
        self.steps = 0
        self.where = ""  # the file being searched, for the message
        self.line = 0  # the candidate being matched (1-based line), for the message
        self.cancelled = ""
        self._node_start = 0
        self._next_check = 0
        self.pause: Callable[[], None] | None = None

    def step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps >= self._next_check:
            self.check()

    def begin_node(self, line: int) -> None:
        """A new candidate root: its own step allowance starts now."""
        self.line = line
        self._node_start = self.steps
        self._next_check = min(self._next_check, self.steps + self.max_node_steps + 1)

    def check(self) -> None:
        if self.pause is not None:
            self.pause()
        if self.cancelled:
            raise BudgetExceeded(f"the search was cancelled ({self.cancelled}).")
        if self.steps > self.max_steps:
            raise BudgetExceeded(self._message(f"{self.max_steps:,} matching steps"))
        if self.steps - self._node_start > self.max_node_steps:
            raise BudgetExceeded(self._node_message())
        if time.monotonic() - self.started > self.seconds:
            raise BudgetExceeded(self._message(f"{self.seconds:g} s"))
        self._next_check = min(
            self.steps + _CHECK_EVERY,
            self.max_steps + 1,
            self._node_start + self.max_node_steps + 1,
        )

    def cancel(self, reason: str) -> None:
        self.cancelled = reason
        self._next_check = 0

    def _message(self, spent: str) -> str:
        where = f" (it was in {self.where})" if self.where else ""
        return (
            f"the search stopped after {spent}, its budget{where}, and found no complete "
            f"answer. Narrow it: pass a smaller `path`, or make the pattern more specific "
            f"(fewer `$$$` runs side by side, more literal code such as a function name)."
        )

    def _node_message(self) -> str:
        at = f" at {self.where}:{self.line}" if self.where else f" at line {self.line}"
        return (
            f"the search stopped: matching one piece of code{at} took more than "
            f"{self.max_node_steps:,} steps (the pattern's `$$$` runs can split a long list "
            f"too many ways). Make the pattern more specific (fewer `$$$` side by side, "
            f"literal code between them), or exclude that file with a narrower `path`."
        )


def unlimited() -> Budget:
    """A budget that never runs out (in-process helpers and tests of other things)."""
    return Budget(seconds=float("inf"), steps=2**62, node_steps=2**62)
