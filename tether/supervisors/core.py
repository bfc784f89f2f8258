"""The child table every tether supervisor shares: start, watch, restart, reap, report.

`Supervisor` is a thespian actor base. It keeps one `ChildRecord` per (kind, key) —
keyed by our own ids, never by thespian addresses, which change on restart — and:

- starts a child on demand (`ensure_child`) and sends it `Start`;
- when a child exits, works out why (the child says `Stopping(reason)` first when it
  stops on its own; a silent exit is a crash), asks `policy.decide`, and then restarts
  it after `policy.backoff` (a `wakeupAfter`, never a sleep), forgets it, or gives up
  when the restart intensity is exceeded — the record stays, as "failed", for health;
- kills what a crashed child owned (its subprocess groups), which the child itself no
  longer can;
- enforces the hard TTL (stop, then SIGKILL after `shutdown_timeout`), and bounds a
  normal stop a child began itself (an eviction, its idle TTL) the same way;
- passes the host's calls on towards their resource (`deliver`): to a resource child
  (kind supervisors, RunActors) or to a supervisor on the way (the root, the runs
  supervisor), telling the host who took each one (`RouteInfo`); while a child restarts,
  calls on their way through it wait for it, and calls for a resource get a clear error
  (idempotent ones wait for the restart instead);
- aggregates health from its children with a deadline (`gather.HealthGathers`: a child
  that does not answer in time is reported as such, the report is never late);
- forwards fault injections to the actor named by the target.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import ClassVar

from thespian.actors import ActorAddress

from tether.actors.base import TetherActor
from tether.health_node import HealthNode, NodeExtra, NodeState
from tether.json_types import JSONObject
from tether.kinds import ChildSpec, KindSpec, KindSpecWire
from tether.messages.calls import Call, ErrorCode
from tether.messages.codec import encode
from tether.messages.control import (
    HealthQuery,
    HealthReport,
    Inject,
    Pids,
    Route,
    RouteInfo,
    Start,
    Started,
    Stopping,
)
from tether.processes import kill_tree
from tether.supervisors.child import ChildRecord, ChildTimer, load_actor_class
from tether.supervisors.gather import GatherDue, HealthGathers
from tether.supervisors.policy import (
    Decision,
    ExitReason,
    backoff,
    decide,
    recent_restarts,
    within_intensity,
)


class Supervisor(TetherActor):
    """A thespian actor that supervises children described by (kind, key, ChildSpec)."""

    # are our children the resources the host calls (kind supervisors, RunActors)? They
    # then open a call channel for the host's direct calls. Otherwise they are
    # supervisors on the way (the root's, the runs supervisor's).
    children_called_by_host: ClassVar[bool] = False
    # the run whose resources our children are ("" unless we are a RunActor)
    route_run_id: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.children: dict[tuple[str, str], ChildRecord] = {}
        # the last incarnation per (kind, key), kept when a record is forgotten: numbers
        # only grow, so "newer than N" (a host's retry) stays true of a fresh record too
        self._incarnations: dict[tuple[str, str], int] = {}
        # why a forgotten child ended (TTL, a stop of its own), for its successor's Start
        self._ended: dict[tuple[str, str], str] = {}
        self.gathers = HealthGathers(self)
        self.state = NodeState.READY

    def after_start(self) -> None:
        if self._parent is not None:
            self.send_encoded(
                self._parent, Started(self.kind, self.key, self.incarnation, True, os.getpid())
            )

    # --- children --------------------------------------------------------------------
    def ensure_child(
        self,
        kind: str,
        key: str,
        name: str,
        spec: ChildSpec,
        actor_class: str,
        config: JSONObject,
        kinds: list[KindSpecWire] | None = None,
    ) -> ChildRecord:
        rec = self.children.get((kind, key))
        if rec is None:
            rec = ChildRecord(kind, key, name, spec, actor_class, config, kinds or [])
            rec.incarnation = self._incarnations.get((kind, key), 0)
            self.children[(kind, key)] = rec
            self._start_child(rec)
        return rec

    def _start_child(self, rec: ChildRecord) -> None:
        # numbers only grow, also across incarnations of this supervisor (a restarted
        # RunActor or kind supervisor starts its children anew): CLOCK_MONOTONIC is
        # machine-wide, so "newer than N" (a host's retry) holds for whoever starts next
        rec.incarnation = max(rec.incarnation + 1, time.monotonic_ns())
        self._incarnations[(rec.kind, rec.key)] = rec.incarnation
        rec.stop_reason = None
        rec.owned = []
        rec.pid = 0
        rec.started_at = time.monotonic()
        try:
            cls = load_actor_class(rec.actor_class)
            rec.address = self.createActor(cls)
        except Exception as exc:
            rec.address = None
            self._give_up(
                rec,
                ErrorCode.UNAVAILABLE,
                f"cannot create {rec.name}: actor class {rec.actor_class!r} failed to load: "
                f"{type(exc).__name__}: {exc}",
            )
            return
        rec.state = NodeState.STARTING
        self.send_encoded(
            rec.address,
            Start(
                kind=rec.kind,
                key=rec.key,
                config=rec.config,
                child=rec.spec.to_wire(),
                host_pid=self._host_pid,
                host_create_time=self._host_create_time,
                incarnation=rec.incarnation,
                restarts=rec.restarts,
                previous_end=self._ended.pop((rec.kind, rec.key), ""),
                name=rec.name,
                kinds=rec.kinds,
                channel=self.children_called_by_host,
            ),
        )
        self._flush_waiting(rec)

    def find_by_address(self, address: ActorAddress) -> ChildRecord | None:
        for rec in self.children.values():
            if rec.address is not None and rec.address == address:
                return rec
        return None

    def stop_child(self, rec: ChildRecord, why: str) -> None:
        """Supervisor-initiated stop (TTL, run closed): ask, then kill after shutdown_timeout."""
        if rec.state in (NodeState.STOPPING, NodeState.FAILED) or rec.address is None:
            if rec.state == NodeState.FAILED:
                self.children.pop((rec.kind, rec.key), None)
            return
        rec.stop_reason = ExitReason.SHUTDOWN
        rec.last_error = why
        rec.state = NodeState.STOPPING
        from thespian.actors import ActorExitRequest

        self.send(rec.address, ActorExitRequest())
        self._arm_kill(rec)

    def _arm_kill(self, rec: ChildRecord) -> None:
        """SIGKILL this incarnation if it is still there after its shutdown_timeout."""
        self.wakeupAfter(
            rec.spec.shutdown_timeout,
            ChildTimer(ChildTimer.KILL, rec.kind, rec.key, rec.incarnation),
        )

    def handle_supervisor_message(
        self, obj: object, data: bytes, extra: ActorAddress | None, sender: ActorAddress
    ) -> bool:
        """Messages every supervisor understands. Returns False if `obj` is not one."""
        if isinstance(obj, Started):
            rec = self.children.get((obj.kind, obj.key))
            if rec is None or rec.incarnation != obj.incarnation:
                return True
            rec.pid = obj.pid
            if obj.ok:
                rec.state = NodeState.READY
                if rec.spec.ttl:
                    timer = ChildTimer(ChildTimer.TTL, rec.kind, rec.key, rec.incarnation)
                    self.wakeupAfter(rec.spec.ttl, timer)
                self._flush_waiting(rec)
                self.on_child_started(rec)
            else:
                rec.last_error = obj.error
                rec.stop_reason = ExitReason.UNAVAILABLE if obj.unavailable else ExitReason.CRASH
                if obj.unavailable:
                    rec.state, rec.error_code = NodeState.FAILED, ErrorCode.UNAVAILABLE
                else:
                    rec.state = NodeState.STOPPING
                # (calls handed over while it started were failed by the child itself)
                self._fail_waiting_calls(rec, obj)
        elif isinstance(obj, Pids):
            rec = self.children.get((obj.kind, obj.key))
            if rec is not None and rec.incarnation == obj.incarnation:
                rec.owned = list(obj.pids)
        elif isinstance(obj, Stopping):
            rec = self.children.get((obj.kind, obj.key))
            if rec is not None and rec.incarnation == obj.incarnation:
                if rec.stop_reason is None:
                    rec.stop_reason = ExitReason(obj.reason)
                if obj.error:
                    rec.last_error = obj.error
                if rec.stop_reason is not ExitReason.SHUTDOWN or rec.state != NodeState.STOPPING:
                    rec.state = NodeState.STOPPING
                    if rec.stop_reason is ExitReason.SHUTDOWN:
                        # a normal stop the child began (the governor evicted it, its idle
                        # TTL) is bounded as one we ask for: nothing waits on its exit but
                        # its health listing and its successor's start
                        self._arm_kill(rec)
        elif isinstance(obj, HealthQuery):
            self.gathers.start(obj, sender)
        elif isinstance(obj, HealthReport):
            self.gathers.gathered(obj)
        elif isinstance(obj, Inject):
            self.route_inject(obj, data, extra if extra is not None else sender)
        else:
            return False
        return True

    def handle_child_exited(self, address: ActorAddress) -> None:
        rec = self.find_by_address(address)
        if rec is None:
            return
        rec.address = None
        reason = rec.stop_reason or ExitReason.CRASH
        if reason is ExitReason.CRASH and not rec.last_error:
            rec.last_error = f"{rec.name} died (actor process exited without saying why)"
        if reason is ExitReason.CRASH:
            self._reap_owned(rec)
        now = time.monotonic()
        decision = decide(rec.spec, reason)
        if decision is Decision.RESTART and not within_intensity(rec.restart_times, now, rec.spec):
            self._give_up(
                rec,
                ErrorCode.GAVE_UP,
                f"gave up on {rec.name} after {rec.spec.max_restarts} restarts in "
                f"{rec.spec.period:g} s; last error: {rec.last_error or 'none'}",
            )
        elif decision is Decision.RESTART:
            delay = backoff(rec.spec, len(recent_restarts(rec.restart_times, now, rec.spec)))
            rec.restart_times = [*recent_restarts(rec.restart_times, now, rec.spec), now]
            rec.restarts += 1
            rec.state = NodeState.RESTARTING
            # the next incarnation starts with nothing of this one's state: it can say so
            self._ended[(rec.kind, rec.key)] = rec.last_error or f"{rec.name} was restarted"
            self.wakeupAfter(
                delay, ChildTimer(ChildTimer.RESTART, rec.kind, rec.key, rec.incarnation)
            )
        elif decision is Decision.ESCALATE:
            self._give_up(
                rec, ErrorCode.UNAVAILABLE, rec.last_error or f"{rec.name} is unavailable"
            )
        elif rec.waiting and self.state != NodeState.STOPPED:
            # calls raced its stop (idle, TTL) and wait for it: they get a fresh one
            self.children.pop((rec.kind, rec.key), None)
            if rec.last_error:
                self._ended[(rec.kind, rec.key)] = rec.last_error
            fresh = self.ensure_child(
                rec.kind, rec.key, rec.name, rec.spec, rec.actor_class, rec.config, rec.kinds
            )
            fresh.waiting.extend(rec.waiting)
            self._flush_waiting(fresh)
        else:
            self.children.pop((rec.kind, rec.key), None)
            if rec.last_error:
                self._ended[(rec.kind, rec.key)] = rec.last_error
            self._fail_waiting(
                rec, ErrorCode.RESOURCE_DIED, f"{rec.name} stopped: {rec.last_error}"
            )
        self.on_child_gone(rec, reason)

    def on_child_started(self, rec: ChildRecord) -> None:
        """Hook: a child's incarnation finished starting (its pid is known now)."""

    def on_child_gone(self, rec: ChildRecord, reason: ExitReason) -> None:
        """Hook: a child's incarnation is gone."""

    def _give_up(self, rec: ChildRecord, code: str, message: str) -> None:
        rec.state = NodeState.FAILED
        rec.error_code = code
        rec.last_error = message
        self._fail_waiting(rec, code, message)

    def _reap_owned(self, rec: ChildRecord) -> None:
        """The child died without cleaning up: kill what it owned (process groups, trees)."""
        for pid in rec.owned:
            with contextlib.suppress(Exception):
                kill_tree(pid, grace=0.0, wait=False)
        rec.owned = []

    def handle_wakeup(self, payload: object) -> None:  # (a tag of any class: matched on)
        match payload:
            case ChildTimer(what=what, kind=kind, key=key, incarnation=incarnation):
                rec = self.children.get((kind, key))
                if rec is None or rec.incarnation != incarnation:
                    return
                if what == ChildTimer.RESTART and rec.state == NodeState.RESTARTING:
                    self._start_child(rec)
                elif what == ChildTimer.TTL and rec.state in (NodeState.READY, NodeState.STARTING):
                    self.stop_child(rec, f"ttl of {rec.spec.ttl:g} s expired")
                elif (
                    what == ChildTimer.KILL
                    and rec.address is not None
                    and rec.state == NodeState.STOPPING
                ):
                    self._kill_child(rec)
            case GatherDue(gather_id=gather_id):
                self.gathers.finish(gather_id)

    def _kill_child(self, rec: ChildRecord) -> None:
        """SIGKILL the child's actor process and what it owns (shutdown timeout, crash_actor)."""
        if rec.pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(rec.pid, signal.SIGKILL)
        self._reap_owned(rec)

    # --- routing ---------------------------------------------------------------------
    def route_to_resource(
        self, route: Route, call: Call, reply_to: ActorAddress, spec: KindSpec, name: str
    ) -> None:
        """The last supervisor on a call's way (a kind supervisor, a RunActor): start the
        resource actor if needed and hand the call (`route.call`, decoded: `call`) over."""
        rec = self.ensure_child(
            spec.kind, call.key, name, spec.child, spec.actor_class, spec.config
        )
        self.deliver(rec, call, route.call, reply_to, newer_than=route.after_incarnation)

    def deliver(
        self, rec: ChildRecord, call: Call, data: bytes, reply_to: ActorAddress, newer_than: int = 0
    ) -> bool:
        """Hand the host's call on to the child `rec` (`data`: the encoded Call for a
        resource child, the encoded Route for a supervisor on the way), or answer it with
        the reason it cannot be served. Returns True if the call went to (or waits for) the
        child. `newer_than`: the caller saw that incarnation go, so it counts as restarting
        even if it is still exiting. A call on its way through a supervisor that restarts
        waits for it (it has started nothing yet); a call for a resource that restarts
        waits only if it is idempotent."""
        live = rec.state in (NodeState.READY, NodeState.STARTING) and rec.address is not None
        if live and rec.incarnation > newer_than:
            if rec.pid:
                self._hand_over(rec, call, data, reply_to)
            else:  # the host is told the pid with the call and watches it while it waits
                rec.waiting.append((data, reply_to, call))
            return True
        if rec.state == NodeState.FAILED:
            self.send_error(reply_to, call.call_id, rec.error_code, rec.last_error)
            return False
        if call.idempotent or not self.children_called_by_host:
            rec.waiting.append((data, reply_to, call))
            return True
        if rec.stop_reason is ExitReason.SHUTDOWN:
            state = f"{rec.name} is stopping ({rec.last_error or 'asked to'})"
        else:  # restarting, or going down to be restarted: count the restart that is coming
            coming = len(rec.restart_times) + (0 if rec.state == NodeState.RESTARTING else 1)
            state = (
                f"{rec.name} is restarting (restart {coming} of {rec.spec.max_restarts} in "
                f"{rec.spec.period:g} s; last error: {rec.last_error or 'none'})"
            )
        self.send_error(
            reply_to, call.call_id, ErrorCode.RESTARTING, f"{state}; try again in a moment"
        )
        return False

    def _flush_waiting(self, rec: ChildRecord) -> None:
        if not rec.waiting or rec.address is None or not rec.pid:
            return
        waiting, rec.waiting = rec.waiting, []
        now = time.monotonic()
        for data, reply_to, call in waiting:
            if not call.deadline or call.deadline > now:
                self._hand_over(rec, call, data, reply_to)

    def _fail_waiting_calls(self, rec: ChildRecord, started: Started) -> None:
        """The child failed to start: the calls held for it get that error, as the calls
        it had taken did."""
        if started.unavailable:
            code, message = ErrorCode.UNAVAILABLE, started.error
        else:
            code, message = ErrorCode.RESOURCE_DIED, f"{rec.name} failed to start: {started.error}"
        self._fail_waiting(rec, code, message)

    def _hand_over(self, rec: ChildRecord, call: Call, data: bytes, reply_to: ActorAddress) -> None:
        # the host hears first who has the call, so it is in before the answer
        via = not self.children_called_by_host
        run_id = "" if via else self.route_run_id
        info = RouteInfo(rec.kind, rec.key, rec.incarnation, rec.pid, call.call_id, run_id, via)
        self.send(reply_to, (encode(info), rec.address))
        self.send(rec.address, (data, reply_to))

    def _fail_waiting(self, rec: ChildRecord, code: str, message: str) -> None:
        waiting, rec.waiting = rec.waiting, []
        for _, reply_to, call in waiting:
            self.send_error(reply_to, call.call_id, code, message)

    # --- fault injection -------------------------------------------------------------
    def route_inject(self, inject: Inject, data: bytes, reply_to: ActorAddress) -> None:
        for rec in self.children.values():
            if inject.target == rec.name:
                if inject.fault == "crash_actor":
                    self._crash_child(rec, inject, reply_to)
                elif rec.address is not None and rec.state in (NodeState.READY, NodeState.STARTING):
                    self.send(rec.address, (data, reply_to))
                else:
                    self.reply_inject(
                        reply_to,
                        inject,
                        False,
                        f"{rec.name} is {rec.state}; nothing to inject into",
                    )
                return
            if inject.target.startswith(rec.name + "/") and rec.address is not None:
                self.send(rec.address, (data, reply_to))
                return
        names = sorted(rec.name for rec in self.children.values())
        self.reply_inject(
            reply_to,
            inject,
            False,
            f"no actor named {inject.target!r} under {self.name or 'root'}; "
            f"known here: {', '.join(names) or 'none'} (names are as rt.health() shows them)",
        )

    def _crash_child(self, rec: ChildRecord, inject: Inject, reply_to: ActorAddress) -> None:
        if not rec.pid:
            self.reply_inject(reply_to, inject, False, f"{rec.name} has not started yet; try again")
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(rec.pid, signal.SIGKILL)
        said = f"SIGKILLed the actor process of {rec.name} (pid {rec.pid})"
        self.reply_inject(reply_to, inject, True, said)

    # --- health ----------------------------------------------------------------------
    def supervisor_node(self) -> HealthNode:
        return {**self.health_node(), "name": self.name or "root", "kind": self.kind or "root"}

    def health_extra_node(self) -> NodeExtra:
        return {}

    def handle_exit_request(self) -> None:
        self.state = NodeState.STOPPED

    def release(self) -> None:
        for rec in self.children.values():
            self._reap_owned(rec)
