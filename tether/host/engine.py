"""The host's call engine: route, send, wait, retry.

`Runtime` boots the tree and hands the engine its root; every call a tool makes goes
through `CallEngine.call` (or `gather`, several at once). One path for every kind:

- **Route.** A call goes straight to its resource actor when the host knows it (on the
  calling thread's call channel, `tether.channels`, else through thespian); otherwise as a
  `Route` to the nearest supervisor on its way that the host knows (`host_routes.hops`),
  which passes it down and says who took it (`RouteInfo`). Shared kinds (language
  servers, parser slots) and run kinds (kernels, debug sessions, workers) differ only in
  that way down: root -> kind supervisor -> actor, or root -> runs -> RunActor -> actor.
- **Wait.** `_Wait` collects the answers of one thread's calls until each has one or the
  deadline passed. Replies carry the call id; anything else that arrives (a late reply to
  a call that already timed out) is dropped, never handed to the next call.
- **Watch and retry.** While it waits, the host watches the process holding each call:
  the resource actor (its call channel closing tells at once, its pid within
  `WATCH_PERIOD`) or the supervisor on the way. A call on a process that went is retried
  once if it is idempotent and failed with `resource_died` otherwise
  (`policy.call_outcome_when_gone`); an actor that is going says MOVED for the calls it
  cannot serve.

Thespian's `ask` is not thread-safe and hands a late reply to the next ask, so each thread
has its own private() context (`tether.host.contexts`) and every call its own id.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tether.call_scope import CancelHandle
from tether.channels import ChannelGone, HostChannel, HostChannels, wait_readable
from tether.host.contexts import Contexts, post
from tether.host.routes import (
    ROOT,
    DirectRoute,
    Flight,
    Gone,
    RouteTable,
    Target,
    target_name,
)
from tether.kinds import KindSpec, Scope
from tether.messages.calls import Call, ErrorCode, Reply, ResourceError
from tether.messages.codec import CodecError, decode, encode
from tether.messages.control import CancelCall, ListHops, Route, RouteInfo
from tether.messages.ops import is_op, op_args, op_name
from tether.supervisors.policy import GoneAction, call_outcome_when_gone

DEFAULT_CALL_TIMEOUT = 30.0
WATCH_PERIOD = 0.5  # while a call waits, how often the host checks the process holding it
# a wait for answers both on call channels and through thespian looks at each in turn, this
# long at most (rare: a gather that mixes first and repeat calls, or a retry mid-gather)
MIXED_WAIT_SLICE = 0.002
# a call whose way went through a supervisor that was already gone is sent again this much
# later (its parent has not noticed yet), this many times at most
RESEND_DELAY = 0.02
MAX_RESENDS = 50
# a wait looks this often whether the tree broke under it (its admin or root died: the
# runtime rebuilds it, and every call open on the old one fails at once)
BROKEN_CHECK = 0.1
# while a control message (open run, health, ...) waits, how often the host checks the
# tree node holding it (rare messages: a tighter watch than a call's costs nothing)
NODE_WATCH = 0.1

Got = dict[str, tuple[Any, Any]]  # call id -> (Reply | ResourceError | report, extra)


class NodeGone(Exception):
    """The tree node a control message went to died before it answered."""


class CallEngine:
    def __init__(
        self,
        asys: Any,
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
        op: str | Any,
        args: Mapping[str, Any] | None,
        timeout: float,
        idempotent: bool,
    ) -> tuple[Call, bytes]:
        """`op`: an op instance of the kind's vocabulary (`tether.messages.ops`), or its
        name with `args`."""
        if is_op(op):
            if args:
                raise ResourceError(
                    ErrorCode.BAD_REQUEST,
                    f"{op_name(op)} is an op instance: its fields are its arguments, pass no args",
                )
            op, args = op_name(op), op_args(op)
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
            op=op,
            args=dict(args or {}),
            deadline=time.monotonic() + timeout,
            idempotent=bool(idempotent),
            run_scoped=spec.scope is Scope.RUN,
        )
        try:
            return call, encode(call)
        except CodecError as exc:
            raise ResourceError(
                ErrorCode.BAD_REQUEST,
                f"arguments of {kind}.{op} cannot be sent to an actor: {exc}; use str, int, "
                "float, bool, None, lists and dicts only",
            ) from exc

    def call(
        self,
        run_id: str,
        kind: str,
        key: str,
        op: str | Any,
        args: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_CALL_TIMEOUT,
        idempotent: bool = False,
        cancel: CancelHandle | None = None,
    ) -> dict[str, Any]:
        """Ask the resource actor (kind, key) of run `run_id` to do `op` (an op instance, or
        its name with `args`). Returns its
        payload; raises ResourceError with a clear message on any failure. Never waits past
        `timeout`; a `cancel` that fires ends the wait (CANCELLED) and tells the actor.
        Thread-safe."""
        self.check_open()
        call, data = self.make_call(run_id, kind, key, op, args, timeout, idempotent)
        flights = self.run_flights([Flight(call, data)], call.deadline, cancel)
        return self._payload(flights[0], timeout)

    def gather(
        self,
        run_id: str,
        calls: Sequence[tuple[str, str, str | Any, Mapping[str, Any] | None]],
        timeout: float = DEFAULT_CALL_TIMEOUT,
        idempotent: bool = False,
        cancel: CancelHandle | None = None,
    ) -> list[dict[str, Any] | ResourceError]:
        """Send every (kind, key, op, args) at once and collect the answers, in order.
        A failed or late one is a ResourceError in its slot; the whole gather never waits
        past `timeout`."""
        self.check_open()
        prepared: list[Flight | ResourceError] = []
        for kind, key, op, args in calls:
            try:
                prepared.append(
                    Flight(*self.make_call(run_id, kind, key, op, args, timeout, idempotent))
                )
            except ResourceError as exc:
                prepared.append(exc)
        flights = [f for f in prepared if isinstance(f, Flight)]
        answers = iter(self.run_flights(flights, time.monotonic() + timeout, cancel))
        results: list[dict[str, Any] | ResourceError] = []
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
    ) -> list[tuple[Flight, Reply | ResourceError | None]]:
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
        got = _Wait(self, ctx, waiting, deadline, sent, cancel=cancel).run() if waiting else {}
        got.update(refused)
        return [(f, got[f.call.call_id][0] if f.call.call_id in got else None) for f in flights]

    def send(self, ctx: Any, flight: Flight) -> None:
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

    def _send_direct(self, ctx: Any, flight: Flight, route: DirectRoute) -> None:
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
        address: Any,
        msg: Any,
        call_id: str,
        timeout: float,
        what: str,
        holder: DirectRoute | None = None,
    ) -> tuple[Reply, Any]:
        """One control message and its answer (never inside another wait of this thread).
        `holder`: the node it goes to; if its process goes, `NodeGone` is raised."""
        self.check_open()
        ctx = self.contexts.get()
        self.tell(ctx, address, encode(msg))
        wait = _Wait(self, ctx, {call_id}, time.monotonic() + timeout, {}, holder)
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
        return answer, extra

    def ask_node(
        self, target: Target, msg: Any, call_id: str, timeout: float, what: str
    ) -> tuple[Reply, Any]:
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
                return self.ask(
                    route.address, msg, call_id, deadline - time.monotonic(), what, holder=route
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
        reply, addresses = self.ask(
            root.address, msg, msg.call_id, max(timeout, 0.001), "find the tree's supervisors"
        )
        self.learn_tree(reply.payload, addresses)
        return {
            name: (state, error) for name, (state, error) in reply.payload.get("down", {}).items()
        }

    def learn_tree(self, payload: Mapping[str, Any], addresses: Mapping[str, Any]) -> None:
        """The root's answer to Hello or ListHops: where its supervisors are."""
        for kind, key, incarnation, pid in payload.get("hops", []):
            address = addresses.get(f"{kind}:{key}")
            if address is not None:
                self.routes.add(("", kind, key), address, int(incarnation), int(pid))

    def tell(self, ctx: Any, address: Any, data: bytes) -> None:
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

    def _payload(
        self, answer: tuple[Flight, Reply | ResourceError | None], timeout: float
    ) -> dict[str, Any]:
        flight, reply = answer
        if reply is None:
            raise self.deadline_error(flight.call, timeout)
        if isinstance(reply, ResourceError):
            raise reply
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


