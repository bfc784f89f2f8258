"""`Lifecycle`: where a resource actor is in its life, and what that means for a call.

A resource actor's supervisor sends it `Start`; the actor answers `Started` (ok or not)
once its resource is up - at once, or later for a deferred start (a probe subprocess
first) - and says `Stopping` when it goes on its own. A call can arrive at any point of
that life, and each point has one right answer, decided in one function (`admit`,
STYLE.md habit 4) rather than in a chain of ifs inside the handler:

    start failed              -> FAIL     (the start's error: the supervisor decided already)
    stopping, failed, stopped -> MOVED    (never started here: the host resends it, safely)
    not started, "starting"   -> QUEUE    (delivered in order once the state is "ready")
    otherwise                 -> DELIVER  (on_call, after an injected delay if one is due)

The actor does the sending; this part keeps the flags and the start's error.
"""

from __future__ import annotations

from enum import StrEnum

from tether.messages.calls import ErrorCode


class Admission(StrEnum):
    FAIL = "fail"
    MOVED = "moved"
    QUEUE = "queue"
    DELIVER = "deliver"


class Lifecycle:
    def __init__(self) -> None:
        self.started = False  # Started(ok) was sent
        self.stopping = False  # going away: no call is started here any more
        self.deferred = False  # on_start said the start ends later (defer_start)
        self.state_explicit = False  # the actor set its state itself (set_state)
        self.start_error: tuple[ErrorCode, str] | None = None  # code, message for calls

    def admit(self, state: str) -> Admission:
        """What to do with a call arriving now, the actor's state being `state`."""
        if self.start_error is not None:
            return Admission.FAIL
        if self.stopping or state in ("failed", "stopped"):
            return Admission.MOVED
        if not self.started or state == "starting":
            return Admission.QUEUE
        return Admission.DELIVER

    def may_end_deferred(self) -> bool:
        """Can a deferred start end now (once, and not after the actor began to stop)?"""
        if self.deferred and not self.started and not self.stopping:
            self.deferred = False
            return True
        return False

    def start_failed(self, name: str, error: str, unavailable: bool) -> tuple[ErrorCode, str]:
        """The start failed: the error every call gets from now on. `unavailable`: it
        cannot run here (ResourceUnavailable: the supervisor does not retry)."""
        self.start_error = (
            ErrorCode.UNAVAILABLE if unavailable else ErrorCode.RESOURCE_DIED,
            error if unavailable else f"{name} failed to start: {error}",
        )
        self.stopping = True
        return self.start_error
