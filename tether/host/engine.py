"""The host's call engine: route, send, wait, retry.

`Runtime` boots the tree and hands the engine its root; every call a tool makes goes
through `CallEngine.call` (or `gather`, several at once). One path for every kind:

- **Route.** A call goes straight to its resource actor when the host knows it (on the
  calling thread's call channel, `tether.channels`, else through thespian); otherwise as a
  `Route` to the nearest supervisor on its way that the host knows (`host_routes.hops`),
  which passes it down and says who took it (`RouteInfo`). Shared kinds (language
  servers, parser slots) and run kinds (kernels, debug sessions, workers) differ only in
  that way down: root -> kind supervisor -> actor, or root -> runs -> RunActor -> actor.
- **Wait.** `CallWait` (`tether.host.wait`) collects the answers of one thread's calls until each has one or the
  deadline passed. Replies carry the call id; anything else that arrives (a late reply to
  a call that already timed out) is dropped, never handed to the next call.
- **Watch and retry.** While it waits, the host watches the process holding each call:
  the resource actor (its call channel closing tells at once, its pid within
  `WATCH_PERIOD`) or the supervisor on the way. A call on a process that went is retried
  once if it is idempotent (its op's vocabulary says so: `is_idempotent`, set on the call
  as it is built) and failed with `resource_died` otherwise
  (`policy.call_outcome_when_gone`); an actor that is going says MOVED for the calls it
  cannot serve.

Thespian's `ask` is not thread-safe and hands a late reply to the next ask, so each thread
has its own private() context (`tether.host.contexts`) and every call its own id.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from tether.call_scope import CancelHandle
from tether.channels import ChannelGone, HostChannels
from tether.host.contexts import Contexts, post
from tether.host.routes import (
    ROOT,
    DirectRoute,
    Flight,
    RouteTable,
    Target,
    target_name,
)
from tether.host.wait import Answer, CallWait, Extra, Got
from tether.kinds import KindSpec, Scope
from tether.messages.calls import Call, ErrorCode, Reply, ResourceError, Wire, WireValue
from tether.messages.codec import CodecError, encode
from tether.messages.control import (
    CloseRun,
    HealthQuery,
    HealthReport,
    Hello,
    Inject,
    ListHops,
    ListKeys,
    OpenRun,
    Route,
)
from tether.messages.ops import is_idempotent, op_args, op_name

if TYPE_CHECKING:
    from thespian.actors import ActorAddress, ActorSystem, ExternalContext  # (no published types)

    from tether.runtime_port import GatherCall, Op

# a control message the host asks a tree node (`ask`), and what it is answered with
Control = Hello | ListHops | OpenRun | CloseRun | ListKeys | HealthQuery | Inject
A = TypeVar("A", Reply, HealthReport)

DEFAULT_CALL_TIMEOUT = 30.0


class NodeGone(Exception):
    """The tree node a control message went to died before it answered."""


class CallEngine:
    def __init__(
        self,
        asys: ActorSystem,
        kinds: Mapping[str, KindSpec],
        next_id: Callable[[], str],
        closed: Callable[[], bool],
        system_died: Callable[[str], ResourceError | None],
    ):
        self.contexts = Contexts(asys)
        self.routes = RouteTable()
        self.channels = HostChannels()
        self.kinds = kinds
        self.next_id = next_id
        self._closed = closed
        self._system_died = system_died
        # set when this tree's admin or root died: every call on it fails with this error
        # (the runtime builds a new tree with a new engine)
        self.broken: ResourceError | None = None
        # consulted before a call the host has no route for goes to a supervisor (it may
        # start a resource): raises ResourceError(CAPACITY) when the tree's memory budget
        # cannot hold it (tether.capacity.governor; None: no budget kept)
        self.admit: Callable[[Call], None] | None = None

    def break_tree(self, error: ResourceError) -> None:
        """This engine's tree is gone: fail every call open on it (their waits look every
        BROKEN_CHECK) and every call still to come, with `error`."""
        self.broken = error

    def close(self) -> None:
        """Close every thread's endpoints (before thespian's shutdown, which waits ~10 s on
        open ones) and call channels."""
        self.contexts.close_all()
        self.channels.close_all()

    def check_open(self) -> None:
        if self._closed():
            raise ResourceError(
                ErrorCode.UNAVAILABLE,
                "the runtime is shut down; start a new one with Runtime.start()",
            )
        if self.broken is not None:
            raise self.broken

    # --- calls -----------------------------------------------------------------------
    def make_call(
        self,
        run_id: str,
        kind: str,
        key: str,
        op: Op,
        args: Mapping[str, WireValue] | None,
        timeout: float,
    ) -> tuple[Call, bytes]:
        """`op`: an op instance of the kind's vocabulary (`tether.messages.ops`), or its
        name with `args`. (`args`, like Call.args and Reply.payload: msgpack values and the
        registered dataclasses that travel inside them, shaped by each op.) The call is
        idempotent when its op's vocabulary says so (`is_idempotent`: never a bare name)."""
        if isinstance(op, str):
            name = op
        else:
            if args:
                raise ResourceError(
                    ErrorCode.BAD_REQUEST,
                    f"{op_name(op)} is an op instance: its fields are its arguments, pass no args",
                )
            name, args = op_name(op), op_args(op)
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise ResourceError(
                ErrorCode.BAD_REQUEST,
                f"timeout must be a positive number of seconds, got {timeout!r}",
            )
        spec = self.kinds.get(kind)
        if spec is None:
            raise ResourceError(
                ErrorCode.BAD_REQUEST,
                f"no resource kind {kind!r} in this runtime; connected kinds: "
                f"{', '.join(sorted(self.kinds)) or 'none'}",
            )
        call = Call(
            call_id=self.next_id(),
            run_id=str(run_id),
            kind=kind,
            key=str(key),
            op=name,
            args=dict(args or {}),
            deadline=time.monotonic() + timeout,
            idempotent=is_idempotent(op),
            run_scoped=spec.scope is Scope.RUN,
        )
        try:
            return call, encode(call)
        except CodecError as exc:
            raise ResourceError(
                ErrorCode.BAD_REQUEST,
                f"arguments of {kind}.{name} cannot be sent to an actor: {exc}; use str, int, "
                "float, bool, None, lists and dicts only",
            ) from exc

    def call(
        self,
        run_id: str,
        kind: str,
        key: str,
        op: Op,
        args: Mapping[str, WireValue] | None = None,
        timeout: float = DEFAULT_CALL_TIMEOUT,
        cancel: CancelHandle | None = None,
    ) -> Wire:
        """Ask the resource actor (kind, key) of run `run_id` to do `op` (an op instance, or
        its name with `args`). Returns its
        payload; raises ResourceError with a clear message on any failure. Never waits past
        `timeout`; a `cancel` that fires ends the wait (CANCELLED) and tells the actor.
        Thread-safe."""
        self.check_open()
        call, data = self.make_call(run_id, kind, key, op, args, timeout)
        flights = self.run_flights([Flight(call, data)], call.deadline, cancel)
        return self._payload(flights[0], timeout)

    def gather(
        self,
        run_id: str,
        calls: Sequence[GatherCall],
        timeout: float = DEFAULT_CALL_TIMEOUT,
        cancel: CancelHandle | None = None,
    ) -> list[Wire | ResourceError]:
        """Send every (kind, key, op, args) at once and collect the answers, in order.
        A failed or late one is a ResourceError in its slot; the whole gather never waits
        past `timeout`."""
        self.check_open()
        prepared: list[Flight | ResourceError] = []
        for kind, key, op, args in calls:
            try:
                prepared.append(Flight(*self.make_call(run_id, kind, key, op, args, timeout)))
            except ResourceError as exc:
                prepared.append(exc)
        flights = [f for f in prepared if isinstance(f, Flight)]
        answers = iter(self.run_flights(flights, time.monotonic() + timeout, cancel))
        results: list[Wire | ResourceError] = []
        for item in prepared:
            if isinstance(item, ResourceError):
                results.append(item)
                continue
            try:
                results.append(self._payload(next(answers), timeout))
            except ResourceError as exc:
                results.append(exc)
        return results

    def run_flights(
        self, flights: Sequence[Flight], deadline: float, cancel: CancelHandle | None = None
    ) -> list[tuple[Flight, Answer | None]]:
        """Send `flights` and wait for their answers (None: none before the deadline)."""
        ctx = self.contexts.get()
        by_id = {f.call.call_id: f for f in flights}
        refused: Got = {}
        for flight in flights:
            try:
                self.send(ctx, flight)
            except ResourceError as exc:  # refused before it left (capacity): its own answer
                if exc.code != ErrorCode.CAPACITY:
                    raise
                refused[flight.call.call_id] = (exc, None)
        waiting = set(by_id) - set(refused)
        sent = {i: f for i, f in by_id.items() if i in waiting}
        got = CallWait(self, ctx, waiting, deadline, sent, cancel=cancel).run() if waiting else {}
        got.update(refused)
        return [(f, got[f.call.call_id][0] if f.call.call_id in got else None) for f in flights]

    def send(self, ctx: ExternalContext, flight: Flight) -> None:
        """Send a call on its way: straight to its resource actor when the host knows it,
        else as a Route to the nearest supervisor on its way."""
        if self.broken is not None:
            raise self.broken
        call = flight.call
        if call.run_scoped and self.routes.closed_since(call.run_id, flight.made):
            raise ResourceError(
                ErrorCode.UNAVAILABLE,
                f"run {call.run_id!r} was closed while this call was on its way, so its "
                f"{call.kind} {call.key!r} is gone; open the run again to use it",
            )
        route = self.routes.get(flight.target)
        if route is not None and route.incarnation > flight.after_incarnation:
            try:
                self._send_direct(ctx, flight, route)
                return
            except ChannelGone:  # it is going, and has not got the call: ask its supervisor
                self.routes.forget(flight.target, route.incarnation)
        flight.route = flight.incarnation = flight.channel = None
        if self.admit is not None:
            self.admit(call)
        hop = self.routes.nearest_hop(call)
        if hop is None:
            raise ResourceError(
                ErrorCode.UNAVAILABLE,
                "the actor tree's root is gone, so no call can be routed; shut this runtime "
                "down and start a new one",
            )
        flight.via = hop
        self.tell(ctx, hop.address, encode(Route(flight.data, flight.after_incarnation)))

    def _send_direct(self, ctx: ExternalContext, flight: Flight, route: DirectRoute) -> None:
        """Send to the actor itself: on this thread's call channel to it, or through thespian
        when the channel is busy. ChannelGone: the actor is stopping or gone, nothing sent."""
        flight.route, flight.incarnation, flight.via = route, route.incarnation, None
        channel = self.channels.get(route.pid, route.create_time)
        if channel is not None and channel.send(
            flight.data, flight.call.deadline - time.monotonic()
        ):
            flight.channel = channel
        else:
            flight.channel = None
            self.tell(ctx, route.address, flight.data)

    # --- control messages to the tree ------------------------------------------------
    def ask(
        self,
        address: ActorAddress,
        msg: Control,
        call_id: str,
        timeout: float,
        what: str,
        holder: DirectRoute | None = None,
        *,
        expect: type[A],
    ) -> tuple[A, Extra]:
        """One control message and its answer, an `expect` (never inside another wait of
        this thread). `holder`: the node it goes to; if its process goes, `NodeGone` is
        raised."""
        self.check_open()
        ctx = self.contexts.get()
        self.tell(ctx, address, encode(msg))
        wait = CallWait(self, ctx, {call_id}, time.monotonic() + timeout, {}, holder)
        got = wait.run()
        if call_id not in got:
            if wait.holder_gone:
                raise NodeGone(what)
            raise ResourceError(
                ErrorCode.DEADLINE, f"no answer within {timeout:g} s when trying to {what}"
            )
        answer, extra = got[call_id]
        if isinstance(answer, ResourceError):
            raise answer
        if not isinstance(answer, expect):
            raise ResourceError(
                ErrorCode.FAILED,
                f"the tree answered {type(answer).__name__} where {expect.__name__} was due "
                f"when trying to {what}",
            )
        return answer, extra

    def ask_node(
        self,
        target: Target,
        msg: Control,
        call_id: str,
        timeout: float,
        what: str,
        *,
        expect: type[A],
    ) -> tuple[A, Extra]:
        """`ask` a supervisor of the tree. One that restarted is found again through the
        root (which answers once it is up), and one that dies while it holds `msg` is
        asked again (the control messages are safe to repeat: open, close, list, health),
        all within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            route = self.routes.get(target)
            if route is None:
                down = self.learn_hops(deadline - time.monotonic(), wait_for=target)
                route = self.routes.get(target)
                if route is None:
                    state, error = down.get(f"{target[1]}:{target[2]}", ("gone", ""))
                    raise ResourceError(
                        ErrorCode.GAVE_UP if state == "failed" else ErrorCode.RESTARTING,
                        f"{target_name(target)} is {state}"
                        f"{' (' + error + ')' if error else ''}, so could not {what}; "
                        + ("check rt.health()" if state == "failed" else "try again in a moment"),
                    )
            try:
                left = deadline - time.monotonic()
                return self.ask(
                    route.address, msg, call_id, left, what, holder=route, expect=expect
                )
            except NodeGone:  # (it started nothing we wait for: ask its successor)
                self.routes.forget(target, route.incarnation)

    def learn_hops(
        self, timeout: float = 5.0, wait_for: Target | None = None
    ) -> dict[str, tuple[str, str]]:
        """Ask the root where its supervisors are now (once `wait_for` is up, if it is
        restarting); returns those that are not up: "kind:key" -> (state, last error)."""
        root = self.routes.get(ROOT)
        if root is None:
            raise self.broken or ResourceError(
                ErrorCode.UNAVAILABLE, "the actor tree's root is gone; check rt.health()"
            )
        msg = ListHops(self.next_id(), f"{wait_for[1]}:{wait_for[2]}" if wait_for else "")
        what = "find the tree's supervisors"
        reply, addresses = self.ask(
            root.address, msg, msg.call_id, max(timeout, 0.001), what, expect=Reply
        )
        assert isinstance(addresses, dict)  # (the root sends its supervisors' addresses by name)
        self.learn_tree(reply.payload, addresses)
        down = reply.payload.get("down", {})
        assert isinstance(down, dict)  # {"kind:key": [state, last_error]} (RootSupervisor)
        found: dict[str, tuple[str, str]] = {}
        for name, entry in down.items():
            assert isinstance(entry, list)
            state, error = entry
            found[name] = (str(state), str(error))
        return found

    def learn_tree(
        self, payload: Mapping[str, WireValue], addresses: Mapping[str, ActorAddress]
    ) -> None:
        """The root's answer to Hello or ListHops: where its supervisors are."""
        hops = payload.get("hops", [])
        assert isinstance(hops, list)  # [[kind, key, incarnation, pid], ...] (RootSupervisor)
        for hop in hops:
            assert isinstance(hop, list)
            kind, key, incarnation, pid = hop
            assert isinstance(kind, str) and isinstance(key, str)
            assert isinstance(incarnation, int) and isinstance(pid, int)
            address = addresses.get(f"{kind}:{key}")
            if address is not None:
                self.routes.add(("", kind, key), address, incarnation, pid)

    def tell(self, ctx: ExternalContext, address: ActorAddress, data: bytes) -> None:
        try:
            post(ctx, address, data)  # (never waits on the receiver: the wait that follows does)
        except Exception as exc:
            raise self.transport_error(exc) from exc

    def transport_error(self, exc: Exception) -> ResourceError:
        if self.broken is not None:  # (the old tree's endpoints are closed as it goes)
            return self.broken
        if self._closed():
            return ResourceError(
                ErrorCode.UNAVAILABLE,
                "the runtime is shut down; start a new one with Runtime.start()",
            )
        return ResourceError(
            ErrorCode.UNAVAILABLE,
            f"could not reach the actor system ({type(exc).__name__}: {exc}); check rt.health() "
            "or restart the runtime",
        )

    def _payload(self, answer: tuple[Flight, Answer | None], timeout: float) -> Wire:
        flight, reply = answer
        if reply is None:
            raise self.deadline_error(flight.call, timeout)
        if isinstance(reply, ResourceError):
            raise reply
        assert isinstance(reply, Reply)  # (a call's answer: only a health query gets a report)
        if not reply.ok:
            raise ResourceError(reply.error, reply.message)
        return dict(reply.payload)

    def deadline_error(self, call: Call, timeout: float) -> ResourceError:
        if self.broken is not None:
            return self.broken
        died = self._system_died(f"{call.kind} {call.key!r}")
        if died is not None:
            return died
        return ResourceError(
            ErrorCode.DEADLINE,
            f"{call.kind} {call.key!r} did not answer {_what(call)!r} within {timeout:g} s; it may be "
            "stuck or overloaded — check rt.health(), or call again with a longer timeout",
        )


def _what(call: Call) -> str:
    """The op as the tool's caller knows it ("hover", not the wire's "navigate")."""
    action = call.args.get("action")
    return action if isinstance(action, str) and action else call.op
