"""One node of the health tree: its type, its states, and the one function that builds it.

`rt.health()` returns the actor tree as plain dicts (they cross processes in
`HealthReport`, and operators read them as JSON), so a node is a `TypedDict`, not a class:
the wire stays what it was, and mypy checks every key a builder writes or a reader takes.
An actor (`tether.actors`), a supervisor speaking for a child that cannot answer
(`tether.supervisors.core`) and the host while it has no tree to ask (`tether.runtime`)
all build theirs with `health_node(...)`, so a field added here reaches every node.

`NodeState` is the state of an actor or of a supervisor's child record. A `StrEnum`, so a
state compares equal to the string health has always shown ("ready", "failed", ...) and
the readers of older dumps keep working.
"""

from __future__ import annotations

import enum
from typing import NotRequired, TypedDict

from tether.json_types import JSONObject
from tether.processes import ProcessInfo, process_info


class NodeState(enum.StrEnum):
    """Where an actor (or a supervisor's record of a child) is in its life."""

    STARTING = "starting"  # created, its on_start (a server's handshake) not done yet
    READY = "ready"  # takes calls
    BUSY = "busy"  # ready, with a call open (health only: the actor's state stays READY)
    STOPPING = "stopping"  # asked to stop, not gone yet
    STOPPED = "stopped"  # stopped normally
    RESTARTING = "restarting"  # died; its supervisor starts it again after a backoff
    FAILED = "failed"  # gave up: start failed, or more restarts than its intensity allows
    UNRESPONSIVE = "unresponsive"  # health only: did not answer the health query in time


class HealthNode(TypedDict):
    """One node of `rt.health()`; `children` holds the subtree."""

    name: str  # as fault injection names it: "language_server:basedpyright:/x", "run:c1/kernel:python"
    kind: str
    key: str
    state: str  # a NodeState, or (root while healing) "restarting" / "failed"
    uptime: float  # seconds
    restarts: int
    last_error: str
    pending: int  # calls open or queued
    pids: list[ProcessInfo]
    children: list[HealthNode]
    usage: NotRequired[JSONObject]  # tether.capacity.usage.UsageRecord.to_wire()
    place: NotRequired[str]  # where its subprocess runs (tether.places)
    extra: NotRequired[JSONObject]  # the kind's own fields (health_extra)
    call_channel: NotRequired[dict[str, int]]  # connections, refused
    admin_port: NotRequired[int]  # root only
    capacity: NotRequired[JSONObject]  # root only: the governor's summary


class NodeExtra(TypedDict, total=False):
    """What a supervisor adds to its own node (its health_extra_node)."""

    extra: JSONObject


def health_node(
    name: str,
    kind: str,
    key: str,
    state: str,
    *,
    uptime: float = 0.0,
    restarts: int = 0,
    last_error: str = "",
    pending: int = 0,
    pids: list[int] | None = None,
    usage: JSONObject | None = None,
) -> HealthNode:
    """A node with its processes looked up now (psutil: ~10 ms for a big process tree, so
    build a node once per health query)."""
    node = HealthNode(
        name=name,
        kind=kind,
        key=key,
        state=str(state),
        uptime=round(uptime, 3),
        restarts=restarts,
        last_error=last_error,
        pending=pending,
        pids=[process_info(p) for p in pids or []],
        children=[],
    )
    if usage is not None:
        node["usage"] = usage
    return node