class _Wait:
    """One wait of one thread: the answers for `wanted` call ids, until each has one or
    `deadline` passed. `flights` are the calls among them the engine routes (and retries);
    the others are control messages (health, open run, ...)."""

    def __init__(
        self,
        engine: CallEngine,
        ctx: Any,
        wanted: set[str],
        deadline: float,
        flights: dict[str, Flight],
        holder: DirectRoute | None = None,
        cancel: CancelHandle | None = None,
    ):
        self.engine = engine
        self.cancel = cancel
        self.ctx = ctx
        self.wanted = wanted
        self.deadline = deadline
        self.flights = flights
        self.holder = holder  # the node a control message went to (watched like a flight's)
        self.holder_gone = False
        self.got: Got = {}

    def open(self) -> list[Flight]:
        return [f for i, f in self.flights.items() if i not in self.got]

    def run(self) -> Got:
        watched = bool(self.flights) or self.holder is not None
        period = WATCH_PERIOD if self.flights else NODE_WATCH
        next_check = time.monotonic() + period
        while len(self.got) < len(self.wanted):
            now = time.monotonic()
            if self.engine.broken is not None:
                self._fail_all(self.engine.broken)
                break
            if self.cancel is not None and self.cancel.cancelled:
                self._cancel_open(self.cancel.reason)
                break
            if now >= self.deadline:
                break
            if watched and now >= next_check:
                next_check = now + period
                if self.holder is not None and not self.holder.alive():
                    self.holder_gone = True
                    break
                self._check_holders()
                continue
            self._resend_due(now)
            wake = min(self.deadline, now + BROKEN_CHECK)
            if watched:
                wake = min(wake, next_check)
            resends = [f.resend_at for f in self.open() if f.resend_at]
            if resends:
                wake = min(wake, *resends)
            self._receive(max(wake - now, 0.0))
        return self.got

    def _fail_all(self, error: ResourceError) -> None:
        for ident in self.wanted - set(self.got):
            self.got[ident] = (error, None)

    def _cancel_open(self, reason: str) -> None:
        """The caller gave up: tell each actor holding one of our calls (one still on its way
        through a supervisor runs on; its late reply is dropped) and answer CANCELLED. The
        word goes on a call channel even when the call went through thespian: an actor
        busy in one long handler (a parser slot inside a candidate) reads its channel at
        its budget checks, but its thespian mail only after the handler."""
        for flight in self.open():
            data = encode(CancelCall(flight.call.call_id, reason))
            route = flight.route
            with contextlib.suppress(ChannelGone, OSError, ResourceError):
                channel = flight.channel
                if channel is None and route is not None:
                    channel = self.engine.channels.get(route.pid, route.create_time)
                if channel is not None and channel.send(data, 0.05):
                    continue
                if route is not None:
                    self.engine.tell(self.ctx, route.address, data)
        self._fail_all(
            ResourceError(ErrorCode.CANCELLED, f"cancelled: {reason or 'the caller gave up'}")
        )

    def _receive(self, wait: float) -> None:
        channels = self._open_channels()
        if channels:
            # only answers on call channels are awaited: wait on those alone
            on_channels = {f.call.call_id for f in self.open() if f.channel is not None}
            only_channels = not (self.wanted - set(self.got) - on_channels)
            self._read_channels(channels, wait if only_channels else 0.0)
            if only_channels:
                return
            wait = min(wait, MIXED_WAIT_SLICE)
        try:
            msg = self.ctx.listen(wait)
        except Exception as exc:  # the endpoint was closed under us (shutdown)
            raise self.engine.transport_error(exc) from exc
        if msg is not None:
            self._take(msg)

    def _open_channels(self) -> list[HostChannel]:
        """The call channels the calls still awaited were sent on."""
        channels: dict[int, HostChannel] = {}
        for flight in self.open():
            if flight.channel is not None:
                channels[id(flight.channel)] = flight.channel
        return list(channels.values())

    def _read_channels(self, channels: list[HostChannel], wait: float) -> None:
        """Take the replies that arrived on `channels` within `wait`. A channel its actor
        closed means that actor process is gone, like a pid that disappeared."""
        for channel in wait_readable(channels, wait):
            frames = channel.receive()
            if frames is None:
                for flight in self.open():
                    if flight.channel is channel:
                        self._holder_gone(flight, " (its call channel closed)")
                continue
            for data in frames:
                self._take(data)

    def _take(self, msg: Any) -> None:
        """One message that arrived while waiting."""
        extra = None
        if isinstance(msg, tuple) and len(msg) == 2 and isinstance(msg[0], bytes):
            msg, extra = msg
        if not isinstance(msg, bytes):
            return  # a thespian system message (e.g. a poison notice); not ours
        try:
            obj = decode(msg)
        except CodecError:
            return
        if isinstance(obj, RouteInfo):
            self._route_info(obj, extra)
            return
        ident = getattr(obj, "call_id", None) or getattr(obj, "query_id", None)
        if ident not in self.wanted or ident in self.got:
            return
        flight = self.flights.get(ident)
        if flight is not None and isinstance(obj, Reply) and obj.error == ErrorCode.MOVED:
            self._moved(flight, obj)
            return
        self.got[ident] = (obj, extra)

    def _route_info(self, info: RouteInfo, address: Any) -> None:
        """A supervisor handed a call on: learn where that node is; the call's holder is
        now that process (watched while we wait)."""
        route = self.engine.routes.learn(info, address)
        flight = self.flights.get(info.call_id)
        if flight is None or info.call_id in self.got:
            return
        if info.via:
            flight.via = route
            if not route.alive():  # handed to a supervisor already gone: it started nothing
                self._resend_later(flight, route)
        elif info.incarnation > flight.after_incarnation:
            # (not a stale word on a gone attempt)
            flight.route, flight.incarnation, flight.via = route, info.incarnation, None

    def _moved(self, flight: Flight, reply: Reply) -> None:
        """The actor serving the call is going and could not serve it: send it once more."""
        incarnation = int(reply.payload.get("incarnation", 0))
        if incarnation <= flight.after_incarnation:
            return  # from an incarnation this call was already sent on from
        self.engine.routes.forget(flight.target, incarnation)
        if not reply.payload.get("started", True):  # never ran there: just send it on
            flight.send_after(incarnation, as_retry=False)
            self.engine.send(self.ctx, flight)
            return
        self._gone(flight, Gone(flight.target, incarnation, "crash", reply.message))

    def _check_holders(self) -> None:
        """Every WATCH_PERIOD: a call held by a process that is gone will never be answered."""
        for flight in self.open():
            holder = flight.route or flight.via
            if holder is not None and not holder.alive():
                self._holder_gone(flight)

    def _holder_gone(self, flight: Flight, how: str = "") -> None:
        """The process holding `flight` is gone: so is its incarnation, and every call open
        on it fails or is retried."""
        holder = flight.route or flight.via
        assert holder is not None  # (a call on a channel was sent to a known route)
        self.engine.routes.forget(holder.target, holder.incarnation)
        if flight.route is None:  # a supervisor on the way died with it
            if flight.call.idempotent:  # not the resource failing it: not its one retry
                self._resend_later(flight, holder)
                return
            error = f"{target_name(holder.target)} (pid {holder.pid}) died on the call's way"
            self._gone(flight, Gone(flight.target, flight.after_incarnation, "crash", error))
            return
        error = f"its actor process {holder.pid} is gone{how}"
        gone = Gone(holder.target, holder.incarnation, "crash", error)
        for other in self.open():
            if other.serves(gone.target, gone.incarnation):
                self._gone(other, gone)

    def _gone(self, flight: Flight, gone: Gone) -> None:
        outcome = call_outcome_when_gone(
            flight.call, flight.retried, gone.reason, gone.error, time.monotonic()
        )
        match outcome.action:
            case GoneAction.RETRY:
                flight.send_after(gone.incarnation, as_retry=True)
                self._send(flight)
            case GoneAction.ERROR:
                error = ResourceError(outcome.code or ErrorCode.FAILED, outcome.message)
                self.got[flight.call.call_id] = (error, None)

    def _resend_later(self, flight: Flight, dead: DirectRoute) -> None:
        self.engine.routes.forget(dead.target, dead.incarnation)
        flight.via = None
        flight.resends += 1
        if flight.resends > MAX_RESENDS:
            message = f"{target_name(dead.target)} keeps dying on the call's way; check rt.health()"
            self.got[flight.call.call_id] = (ResourceError(ErrorCode.UNAVAILABLE, message), None)
            return
        flight.resend_at = time.monotonic() + RESEND_DELAY

    def _resend_due(self, now: float) -> None:
        for flight in self.open():
            if flight.resend_at and flight.resend_at <= now:
                flight.resend_at = 0.0
                self._send(flight)

    def _send(self, flight: Flight) -> None:
        try:
            self.engine.send(self.ctx, flight)
        except ResourceError as exc:
            self.got[flight.call.call_id] = (exc, None)
