"""The per-conversation actor: supervisor of the run's RUN-scoped resources.

A RunActor is to one run what a kind supervisor is to a shared kind: the last supervisor
on a host call's way (`Route`). It starts the resource actor (a kernel, a debug session, a
vibe worker) under itself if needed, hands the call over once the actor's pid is known,
and tells the host who took it (`RouteInfo`, with the run id). From then on the host calls
that actor directly on its call channel, and watches its process while it waits, exactly
as for shared kinds (`tether.host.engine`): one path, one set of guarantees (a dead actor is
noticed at once, an idempotent call is retried once on a newer incarnation).

It holds nothing the host cannot rebuild: its kinds come with its Start, and its children
are the run's live resources, which die with it (their watchdog sees their parent go).
After a crash its supervisor starts it again, and the next call starts fresh resources.
"""

from __future__ import annotations

from typing import ClassVar

from thespian.actors import ActorAddress

from tether.health_node import NodeExtra, NodeState
from tether.kinds import KindSpec, Scope
from tether.messages.calls import ErrorCode
from tether.messages.codec import decode_call
from tether.messages.control import Inject, Route, Start
from tether.supervisors.core import Supervisor


class RunActor(Supervisor):
    children_called_by_host: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.kinds: dict[str, KindSpec] = {}
        self.calls_routed = 0

    def handle_message(
        self, obj: object, data: bytes, extra: ActorAddress | None, sender: ActorAddress
    ) -> None:
        if isinstance(obj, Route):
            self._route(obj, extra if extra is not None else sender)
        elif isinstance(obj, Start):
            self.kinds = {k["kind"]: KindSpec.from_wire(k) for k in obj.kinds}
            self.route_run_id = obj.key
            self.state = NodeState.READY
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

    def _route(self, route: Route, reply_to: ActorAddress) -> None:
        self.calls_routed += 1
        call = decode_call(route.call)
        spec = self.kinds.get(call.kind)
        if spec is None or spec.scope is not Scope.RUN:
            known = ", ".join(sorted(k for k, v in self.kinds.items() if v.scope is Scope.RUN))
            self.send_error(
                reply_to,
                call.call_id,
                ErrorCode.BAD_REQUEST,
                f"no run-scoped resource kind {call.kind!r} in this runtime (shared kinds are "
                f"routed by their own supervisor); run-scoped kinds: {known or 'none'}",
            )
            return
        self.route_to_resource(route, call, reply_to, spec, f"{self.name}/{spec.kind}:{call.key}")

    def health_extra_node(self) -> NodeExtra:
        return {"extra": {"calls_routed": self.calls_routed}}
