"""What the host knows of the tree's addresses, and the calls it has in flight on them.

Every node the host sends to is a `Target` `(run_id, kind, key)`: a resource actor
(`("", "parser", "0")` shared, `("conv-1", "kernel", "python")` run-scoped) or a supervisor
on the way to one (`("", "supervisor", "parser")`, `("", "runs", "")`,
`("", "run", "conv-1")`). The host learns each one's address, incarnation and pid from
the `RouteInfo` a supervisor sends as it hands a call on, and keeps the newest in a
`RouteTable`.

A call goes to its resource actor directly when the host knows it: host -> actor -> host,
two hops, on the actor's call channel where the calling thread has one
(`tether.channels`), else as a thespian message. Otherwise it travels as a `Route` from
the nearest supervisor the host knows on its way (`hops`), the root at worst; each
supervisor on the way starts what is missing and says who took the call.

Nothing is lost when a process goes while a call is open on it: the host watches the
process that holds each call it waits on (the resource actor, or the supervisor on the
way): its call channel closing at once, or its pid gone within `WATCH_PERIOD` of waiting;
the actor itself says MOVED when it cannot serve an idempotent call (its server died, it
is stopping). `policy.call_outcome_when_gone` decides between one retry and a clear
error.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from tether.channels import HostChannel
from tether.messages.calls import Call
from tether.messages.codec import encode
from tether.messages.control import RouteInfo
from tether.processes import proc_create_time, same_process

if TYPE_CHECKING:  # (thespian publishes no types: mypy cannot check these)
    from thespian.actors import ActorAddress

Target = tuple[str, str, str]  # (run_id or "", kind, key)

ROOT: Target = ("", "root", "")


def resource_target(call: Call) -> Target:
    return (call.run_id if call.run_scoped else "", call.kind, call.key)


def hops(call: Call) -> list[Target]:
    """The supervisors on `call`'s way to its resource, nearest first (the root last)."""
    if call.run_scoped:
        return [("", "run", call.run_id), ("", "runs", ""), ROOT]
    return [("", "supervisor", call.kind), ROOT]


def target_name(target: Target) -> str:
    """As health names it: "parser:0", "run:c1/kernel:python", "supervisor:parser", "runs"."""
    run_id, kind, key = target
    if kind in ("root", "runs"):
        return kind
    return f"run:{run_id}/{kind}:{key}" if run_id else f"{kind}:{key}"


@dataclass(frozen=True)
class DirectRoute:
    target: Target
    address: ActorAddress
    incarnation: int
    pid: int  # the node's process
    create_time: float

    def maybe_alive(self) -> bool:
        """Cheap check before each send (one syscall); `alive` is the exact one."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def alive(self) -> bool:
        return bool(self.create_time) and same_process(self.pid, self.create_time)


class RouteTable:
    """Target -> the DirectRoute of its current incarnation, shared by every thread."""

    def __init__(self) -> None:
        self._routes: dict[Target, DirectRoute] = {}
        self._lock = threading.Lock()
        self._closed_at: dict[str, float] = {}  # run id -> when it was closed (monotonic)

    def get(self, target: Target) -> DirectRoute | None:
        route = self._routes.get(target)
        if route is not None and not route.maybe_alive():
            self.forget(target, route.incarnation)
            return None
        return route

    def nearest_hop(self, call: Call) -> DirectRoute | None:
        """The nearest supervisor on `call`'s way that the host knows and that is alive."""
        for target in hops(call):
            route = self.get(target)
            if route is not None:
                return route
        return None

    def learn(self, info: RouteInfo, address: ActorAddress) -> DirectRoute:
        """Keep the route `info` names (unless a newer one is known) and return it; one
        whose process is gone already is returned, not kept (`alive()` is False)."""
        return self.add((info.run_id, info.kind, info.key), address, info.incarnation, info.pid)

    def add(self, target: Target, address: ActorAddress, incarnation: int, pid: int) -> DirectRoute:
        created = proc_create_time(pid) if pid else 0.0
        route = DirectRoute(target, address, incarnation, pid, created)
        if not created:
            return route  # gone already: keep routing through a supervisor
        with self._lock:
            if target[1] == "run":  # (opened again)
                self._closed_at.pop(target[2], None)
            known = self._routes.get(target)
            if known is None or known.incarnation <= incarnation or not known.maybe_alive():
                self._routes[target] = route
        return route

    def closed_since(self, run_id: str, made: float) -> bool:
        """Whether `run_id` was closed after a call was made at `made`: sending (or
        resending) that call would start the run's RunActor again, which nothing would ever
        close. (A call made after the close opens the run again, on purpose.)"""
        return self._closed_at.get(run_id, float("-inf")) >= made

    def forget(self, target: Target, incarnation: int) -> None:
        with self._lock:
            known = self._routes.get(target)
            if known is not None and known.incarnation <= incarnation:
                del self._routes[target]

    def forget_run(self, run_id: str) -> None:
        """A closed run: its RunActor and resources are going. The calls made before
        this moment are not sent (again) to it (`closed_since`)."""
        with self._lock:
            self._closed_at[run_id] = time.monotonic()
            for target in [t for t in self._routes if t[0] == run_id or t[1:] == ("run", run_id)]:
                del self._routes[target]

    def clear(self) -> None:
        """Forget the resources (not the supervisors): the next calls go through the tree
        again, like first calls."""
        with self._lock:
            for target in list(self._routes):
                if not _is_tree_node(target):
                    del self._routes[target]


def _is_tree_node(target: Target) -> bool:
    return target[1] in ("root", "supervisor", "runs", "run")


@dataclass(frozen=True)
class Gone:
    """An incarnation of a target the host saw go (its process or its call channel)."""

    target: Target
    incarnation: int
    reason: str  # an ExitReason value
    error: str = ""


@dataclass
class Flight:
    """One call the host is waiting for."""

    call: Call
    data: bytes  # `call`, encoded
    route: DirectRoute | None = None  # the resource actor serving it, once known (watched)
    channel: HostChannel | None = None  # ... on its call channel (else through thespian)
    incarnation: int | None = None  # the incarnation serving it, once known
    via: DirectRoute | None = None  # the supervisor holding it on its way there (watched)
    retried: bool = False
    after_incarnation: int = 0  # a retry: to be served by an incarnation newer than this
    resend_at: float = 0.0  # to be sent again then (its way went through a dead supervisor)
    resends: int = 0
    made: float = field(default_factory=time.monotonic)

    @property
    def target(self) -> Target:
        return resource_target(self.call)

    def serves(self, target: Target, incarnation: int) -> bool:
        """Is this call open on that incarnation? (Until a supervisor says which one took
        it, a call is on none: a notice about an earlier incarnation is not about it.)"""
        return self.target == target and self.incarnation == incarnation

    def send_after(self, gone_incarnation: int, as_retry: bool) -> None:
        """Make this call ready to go again, to an incarnation newer than the one that went
        (`as_retry`: it had started there, so this is its one retry)."""
        if as_retry:
            self.retried = True
            self.call = replace(self.call, retried=True)
            self.data = encode(self.call)
        self.route = self.incarnation = self.channel = self.via = None
        self.after_incarnation = max(self.after_incarnation, gone_incarnation)
