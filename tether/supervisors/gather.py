"""A supervisor's health gathering: each live child asked with a deadline, the answer
assembled from what arrived by then.

A health query reaches a supervisor with an absolute deadline. The supervisor asks every
child that is up (`HealthQuery`, with a deadline of 80 % of the time left, so that its own
parent still has time to assemble), answers for the others from what it knows (a child
starting over, one given up on, one whose process is already gone), and answers when the
last child did or at the deadline (`GatherDue`), reporting those that did not answer as
unresponsive. A report is never late: one that comes after its gather ended is dropped.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Protocol

from thespian.actors import ActorAddress

from tether.capacity.usage import UsageRecord, traits_of
from tether.health_node import HealthNode, NodeExtra, NodeState, health_node
from tether.messages.control import HealthQuery, HealthReport
from tether.processes import pid_running
from tether.supervisors.child import ChildRecord


class GatherHost(Protocol):
    """What a gather needs of its supervisor."""

    children: dict[tuple[str, str], ChildRecord]

    def supervisor_node(self) -> HealthNode: ...
    def health_extra_node(self) -> NodeExtra: ...
    # (msg: a registered message, as tether.messages.codec.encode takes it)
    def send_encoded(self, address: ActorAddress, msg: object) -> None: ...
    def wakeupAfter(self, timePeriod: float, payload: object = None) -> None: ...  # noqa: N802, N803


@dataclass(frozen=True)
class GatherDue:
    """A health gather's deadline: answer with what arrived."""

    gather_id: str


@dataclass
class _Gather:
    """One health query being answered."""

    reply_to: ActorAddress
    reply_query_id: str
    node: HealthNode
    waiting: dict[str, ChildRecord]  # sub-query id -> child
    children: list[HealthNode]  # built here, or as the child sent them


def record_node(rec: ChildRecord) -> HealthNode:
    """What the supervisor knows of a child that cannot (or did not) answer itself."""
    pids = ([rec.pid] if rec.pid and rec.address else []) + rec.owned
    # its usage as far as we know it: counted, but never stopped to make room blindly
    traits = replace(traits_of(rec.kind), evictable=False)
    usage = UsageRecord.build(rec.name, rec.kind, pids, rec.started_at, True, traits)
    return health_node(
        rec.name,
        rec.kind,
        rec.key,
        rec.state,
        uptime=time.monotonic() - rec.started_at if rec.address else 0.0,
        restarts=rec.restarts,
        last_error=rec.last_error,
        pending=len(rec.waiting),
        pids=pids,
        usage=usage.to_wire(),
    )


def dead_child_node(rec: ChildRecord) -> HealthNode:
    """A child whose actor process is gone before thespian told its supervisor."""
    node = record_node(rec)
    coming = "it is stopping" if rec.state == NodeState.STOPPING else "it is being restarted"
    node["state"] = NodeState.STOPPING if rec.state == NodeState.STOPPING else NodeState.RESTARTING
    node["last_error"] = f"its actor process {rec.pid} is gone; {coming}"
    return node


class HealthGathers:
    """The health queries one supervisor is answering (a part of `Supervisor`)."""

    def __init__(self, sup: GatherHost) -> None:
        self.sup = sup
        self._open: dict[str, _Gather] = {}
        self._seq = 0

    def start(self, query: HealthQuery, reply_to: ActorAddress) -> None:
        """Ask each live child, by a deadline short of the query's own."""
        self._seq += 1
        gather_id = f"{os.getpid()}-{self._seq}"
        now = time.monotonic()
        # leave our parent some of the remaining time to assemble its own answer
        sub_deadline = now + max((query.deadline - now) * 0.8, 0.01)
        gather = _Gather(reply_to, query.query_id, self.sup.supervisor_node(), {}, [])
        for index, rec in enumerate(self.sup.children.values()):
            if rec.address is not None and rec.pid and not pid_running(rec.pid):
                # dead, and thespian has not told us yet: not "ready", and not worth a wait
                gather.children.append(dead_child_node(rec))
            elif rec.address is not None and rec.state in (NodeState.READY, NodeState.STARTING):
                sub_id = f"{gather_id}-{index}"
                gather.waiting[sub_id] = rec
                self.sup.send_encoded(rec.address, HealthQuery(sub_id, sub_deadline))
            else:
                gather.children.append(record_node(rec))
        self._open[gather_id] = gather
        if not gather.waiting:
            self.finish(gather_id)
        else:
            self.sup.wakeupAfter(max(sub_deadline - now, 0.005) * 1.05, GatherDue(gather_id))

    def gathered(self, report: HealthReport) -> None:
        """A child's report: kept, with what the supervisor knows of it."""
        gather_id = report.query_id.rsplit("-", 1)[0]
        gather = self._open.get(gather_id)
        if gather is None:
            return  # late: that report went out already
        rec = gather.waiting.pop(report.query_id, None)
        if rec is None:
            return
        node: HealthNode = {**report.node}
        node["restarts"] = rec.restarts
        if rec.state != NodeState.READY:
            node["state"] = (
                rec.state
                if node.get("state") in (NodeState.READY, NodeState.BUSY)
                else node.get("state")
            )
        if not node.get("last_error"):
            node["last_error"] = rec.last_error
        node["pending"] = node.get("pending", 0) + len(rec.waiting)
        gather.children.append(node)
        if not gather.waiting:
            self.finish(gather_id)

    def finish(self, gather_id: str) -> None:
        """Answer with what arrived (the deadline passed, or every child answered)."""
        gather = self._open.pop(gather_id, None)
        if gather is None:
            return
        for rec in gather.waiting.values():
            node = record_node(rec)
            node["state"] = NodeState.UNRESPONSIVE if rec.state == NodeState.READY else rec.state
            node["last_error"] = node["last_error"] or "did not answer the health query in time"
            gather.children.append(node)
        gather.node["children"] = sorted(gather.children, key=lambda n: n["name"])
        gather.node.update(self.sup.health_extra_node())
        self.sup.send_encoded(gather.reply_to, HealthReport(gather.reply_query_id, gather.node))
