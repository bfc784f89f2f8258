"""The host's direct routes to shared actors, and the calls it has in flight on them.

A call for a SHARED kind (a language server, a parser slot) goes from the host straight to
the actor serving (kind, key) once the host knows its address: host -> actor -> host, two
hops, where a routed call would take three; on the actor's call channel where the calling
thread has one (`tether.channels`), else as a thespian message. The first call for a
(kind, key), and any call after its actor went away, goes through the kind supervisor as a
`Route` instead; the supervisor starts the actor if needed and, once the actor's pid is
known, forwards the call and tells the calling context the actor's address and pid
(`RouteInfo`).

Nothing is lost when an actor goes while a call is open on it:
- it tells the host MOVED for an idempotent call it can no longer serve (its server died,
  it is stopping), and the host sends that call once more, through the supervisor;
- if the actor process itself dies (nobody answers), the host sees its call channel close
  at once, or its pid gone within `WATCH_PERIOD` of waiting (every call the host waits on
  is on a process it knows); `policy.call_outcome_when_gone` decides between one retry
  and a clear error.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from typing import Any

from tether.channels import HostChannel
from tether.messages.calls import Call
from tether.messages.codec import encode
from tether.messages.control import RouteInfo
from tether.processes import proc_create_time, same_process


@dataclass(frozen=True)
class DirectRoute:
    address: Any  # the actor's thespian address
    incarnation: int
    pid: int  # the actor's process
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
    """(kind, key) -> the DirectRoute of its current actor, shared by every thread."""

    def __init__(self) -> None:
        self._routes: dict[tuple[str, str], DirectRoute] = {}
        self._lock = threading.Lock()

    def get(self, kind: str, key: str) -> DirectRoute | None:
        route = self._routes.get((kind, key))
        if route is not None and not route.maybe_alive():
            self.forget(kind, key, route.incarnation)
            return None
        return route

    def learn(self, info: RouteInfo, address: Any) -> DirectRoute:
        """Keep the route `info` names (unless a newer one is known) and return it; one
        whose process is gone already is returned, not kept (`alive()` is False)."""
        created = proc_create_time(info.pid) if info.pid else 0.0
        route = DirectRoute(address, info.incarnation, info.pid, created)
        if not created:
            return route  # gone already: keep routing through the supervisor
        with self._lock:
            known = self._routes.get((info.kind, info.key))
            if known is None or known.incarnation <= info.incarnation:
                self._routes[(info.kind, info.key)] = route
        return route

    def forget(self, kind: str, key: str, incarnation: int) -> None:
        with self._lock:
            known = self._routes.get((kind, key))
            if known is not None and known.incarnation <= incarnation:
                del self._routes[(kind, key)]

    def clear(self) -> None:
        with self._lock:
            self._routes.clear()


@dataclass(frozen=True)
class Gone:
    """An incarnation of (kind, key) the host saw go (its process or its call channel)."""

    kind: str
    key: str
    incarnation: int
    reason: str  # an ExitReason value
    error: str = ""


@dataclass
class Flight:
    """One host-routed call the host is waiting for."""

    call: Call
    data: bytes  # `call`, encoded
    route: DirectRoute | None = None  # the actor serving it, once known (its pid is watched)
    channel: HostChannel | None = None  # ... on its call channel (else through thespian)
    incarnation: int | None = None  # the incarnation serving it, once known
    retried: bool = False
    after_incarnation: int = 0  # a retry: to be served by an incarnation newer than this

    def serves(self, kind: str, key: str, incarnation: int) -> bool:
        """Is this call open on that incarnation? (Until the supervisor says which one took
        it, a call is on none: a notice about an earlier incarnation is not about it.)"""
        return (self.call.kind, self.call.key, self.incarnation) == (kind, key, incarnation)

    def send_after(self, gone_incarnation: int, as_retry: bool) -> None:
        """Make this call ready to go again, to an incarnation newer than the one that went
        (`as_retry`: it had started there, so this is its one retry)."""
        if as_retry:
            self.retried = True
            self.call = replace(self.call, retried=True)
            self.data = encode(self.call)
        self.route = self.incarnation = self.channel = None
        self.after_incarnation = gone_incarnation
