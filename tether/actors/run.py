"""The per-conversation actor: supervisor and router of the run's RUN-scoped resources.

The host sends a `Call` (encoded) for a RUN kind to its run's RunActor, which starts the
resource actor under itself if needed and sends it the call. The resource actor answers
the host directly (the host's address rides beside the call): host -> RunActor ->
resource -> host. (SHARED kinds never come here: the host routes those itself, see
`tether.runtime`.)

Every call stays in an in-flight table until its deadline. When the incarnation serving a
call is gone (our own child exited) the call is retried once if it is idempotent, or
answered with `resource_died` otherwise (`policy.call_outcome_when_gone`). A call the
resource did answer gets a second, stale answer the host drops by call id: a reply is
only ever taken for the call that is waiting for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tether.kinds import KindSpec, Scope
from tether.messages.calls import Call, ErrorCode
from tether.messages.control import Inject, Start
from tether.supervisors.core import ChildRecord, Supervisor
from tether.supervisors.policy import ExitReason, call_outcome_when_gone

SWEEP_PERIOD = 1.0


@dataclass
class InFlight:
    call: Call
    data: bytes
    reply_to: Any
    incarnation: int
    retried: bool = False


class RunActor(Supervisor):
    def __init__(self) -> None:
        super().__init__()
        self.kinds: dict[str, KindSpec] = {}
        self.in_flight: dict[str, InFlight] = {}
        self._sweep_armed = False
        self.calls_routed = 0

    def handle_message(self, obj: Any, data: bytes, extra: Any, sender: Any) -> None:
        if isinstance(obj, Call):
            self.route(obj, data, sender)
        elif isinstance(obj, Start):
            self.kinds = {k["kind"]: KindSpec.from_wire(k) for k in obj.kinds}
            self.state = "ready"
        elif isinstance(obj, Inject) and obj.target == self.name:
            reply_to = extra if extra is not None else sender
            self.reply_inject(
                reply_to,
                obj,
                False,
                f"{self.name} is a run: only crash_actor applies to it; other faults target "
                "its resources (see rt.health())",
            )
        else:
            self.handle_supervisor_message(obj, data, extra, sender)

    def route(self, call: Call, data: bytes, reply_to: Any, retried: bool = False) -> None:
        self.calls_routed += 1
        spec = self.kinds.get(call.kind)
        if spec is None or spec.scope is not Scope.RUN:
            known = ", ".join(sorted(k for k, v in self.kinds.items() if v.scope is Scope.RUN))
            self.send_error(
                reply_to,
                call.call_id,
                ErrorCode.BAD_REQUEST,
                f"no run-scoped resource kind {call.kind!r} in this runtime (shared kinds are "
                f"routed by the host); run-scoped kinds: {known or 'none'}",
            )
            return
        rec = self.ensure_child(
            spec.kind,
            call.key,
            f"{self.name}/{spec.kind}:{call.key}",
            spec.child,
            spec.actor_class,
            spec.config,
        )
        if self.deliver(rec, call, data, reply_to):
            self._track(call, data, reply_to, rec.incarnation, retried)

    def _track(
        self, call: Call, data: bytes, reply_to: Any, incarnation: int, retried: bool
    ) -> None:
        self.in_flight[call.call_id] = InFlight(call, data, reply_to, incarnation, retried)
        if not self._sweep_armed:
            self._sweep_armed = True
            self.wakeupAfter(SWEEP_PERIOD, ("_run_sweep",))

    def _gone(self, kind: str, key: str, incarnation: int, reason: str, error: str) -> None:
        now = time.monotonic()
        for call_id, flight in list(self.in_flight.items()):
            if (flight.call.kind, flight.call.key) != (kind, key):
                continue
            if flight.incarnation != incarnation:
                continue
            del self.in_flight[call_id]
            what, code, message = call_outcome_when_gone(
                flight.call, flight.retried, reason, error, now
            )
            if what == "retry":
                self.route(flight.call, flight.data, flight.reply_to, retried=True)
            elif what == "error":
                self.send_error(flight.reply_to, call_id, code, message)

    def on_incarnation_gone(self, rec: ChildRecord) -> None:
        reason = (rec.stop_reason or ExitReason.CRASH).value
        self._gone(rec.kind, rec.key, rec.incarnation, reason, rec.last_error)

    def handle_wakeup(self, payload: Any) -> None:
        if payload == ("_run_sweep",):
            self._sweep_armed = False
            now = time.monotonic()
            for call_id, flight in list(self.in_flight.items()):
                if not flight.call.deadline or flight.call.deadline < now:
                    del self.in_flight[call_id]
            if self.in_flight:
                self._sweep_armed = True
                self.wakeupAfter(SWEEP_PERIOD, ("_run_sweep",))
            return
        self.handle_supervisor_wakeup(payload)

    def health_extra_node(self) -> dict[str, Any]:
        # in-flight entries live until their deadline (answers go straight to the host), so
        # they are reported as tracked, not as pending
        return {"extra": {"calls_routed": self.calls_routed, "tracked_calls": len(self.in_flight)}}
