"""The restart decision, as pure functions: what to do when a child stops, and when to give up.

Erlang's supervisor keeps every restart decision in one place (restart type x exit
reason) and restart intensity in a few lines over a monotonic clock. So do we:

    decide(spec, reason)                 -> Decision.RESTART | FORGET | ESCALATE
    within_intensity(times, now, spec)   -> may we restart once more?
    backoff(spec, restarts_in_period)    -> seconds to wait before that restart
    call_outcome_when_gone(call, ...)    -> drop | retry | error, for a call in flight

ESCALATE means "this child must not be restarted and that is an error": the supervisor
gives up on it, keeps it in the tree as failed, and says why in health.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from tether.kinds import ChildSpec, Restart
from tether.messages.calls import Call, ErrorCode


class ExitReason(enum.Enum):
    NORMAL = "normal"  # the child stopped on its own, cleanly (its work was done)
    SHUTDOWN = "shutdown"  # the supervisor stopped it: TTL, idle reaping, run closed, shutdown
    CRASH = "crash"  # it died: actor process killed, its subprocess died, an exception
    UNAVAILABLE = (
        "unavailable"  # it cannot start here (binary or marker missing): retrying won't help
    )


class Decision(enum.Enum):
    RESTART = "restart"
    FORGET = "forget"  # drop it; the next call starts a fresh one
    ESCALATE = "escalate"  # do not restart and report failure


def decide(spec: ChildSpec, reason: ExitReason) -> Decision:
    """Restart type x exit reason (OTP semantics, plus UNAVAILABLE)."""
    match (spec.restart, reason):
        case (_, ExitReason.SHUTDOWN):
            return Decision.FORGET
        case (_, ExitReason.UNAVAILABLE):
            return Decision.ESCALATE
        case (Restart.TEMPORARY, _):
            return Decision.FORGET
        case (Restart.TRANSIENT, ExitReason.NORMAL):
            return Decision.FORGET
        case (Restart.TRANSIENT, ExitReason.CRASH):
            return Decision.RESTART
        case (Restart.PERMANENT, _):
            return Decision.RESTART
    raise AssertionError(f"unhandled restart case {spec.restart!r} x {reason!r}")


def within_intensity(restart_times: Sequence[float], now: float, spec: ChildSpec) -> bool:
    """True if one more restart keeps us within max_restarts in the last `period` seconds."""
    recent = [t for t in restart_times if now - t < spec.period]
    return len(recent) < spec.max_restarts


def recent_restarts(restart_times: Sequence[float], now: float, spec: ChildSpec) -> list[float]:
    return [t for t in restart_times if now - t < spec.period]


def backoff(spec: ChildSpec, restarts_in_period: int) -> float:
    """Delay before the next restart: backoff_initial * 2**n, capped at backoff_max."""
    return min(spec.backoff_initial * (2 ** max(restarts_in_period, 0)), spec.backoff_max)


def call_outcome_when_gone(
    call: Call, retried: bool, reason: str, error: str, now: float
) -> tuple[str, str, str]:
    """What becomes of `call`, in flight when the incarnation serving it went away for
    `reason` (an ExitReason value). One rule for both routers (the host for shared kinds,
    the RunActor for run kinds):
    ("drop", "", "") past its deadline (the caller has given up); ("retry", "", "") once
    for an idempotent call; otherwise ("error", code, message) for the caller."""
    if call.deadline and call.deadline < now:
        return ("drop", "", "")
    if reason == ExitReason.UNAVAILABLE.value:
        return ("error", ErrorCode.UNAVAILABLE, error)
    if call.idempotent and not retried:
        return ("retry", "", "")
    return (
        "error",
        ErrorCode.RESOURCE_DIED,
        f"{_name(call)} went away while handling {call.op!r} "
        f"({reason}{': ' + error if error else ''}); it is restarted on the next call — "
        "call again",
    )


def _name(call: Call) -> str:
    """The resource's name as health shows it."""
    name = f"{call.kind}:{call.key}"
    return f"run:{call.run_id}/{name}" if call.run_scoped else name
