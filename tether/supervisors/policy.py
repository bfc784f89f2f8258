"""The restart decision, as pure functions: what to do when a child stops, and when to give up.

Erlang's supervisor keeps every restart decision in one place (restart type x exit
reason) and restart intensity in a few lines over a monotonic clock. So do we:

    decide(spec, reason)                 -> Decision.RESTART | FORGET | ESCALATE
    within_intensity(times, now, spec)   -> may we restart once more?
    backoff(spec, restarts_in_period)    -> seconds to wait before that restart
    call_outcome_when_gone(call, ...)    -> CallOutcome (DROP | RETRY | ERROR), for a call
                                            in flight

ESCALATE means "this child must not be restarted and that is an error": the supervisor
gives up on it, keeps it in the tree as failed, and says why in health.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

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


def recent_restarts(restart_times: Sequence[float], now: float, spec: ChildSpec) -> list[float]:
    """The restarts inside the intensity window: the last `spec.period` seconds (the one
    place that window is computed)."""
    return [t for t in restart_times if now - t < spec.period]


def within_intensity(restart_times: Sequence[float], now: float, spec: ChildSpec) -> bool:
    """True if one more restart keeps us within max_restarts in the last `period` seconds."""
    return len(recent_restarts(restart_times, now, spec)) < spec.max_restarts


def backoff(spec: ChildSpec, restarts_in_period: int) -> float:
    """Delay before the next restart: backoff_initial * 2**n, capped at backoff_max."""
    return min(spec.backoff_initial * (2 ** max(restarts_in_period, 0)), spec.backoff_max)


class GoneAction(enum.Enum):
    DROP = "drop"  # past its deadline: the caller has given up, nobody to tell
    RETRY = "retry"  # idempotent and not retried yet: send it to the next incarnation
    ERROR = "error"  # tell the caller (`code`, `message`)


@dataclass(frozen=True)
class CallOutcome:
    action: GoneAction
    code: ErrorCode | None = None
    message: str = ""


DROP = CallOutcome(GoneAction.DROP)
RETRY = CallOutcome(GoneAction.RETRY)


def call_outcome_when_gone(
    call: Call, retried: bool, reason: str, error: str, now: float
) -> CallOutcome:
    """What becomes of `call`, in flight when the incarnation serving it went away for
    `reason` (an ExitReason value). One rule for both routers (the host for shared kinds,
    the RunActor for run kinds): DROP past its deadline, RETRY once for an idempotent call,
    otherwise an ERROR for the caller."""
    if call.deadline and call.deadline < now:
        return DROP
    if reason == ExitReason.UNAVAILABLE.value:
        return CallOutcome(GoneAction.ERROR, ErrorCode.UNAVAILABLE, error)
    if call.idempotent and not retried:
        return RETRY
    return CallOutcome(
        GoneAction.ERROR,
        ErrorCode.RESOURCE_DIED,
        f"{_name(call)} went away while handling {call.op!r} "
        f"({reason}{': ' + error if error else ''}); it is restarted on the next call — "
        "call again",
    )


def _name(call: Call) -> str:
    """The resource's name as health shows it."""
    name = f"{call.kind}:{call.key}"
    return f"run:{call.run_id}/{name}" if call.run_scoped else name
