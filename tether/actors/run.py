"""The per-conversation actor that routes a run's calls to resource actors.

The host sends a `Call` (encoded) to its run's RunActor. The RunActor:
- for a SHARED kind, sends it straight to the resource actor whose address it cached
  (learned from the kind supervisor's `RouteInfo`), or, the first time, to the kind
  supervisor as a `Route`, which starts the actor if needed and forwards the call;
- for a RUN kind, is itself the supervisor: it starts the actor under itself and sends
  the call to it.
The resource actor answers the host directly (the host's address rides beside the call),
so a call costs three hops: host -> RunActor -> resource -> host.

Every call stays in an in-flight table until its deadline. When the incarnation serving a
call is gone (`ResourceGone` from a kind supervisor, or our own child exited) the call is
retried once if it is idempotent, or answered with `resource_died` otherwise. A call the
resource did answer gets a second, stale answer the host drops by call id: a reply is
only ever taken for the call that is waiting for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tether.messages.calls import Call, ErrorCode
from tether.messages.codec import encode
from tether.messages.control import Inject, ResourceGone, Route, RouteInfo, Start
from tether.supervisors.core import ChildRecord, Supervisor
from tether.supervisors.policy import ExitReason
from tether.supervisors.spec import KindSpec, Scope

SWEEP_PERIOD = 1.0


@dataclass
class InFlight:
    call: Call
    data: bytes
    reply_to: Any
    incarnation: int | None  # None: sent through the kind supervisor, incarnation unknown yet
    retried: bool = False


class RunActor(Supervisor):
    def __init__(self) -> None:
        super().__init__()
        self.kinds: dict[str, KindSpec] = {}
        self.kind_addresses: dict[str, Any] = {}
        self.routes: dict[tuple[str, str], tuple[Any, int]] = {}  # shared (kind, key) -> address
        self.in_flight: dict[str, InFlight] = {}
        self._sweep_armed = False
        self.calls_routed = 0

    def handle_message(self, obj: Any, data: bytes, extra: Any, sender: Any) -> None:
        if isinstance(obj, Call):
            self.route(obj, data, sender)
        elif isinstance(obj, RouteInfo):
            self.routes[(obj.kind, obj.key)] = (extra, obj.incarnation)
            for flight in self.in_flight.values():
                if flight.incarnation is None and (flight.call.kind, flight.call.key) == (
                    obj.kind,
                    obj.key,
                ):
                    flight.incarnation = obj.incarnation
        elif isinstance(obj, ResourceGone):
            cached = self.routes.get((obj.kind, obj.key))
            if cached is not None and cached[1] <= obj.incarnation:
                del self.routes[(obj.kind, obj.key)]
            self._gone(obj.kind, obj.key, obj.incarnation, obj.reason, obj.error)
        elif isinstance(obj, Start):
            self.kinds = {k["kind"]: KindSpec.from_wire(k) for k in obj.kinds}
            self.kind_addresses = dict(extra or {})
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
        if spec is None:
            known = ", ".join(sorted(self.kinds)) or "none"
            self.send_error(
                reply_to,
                call.call_id,
                ErrorCode.BAD_REQUEST,
                f"no resource kind {call.kind!r} in this runtime; connected kinds: {known}",
            )
            return
        if spec.scope is Scope.RUN:
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
            return
        cached = self.routes.get((call.kind, call.key))
        if cached is not None:
            self.send(cached[0], (data, reply_to))
            self._track(call, data, reply_to, cached[1], retried)
            return
        supervisor = self.kind_addresses.get(call.kind)
        if supervisor is None:
            self.send_error(
                reply_to,
                call.call_id,
                ErrorCode.UNAVAILABLE,
                f"the supervisor of {call.kind!r} is not running; check rt.health()",
            )
            return
        self.send(supervisor, (encode(Route(data)), reply_to))
        self._track(call, data, reply_to, None, retried)

    def _track(
        self, call: Call, data: bytes, reply_to: Any, incarnation: int | None, retried: bool
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
            if flight.incarnation is not None and flight.incarnation != incarnation:
                continue
            del self.in_flight[call_id]
            if flight.call.deadline and flight.call.deadline < now:
                continue
            if reason == "unavailable":
                self.send_error(flight.reply_to, call_id, ErrorCode.UNAVAILABLE, error)
                continue
            if flight.call.idempotent and not flight.retried:
                self.route(flight.call, flight.data, flight.reply_to, retried=True)
                continue
            self.send_error(
                flight.reply_to,
                call_id,
                ErrorCode.RESOURCE_DIED,
                f"{kind}:{key} went away while handling {flight.call.op!r} "
                f"({reason}{': ' + error if error else ''}); it is restarted on the "
                "next call — call again",
            )

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
