"""One wait of one thread in the host's call engine: the answers of its calls, until each
has one or the deadline passed.

A thread sends its calls (`CallEngine.run_flights`, or one control message: `ask`), then
waits here, reading its call channels and its thespian context in turn. Replies carry the
call id; anything else that arrives (a late reply to a call that already timed out) is
dropped, never handed to the next call. While it waits it watches the process holding each
call (`WATCH_PERIOD`; a control message's node, `NODE_WATCH`), decides the fate of a call
whose holder went (`policy.call_outcome_when_gone`: retried once, or failed), re-sends one
whose way went through a supervisor already gone, passes a cancel on to the actor holding
the call, and fails everything at once when the tree broke under it.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, TypeAlias

from tether.call_scope import CancelHandle
from tether.channels import ChannelGone, HostChannel, wait_readable
from tether.host.routes import DirectRoute, Flight, Gone, target_name
from tether.messages.calls import ErrorCode, Reply, ResourceError
from tether.messages.codec import CodecError, decode, encode
from tether.messages.control import CancelCall, HealthReport, RouteInfo
from tether.supervisors.policy import GoneAction, call_outcome_when_gone

if TYPE_CHECKING:
    from thespian.actors import ActorAddress, ExternalContext  # (no published types)

    from tether.host.engine import CallEngine

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

# what thespian carries beside an answer's bytes: the address of the node that took a
# call (RouteInfo, OpenRun), or of each supervisor by "kind:key" (Hello, ListHops)
Extra: TypeAlias = "ActorAddress | dict[str, ActorAddress] | None"
Answer: TypeAlias = Reply | HealthReport | ResourceError
Got: TypeAlias = dict[str, tuple[Answer, Extra]]  # call id -> (answer, extra)


class CallWait:
    """One wait of one thread: the answers for `wanted` call ids, until each has one or
    `deadline` passed. `flights` are the calls among them the engine routes (and retries);
    the others are control messages (health, open run, ...)."""

    def __init__(
        self,
        engine: CallEngine,
        ctx: ExternalContext,
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

    def _take(self, msg: object) -> None:
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
        if not isinstance(obj, Reply | HealthReport):
            return  # (an answer: a call's Reply, or a health query's HealthReport)
        ident = getattr(obj, "call_id", None) or getattr(obj, "query_id", None)
        if ident not in self.wanted or ident in self.got:
            return
        flight = self.flights.get(ident)
        if flight is not None and isinstance(obj, Reply) and obj.error == ErrorCode.MOVED:
            self._moved(flight, obj)
            return
        self.got[ident] = (obj, extra)

    def _route_info(self, info: RouteInfo, address: ActorAddress) -> None:
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
        incarnation = reply.payload.get("incarnation", 0)
        assert isinstance(incarnation, int)  # (ResourceActor.moved sends its incarnation)
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
