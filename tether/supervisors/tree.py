"""The supervisors of the actor tree: root, one per shared kind, and the runs' supervisor.

    RootSupervisor                      configured by the host's Hello
    ├── KindSupervisor "supervisor:K"   one per SHARED kind K, from its first call; children "K:<key>"
    └── RunSupervisor "runs"            children "run:<run_id>" (RunActor, tether.supervisors.run)
        └── RunActor                    children "run:<run_id>/K:<key>" for RUN-scoped kinds

A host's first call for a resource travels down this tree as a `Route` from the nearest
supervisor the host knows (the root at worst), each one telling the host who took it
(`RouteInfo`); the next calls go to the resource actor directly (`tether.host.engine`).

The root also watches the host: if the host process dies, the root kills thespian's
admin process and exits, and every actor's own watchdog takes down the rest.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil
from thespian.actors import ActorAddress

from tether.health_node import NodeState
from tether.kinds import ChildSpec, KindSpec, KindSpecWire, Restart, Scope
from tether.messages.calls import Call, ErrorCode, Reply, Wire
from tether.messages.codec import decode_call, encode
from tether.messages.control import (
    CloseRun,
    Hello,
    Inject,
    ListHops,
    ListKeys,
    OpenRun,
    Route,
    Start,
)
from tether.processes import (
    TOKEN_ENV,
    children,
    close_inherited_fds,
    pid_running,
    title_tree_process,
    tree_process_title,
)
from tether.supervisors.child import ChildRecord
from tether.supervisors.core import Supervisor
from tether.supervisors.policy import ExitReason

SUPERVISOR_SPEC = ChildSpec(Restart.PERMANENT, shutdown_timeout=5.0, max_restarts=5, period=60.0)
RUN_SPEC = ChildSpec(Restart.TRANSIENT, shutdown_timeout=5.0, max_restarts=5, period=60.0)


class KindSupervisor(Supervisor):
    """Supervises the actors of one SHARED kind, one per key, started on first call."""

    children_called_by_host = True

    def __init__(self) -> None:
        super().__init__()
        self.spec: KindSpec | None = None

    def handle_message(
        self, obj: object, data: bytes, extra: ActorAddress | None, sender: ActorAddress
    ) -> None:
        if isinstance(obj, Start):
            self.spec = KindSpec.from_wire(obj.kinds[0])
        elif isinstance(obj, Route):
            assert self.spec is not None
            call = decode_call(obj.call)
            reply_to = extra if extra is not None else sender
            self.route_to_resource(obj, call, reply_to, self.spec, f"{self.spec.kind}:{call.key}")
        elif isinstance(obj, ListKeys):
            keys = sorted(k for (_, k), rec in self.children.items())
            self.send(sender, encode(Reply(obj.call_id, True, {"keys": [*keys]})))
        elif isinstance(obj, Inject) and obj.target == self.name:
            self.reply_inject(
                sender if extra is None else extra, obj, False, _not_a_target(self.name)
            )
        else:
            self.handle_supervisor_message(obj, data, extra, sender)


class RunSupervisor(Supervisor):
    """Supervises one RunActor per conversation."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds: list[KindSpecWire] = []
        self.opening: dict[str, list[tuple[str, ActorAddress]]] = {}  # run id -> OpenRuns to answer

    def handle_message(
        self, obj: object, data: bytes, extra: ActorAddress | None, sender: ActorAddress
    ) -> None:
        if isinstance(obj, Start):
            self.kinds = obj.kinds
        elif isinstance(obj, Route):  # on its way to a resource of one run: to its RunActor
            call = decode_call(obj.call)
            self.deliver(self._run(call.run_id), call, data, extra if extra is not None else sender)
        elif isinstance(obj, OpenRun):
            rec = self._run(obj.run_id)
            if rec.state == NodeState.FAILED:
                self.send_error(sender, obj.call_id, rec.error_code, rec.last_error)
            elif rec.state == NodeState.READY and rec.address is not None:
                self._opened(rec, obj.call_id, sender)
            else:  # starting, restarting, or stopping (closed a moment ago): answered once
                # a RunActor for it is up, with its pid (the host watches us meanwhile)
                self.opening.setdefault(obj.run_id, []).append((obj.call_id, sender))
        elif isinstance(obj, CloseRun):
            closing = self.children.get(("run", obj.run_id))
            if closing is not None:
                self.stop_child(closing, "run closed")
            self.send(sender, encode(Reply(obj.call_id, True, {"closed": closing is not None})))
        elif isinstance(obj, Inject) and obj.target == self.name:
            self.reply_inject(
                sender if extra is None else extra, obj, False, _not_a_target(self.name)
            )
        else:
            self.handle_supervisor_message(obj, data, extra, sender)

    def _run(self, run_id: str) -> ChildRecord:
        return self.ensure_child(
            "run",
            run_id,
            f"run:{run_id}",
            RUN_SPEC,
            "tether.supervisors.run:RunActor",
            {},
            kinds=self.kinds,
        )

    def _opened(self, rec: ChildRecord, call_id: str, reply_to: ActorAddress) -> None:
        payload: Wire = {"run_id": rec.key, "pid": rec.pid, "incarnation": rec.incarnation}
        self.send(reply_to, (encode(Reply(call_id, True, payload)), rec.address))

    def on_child_started(self, rec: ChildRecord) -> None:
        for call_id, reply_to in self.opening.pop(rec.key, []):
            self._opened(rec, call_id, reply_to)

    def on_child_gone(self, rec: ChildRecord, reason: ExitReason) -> None:
        if not self.opening.get(rec.key):
            return
        if rec.state == NodeState.FAILED or self.state == NodeState.STOPPED:
            code = rec.error_code or ErrorCode.UNAVAILABLE
            message = (
                rec.last_error if rec.state == NodeState.FAILED else "the runtime is shutting down"
            )
            for call_id, reply_to in self.opening.pop(rec.key):
                self.send_error(reply_to, call_id, code, message)
        elif ("run", rec.key) not in self.children:  # it was closed: a fresh one for them
            self._run(rec.key)
        # (restarting: answered once it started again)


