"""The runtime's own messages: starting and stopping actors, routing, health, faults.

Plain frozen dataclasses with msgpack-able fields only (str, int, float, bool, None,
lists, dicts). Thespian actor addresses never go inside them: where a message must
carry one (the caller to answer, the child a run should talk to), it rides beside the
encoded bytes in the thespian message `(bytes, address)`, see `tether.messages.codec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tether.health_node import HealthNode
from tether.json_types import JSONObject
from tether.kinds import ChildSpecWire, KindSpecWire


@dataclass(frozen=True)
class Start:
    """Supervisor -> new child: who you are. `kinds` (RunActor and supervisors only) is the
    wire form of the KindSpecs; `child` the ChildSpec wire form; `host_pid` the watchdog's."""

    kind: str
    key: str
    config: JSONObject = field(default_factory=dict)
    child: ChildSpecWire | dict[str, None] = field(default_factory=dict)  # {}: none given
    host_pid: int = 0
    host_create_time: float = 0.0
    incarnation: int = 0
    name: str = ""  # the health name, e.g. "echo:k1" or "run:conv-1/kernel:python"
    kinds: list[KindSpecWire] = field(default_factory=list)
    channel: bool = False  # open a call channel for the host (shared kinds; tether.channels)
    restarts: int = 0  # how often the supervisor restarted this child before (for status)
    # why the previous actor of this (kind, key) ended, when it was stopped and forgotten
    # (a TTL, a stop of its own): its successor can tell the next caller
    previous_end: str = ""


@dataclass(frozen=True)
class Started:
    """Child -> supervisor: start finished (ok) or failed (error; unavailable: don't retry)."""

    kind: str
    key: str
    incarnation: int
    ok: bool
    pid: int
    error: str = ""
    unavailable: bool = False


@dataclass(frozen=True)
class Pids:
    """Child -> supervisor: the OS processes it owns now (so a supervisor can clean up if
    the child itself is killed)."""

    kind: str
    key: str
    incarnation: int
    pids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Stopping:
    """Child -> supervisor, just before it exits on its own (ChildActorExited has no reason)."""

    kind: str
    key: str
    incarnation: int
    reason: str  # an ExitReason value
    error: str = ""


@dataclass(frozen=True)
class Route:
    """Host -> any supervisor on the way to a resource: deliver this call (encoded),
    starting what is missing on the way, and tell me who has it (RouteInfo). The caller's
    address rides beside. The root passes it to the kind's supervisor (or to the runs
    supervisor), the runs supervisor to the call's RunActor, and a kind supervisor or a
    RunActor to the resource actor itself. A retry names the incarnation it saw go
    (`after_incarnation`): it waits for a newer one, even if that one is still exiting."""

    call: bytes
    after_incarnation: int = 0


@dataclass(frozen=True)
class RouteInfo:
    """Supervisor -> host, as it hands the host's call `call_id` on to its child (a call is
    handed over once the child's pid is known): the child (run_id, kind, key) in
    incarnation `incarnation`, at the address riding beside, in process `pid`. `via`: the
    child is a supervisor on the way (the root's kind supervisors, the runs supervisor, a
    RunActor), not the resource. The host watches that process while it waits, and sends
    its next calls for that resource, or its next first calls through that supervisor,
    there directly. `run_id` is set for run-scoped resources ("" for shared ones)."""

    kind: str
    key: str
    incarnation: int
    pid: int
    call_id: str
    run_id: str = ""
    via: bool = False


@dataclass(frozen=True)
class CancelCall:
    """Host -> the resource actor holding call `call_id`: its caller gave up (cancelled,
    or its deadline passed). The host has answered the tool already; the actor stops the
    work its own way (`ResourceActor.on_cancel`) and its late reply, if any, is dropped."""

    call_id: str
    reason: str = ""


@dataclass(frozen=True)
class HealthQuery:
    query_id: str
    deadline: float  # absolute time.monotonic()


@dataclass(frozen=True)
class HealthReport:
    """One node of the health tree; `node["children"]` holds the subtree."""

    query_id: str
    node: HealthNode  # (a dict on the wire)


@dataclass(frozen=True)
class Inject:
    """A fault for the actor named `target` (as health names it)."""

    call_id: str
    fault: str
    target: str
    args: JSONObject = field(default_factory=dict)


@dataclass(frozen=True)
class OpenRun:
    call_id: str
    run_id: str


@dataclass(frozen=True)
class CloseRun:
    call_id: str
    run_id: str


@dataclass(frozen=True)
class ListKeys:
    call_id: str
    kind: str


@dataclass(frozen=True)
class ListHops:
    """Host -> root: where are your supervisors now? (a Reply whose payload["hops"] lists
    [kind, key, incarnation, pid] for each that is up, their addresses beside it by
    "kind:key", and payload["down"] {"kind:key": [state, last_error]} for the others).
    `wait_for` ("kind:key"): if that supervisor is restarting, answer once it is up again
    (or given up on)."""

    call_id: str
    wait_for: str = ""


@dataclass(frozen=True)
class Hello:
    """Host -> root: configure the tree. The root answers once its supervisors started,
    with a Reply carrying its pids and its hops (as for ListHops)."""

    call_id: str
    host_pid: int
    host_create_time: float
    kinds: list[KindSpecWire] = field(default_factory=list)