class RootSupervisor(Supervisor):
    """The top of the tree. The host's Hello configures it; it answers once the runs'
    supervisor started, with where it is (`hops`, the addresses beside the Reply). A
    shared kind's supervisor starts with the first call of its kind."""

    needs_start = False  # configured by Hello, from the host itself

    def __init__(self) -> None:
        super().__init__()
        self.name = "root"
        self.kind = "root"
        self.kinds: list[KindSpec] = []
        self._admin: tuple[int, float] | None = None
        self._siblings: list[tuple[int, float]] = []
        self._hello_to: tuple[str, ActorAddress] | None = None  # answered once the children started
        # ListHops held until the supervisor they wait for is up: "kind:key" -> askers
        self._hops_waiting: dict[str, list[tuple[str, ActorAddress]]] = {}

    def handle_message(
        self, obj: object, data: bytes, extra: ActorAddress | None, sender: ActorAddress
    ) -> None:
        if isinstance(obj, Hello):
            self._hello(obj, sender)
        elif isinstance(obj, Route):  # a first call: to its kind's supervisor, or the runs'
            self._route(obj, data, extra if extra is not None else sender)
        elif isinstance(obj, ListHops):
            self._list_hops(obj, sender)
        elif isinstance(obj, Inject):
            self._route_inject(obj, data, extra if extra is not None else sender)
        else:
            self.handle_supervisor_message(obj, data, extra, sender)

    def _hello(self, hello: Hello, sender: ActorAddress) -> None:
        close_inherited_fds(self)
        title_tree_process(tree_process_title(self.kind, self.key))  # what ps shows
        # thespian's admin also runs a logger process; neither has a watchdog of its own
        with contextlib.suppress(Exception):
            admin = psutil.Process(os.getppid())
            self._admin = (admin.pid, admin.create_time())
            self._siblings = [
                (p.pid, p.create_time()) for p in children(admin.pid) if p.pid != os.getpid()
            ]
        self._host_pid, self._host_create_time = hello.host_pid, hello.host_create_time
        self._arm_watchdog()
        self.kinds = [KindSpec.from_wire(k) for k in hello.kinds]
        # a shared kind's supervisor starts with its kind's first call (_route): a tree
        # whose host never calls git or the checker carries no process for them
        self.ensure_child(
            "runs",
            "",
            "runs",
            SUPERVISOR_SPEC,
            "tether.supervisors.tree:RunSupervisor",
            {},
            kinds=hello.kinds,
        )
        self._hello_to = (hello.call_id, sender)
        self.on_child_started(None)

    def on_child_started(self, rec: ChildRecord | None) -> None:
        """Answer the Hello once every supervisor is up (the host watches their pids), and
        the ListHops that waited for this one."""
        if rec is not None:
            self._answer_waiting_hops(rec)
        if self._hello_to is None or not all(_up(r) for r in self.children.values()):
            return
        call_id, reply_to = self._hello_to
        self._hello_to = None
        self._answer_hops(call_id, reply_to)

    def on_child_gone(self, rec: ChildRecord, reason: ExitReason) -> None:
        if rec.state == NodeState.FAILED:  # given up on: it will not come up for those waiting
            self._answer_waiting_hops(rec)

    def _list_hops(self, ask: ListHops, reply_to: ActorAddress) -> None:
        kind, _, key = ask.wait_for.partition(":")
        rec = self.children.get((kind, key))
        if rec is not None and rec.state != NodeState.FAILED and not _up(rec):
            self._hops_waiting.setdefault(ask.wait_for, []).append((ask.call_id, reply_to))
            return
        self._answer_hops(ask.call_id, reply_to)

    def _answer_waiting_hops(self, rec: ChildRecord) -> None:
        for call_id, reply_to in self._hops_waiting.pop(f"{rec.kind}:{rec.key}", []):
            self._answer_hops(call_id, reply_to)

    def _answer_hops(self, call_id: str, reply_to: ActorAddress) -> None:
        # the token proves this tree was forked from the host that says Hello (tether.runtime)
        up = {f"{rec.kind}:{rec.key}": rec for rec in self.children.values() if _up(rec)}
        payload: Wire = {
            "pid": os.getpid(),
            "admin_pid": os.getppid(),
            "token": os.environ.get(TOKEN_ENV),
            "hops": [[rec.kind, rec.key, rec.incarnation, rec.pid] for rec in up.values()],
            "down": {
                f"{rec.kind}:{rec.key}": [rec.state, rec.last_error]
                for rec in self.children.values()
                if f"{rec.kind}:{rec.key}" not in up
            },
        }
        addresses = {name: rec.address for name, rec in up.items()}
        self.send(reply_to, (encode(Reply(call_id, True, payload)), addresses))

    def _route(self, route: Route, data: bytes, reply_to: ActorAddress) -> None:
        call = decode_call(route.call)
        spec = next((k for k in self.kinds if k.kind == call.kind), None)
        if spec is None:
            known = ", ".join(sorted(k.kind for k in self.kinds)) or "none"
            message = f"no resource kind {call.kind!r} in this runtime; kinds: {known}"
            self.send_error(reply_to, call.call_id, ErrorCode.BAD_REQUEST, message)
            return
        if spec.scope is Scope.SHARED:
            self.deliver(self._kind_supervisor(spec), call, data, reply_to)
            return
        runs = self.children.get(("runs", ""))
        if runs is None:
            message = f"the tree has no runs supervisor for {call.kind!r}"
            self.send_error(reply_to, call.call_id, ErrorCode.UNAVAILABLE, message)
            return
        self.deliver(runs, call, data, reply_to)

    def _kind_supervisor(self, spec: KindSpec) -> ChildRecord:
        """The supervisor of shared kind `spec`, started by its kind's first call."""
        return self.ensure_child(
            "supervisor",
            spec.kind,
            f"supervisor:{spec.kind}",
            SUPERVISOR_SPEC,
            "tether.supervisors.tree:KindSupervisor",
            {},
            kinds=[spec.to_wire()],
        )

    def _route_inject(self, inject: Inject, data: bytes, reply_to: ActorAddress) -> None:
        target = inject.target
        if target in ("root", "runs") or target.startswith("supervisor:"):
            self.reply_inject(reply_to, inject, False, _not_a_target(target))
            return
        if target.startswith("run:"):
            rec = self.children.get(("runs", ""))
        else:
            rec = self.children.get(("supervisor", target.split(":", 1)[0]))
        if rec is None or rec.address is None:
            self.route_inject(inject, data, reply_to)  # answers "no actor named ..."
            return
        self.send(rec.address, (data, reply_to))

    def _emergency_exit(self) -> None:
        """The host (or the admin) died: take thespian's admin and logger down with us (they
        have no watchdog of their own); our descendants notice and clean up after themselves."""
        with contextlib.suppress(Exception):
            self.release()
        for pid, created in [*self._siblings, *([self._admin] if self._admin else [])]:
            with contextlib.suppress(Exception):
                if abs(psutil.Process(pid).create_time() - created) < 0.01:
                    os.kill(pid, signal.SIGKILL)
        os._exit(0)

    def _owner_alive(self) -> bool:
        if not self._host_pid:
            return True
        return super()._owner_alive()


def _up(rec: ChildRecord) -> bool:
    """Is this child supervisor running (started, and its process not gone already)?"""
    return rec.address is not None and bool(rec.pid) and pid_running(rec.pid)


def _not_a_target(name: str) -> str:
    return (
        f"{name} is a supervisor: faults target resource actors (kill_process, crash_actor, "
        "delay, drop_reply) and runs (crash_actor); see rt.health() for their names"
    )


__all__ = ["Call", "KindSupervisor", "RootSupervisor", "RunSupervisor"]
