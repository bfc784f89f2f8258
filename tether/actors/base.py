"""`ResourceActor`: the base of every actor that owns a live resource (what every tether
actor shares, supervisors too, is `TetherActor` in tether.actors.actor).

A resource actor is created by its kind's supervisor with a key and a config, answers
`Call`s with exactly one `Reply` each (now or later), answers health queries, and cleans
up everything it owns when it stops. A process-owning one is a `ProcessActor`
(tether.actors.process).

    class EchoActor(ResourceActor):
        kind = "echo"
        def on_start(self, key, config): self.set_state("ready")
        def on_call(self, call): self.reply(call, {"echo": call.args})

What the base does for you, with the plain parts of tether.resources:
- Calls that arrive before `on_start` finished, or while you keep the state "starting"
  (call `self.set_state("starting")` in on_start and `set_state("ready")` when the
  resource is usable), are queued and handed to `on_call` once the state is "ready"
  (`lifecycle`: what a call arriving now gets).
- Every call is settled exactly once (`open_calls`): a second reply() / fail() for the
  same call is ignored, and a call still open when its deadline passes is failed with
  `deadline`. An exception escaping `on_call` fails that call with `failed` and the
  exception text; it never kills the actor.
- `on_start` raising `ResourceUnavailable` means "cannot run here" (the supervisor does
  not retry); raising anything else is a crash (restart policy applies). A start that must
  wait for something (a probe subprocess) calls `defer_start()` in on_start and later
  `finish_start()` or `fail_start(...)`: the message loop runs meanwhile.
- The host's warm calls come on a call channel (`call_channel`), beside thespian.
- The watchdog (TetherActor), fault injection (`faults`: delay, drop_reply; and
  kill_process, evict) and health are built in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import ClassVar, Never, cast

from thespian.actors import ActorAddress, ActorExitRequest, ThespianWatch

from tether.actors.actor import TetherActor
from tether.capacity.usage import EVICTED, UsageRecord, evicted_note, traits_of
from tether.channels import ChannelPeer
from tether.health_node import HealthNode
from tether.json_types import JSONObject
from tether.messages.calls import Call, ErrorCode, Reply, ResourceError, Wire, WireValue
from tether.messages.codec import encode
from tether.messages.control import (
    CancelCall,
    HealthQuery,
    HealthReport,
    Inject,
    Pids,
    Start,
    Started,
    Stopping,
)
from tether.places.place import PlaceError
from tether.resources.call_channel import CallChannel
from tether.resources.faults import Faults
from tether.resources.lifecycle import Admission, Lifecycle
from tether.resources.open_calls import OpenCalls
from tether.resources.timers import (
    FLUSH_RETRY,
    SWEEP_PERIOD,
    Armed,
    ChannelFlush,
    Delayed,
    Idle,
    Sweep,
)

__all__ = ["FLUSH_RETRY", "ResourceActor", "ResourceUnavailable", "TetherActor"]


class ResourceUnavailable(Exception):
    """Raise from on_start when the resource cannot run here (binary or marker missing).
    The supervisor will not retry; calls get ErrorCode.UNAVAILABLE with this message."""


class ResourceActor(TetherActor):
    """Serves calls for one (kind, key). Subclass and override the `on_*` hooks.

    Composed of plain parts (tether.resources): the open-call table (`_open`), the
    lifecycle (what a call arriving now gets), the injected faults, the call channel and
    the timers; this class does their IO (thespian sends and wakeups, the Started/Stopping
    protocol with the supervisor)."""

    kind_name: ClassVar[str] = ""  # informational; the KindSpec decides the kind

    def __init__(self) -> None:
        super().__init__()
        # (subclasses ask `call.call_id in self._open`)
        self._open: OpenCalls[ActorAddress | ChannelPeer] = OpenCalls()
        self._faults = Faults()
        self._channel = CallChannel()  # the host's direct calls
        self._life = Lifecycle()
        self._last_activity = time.monotonic()
        self._idle_ttl: float | None = None
        self._armed = Armed()  # (the base's own timers: one wakeup each at a time)
        self._evicted_note = ""  # for the first result after a predecessor was evicted
        self.previous_end = ""  # how its predecessor ended, if it had one (Start.previous_end)

    # --- to override -----------------------------------------------------------------
    def on_start(self, key: str, config: JSONObject) -> None:
        """Called once, before any call. Raise to fail the start (the supervisor decides)."""

    def on_call(self, call: Call) -> None:
        """Handle one call; settle it with reply()/fail(), now or later."""
        self.fail(
            call, ErrorCode.BAD_REQUEST, f"{self.name} does not handle calls (op {call.op!r})"
        )

    # (Never: each kind's override declares the union of its own tags, e.g. `tag: Handshake
    # | Reap`; a parameter of type `object` here would forbid an override to narrow to that)
    def on_timer(self, tag: Never) -> None:
        """A timer set with after() fired: `tag` is the object given (match on its class)."""

    def on_stop(self) -> None:
        """Release what the actor owns (ProcessActor already kills its process tree)."""

    def on_cancel(self, call: Call, reason: str) -> None:
        """The caller of the open `call` gave up (tether.call_scope): stop its work this
        kind's own way (interrupt a cell, cancel a server request). The host has answered
        the caller already; settling `call` now or later is harmless (the reply is dropped).
        By default the work runs on and its result is dropped."""

    def health_extra(self) -> JSONObject:
        """Kind-specific health fields (e.g. a language server's root and indexing state)."""
        return {}

    # --- provided --------------------------------------------------------------------
    def reply(self, call: Call, payload: Mapping[str, WireValue]) -> None:
        """Settle `call` with a result. Ignored if it was settled already."""
        notes = payload.get("notes")
        if self._evicted_note and call.call_id in self._open and isinstance(notes, list):
            # (only a reply that carries notes already: replies are typed, and a field
            # their kind does not declare is refused by the host - a kernel's cell has one)
            payload = {**payload, "notes": [*notes, self._evicted_note]}
            self._evicted_note = ""
        self._settle(call, Reply(call_id=call.call_id, ok=True, payload=dict(payload)))

    def fail(self, call: Call, code: str, message: str) -> None:
        """Settle `call` with an error (an ErrorCode and a message saying what to do next)."""
        self._settle(call, Reply(call_id=call.call_id, ok=False, error=code, message=message))

    def set_state(self, state: str, error: str = "") -> None:
        """starting | ready | busy | restarting | failed | stopped (+ last error)."""
        self.state = state
        self._life.state_explicit = True
        if error:
            self.last_error = error
        if state == "ready" and self._open.queued and self._life.started:
            for call, reply_to in self._open.take_queued():
                self._deliver(call, reply_to)

    def after(self, seconds: float, tag: object) -> None:
        """One-shot timer (wakeupAfter); on_timer(tag) is called when it fires. `tag`: a
        frozen dataclass of the subclass's own (not one of tether.resources.timers')."""
        self.wakeupAfter(seconds, tag)

    def defer_start(self) -> None:
        """Call in on_start when the start ends later, on an event (a probe's exit, a
        timer): the supervisor hears nothing and holds the host's calls until
        `finish_start()` or `fail_start(...)`; health queries are answered meanwhile."""
        self._life.deferred = True

    def finish_start(self) -> None:
        """A deferred start succeeded: what returning from on_start does."""
        if self._life.may_end_deferred():
            self._start_done()

    def fail_start(self, error: str, unavailable: bool) -> None:
        """A deferred start failed: what raising from on_start does (`unavailable`: as
        ResourceUnavailable, the supervisor does not retry; otherwise a crash)."""
        if self._life.may_end_deferred():
            self._start_failed(error, unavailable)

    def stop(self, reason: str = "normal", error: str = "") -> None:
        """Stop this actor on its own. reason: "normal" (done), "crash" (broken: the
        supervisor's restart policy applies) or "shutdown" (reaped)."""
        if self._life.stopping:
            return
        self._life.stopping = True
        if error:
            self.last_error = error
        if self._parent is not None:
            self.send_encoded(
                self._parent, Stopping(self.kind, self.key, self.incarnation, reason, error)
            )
        self.send(self.myAddress, ActorExitRequest())

    def fail_dying(self, call: Call, message: str) -> None:
        """This actor is going away with `call` open. An idempotent call is retried once on
        the next incarnation: the host is told MOVED at once and sends it on."""
        if call.idempotent and not call.retried:
            self.moved(call, message, started=True)
            return
        self.fail(call, ErrorCode.RESOURCE_DIED, message)

    def moved(self, call: Call, message: str, started: bool) -> None:
        """Tell the host this incarnation cannot serve `call` (it is going): the host sends
        it on to a newer incarnation than ours - as its one retry if we had `started` it."""
        payload: Wire = {"incarnation": self.incarnation, "started": started}
        reply = Reply(call.call_id, False, payload, ErrorCode.MOVED, message)
        self._settle(call, reply)

    def open_calls(self) -> list[Call]:
        return self._open.calls()

    def serve_arrivals(self) -> None:
        """Take the calls already waiting on the call channel now, from inside a long
        handler: they are delivered (on_call) without waiting for it to return to
        thespian's loop. Calls sent through thespian wait for the loop as usual."""
        self._read_channel(self._channel.ready_now())

    def watch_fds(self) -> list[int]:
        """Descriptors of the resource to watch (ProcessActor: its subprocess's pipes);
        handle_watch gets those that are ready."""
        return []

    # --- a call's way in and out -----------------------------------------------------
    def handle_message(
        self, obj: object, data: bytes, extra: ActorAddress | None, sender: ActorAddress
    ) -> None:  # (obj: a decoded message of any registered type: matched on)
        if isinstance(obj, Call):
            self._receive_call(obj, extra if extra is not None else sender)
        elif isinstance(obj, Start):
            self._start(obj)
        elif isinstance(obj, HealthQuery):
            node: HealthNode = {**self.health_node()}  # (a plain dict: HealthReport.node)
            self.send_encoded(sender, HealthReport(obj.query_id, node))
        elif isinstance(obj, Inject):
            self._inject(obj, extra if extra is not None else sender)
        elif isinstance(obj, CancelCall):
            self._cancel(obj)

    def _receive_call(self, call: Call, reply_to: ActorAddress) -> None:
        self._last_activity = time.monotonic()
        match self._life.admit(self.state):
            case Admission.DELIVER:  # (first: nearly every call)
                seconds = self._faults.next_delay()
                if seconds is None:
                    self._deliver(call, reply_to)
                    return
                self._open.enter(call, reply_to)
                self.wakeupAfter(seconds, Delayed(call.call_id))
                self._arm(Sweep(), SWEEP_PERIOD)
            case Admission.FAIL:
                assert self._life.start_error is not None
                self._open.enter(call, reply_to)
                self.fail(call, *self._life.start_error)
            case Admission.MOVED:
                self._open.enter(call, reply_to)
                message = (
                    f"{self.name or self.kind} is stopping ({self.last_error or 'no error'}); "
                    "call again to get a fresh one"
                )
                self.moved(call, message, started=False)  # never started here: safe to resend
            case Admission.QUEUE:
                self._open.queue(call, reply_to)
                self._arm(Sweep(), SWEEP_PERIOD)

    def _deliver(self, call: Call, reply_to: ActorAddress) -> None:
        self._open.enter(call, reply_to)
        try:
            self.on_call(call)
            cancelled = self._open.cancelled_ahead(call.call_id)
            if cancelled is not None and call.call_id in self._open:
                self.on_cancel(call, cancelled)
        except ResourceError as exc:  # (an OpError from vocabulary.parse: a malformed call)
            self.fail(call, exc.code, f"{self.name}: {exc.message}")
        except Exception as exc:
            self._log_exception(exc)
            self.fail(
                call,
                ErrorCode.FAILED,
                f"{self.name} failed on {call.op!r}: {type(exc).__name__}: {exc}",
            )
        if call.call_id in self._open:
            self._arm(Sweep(), SWEEP_PERIOD)

    def _settle(self, call: Call, reply: Reply) -> None:
        entry = self._open.settle(call.call_id)
        if entry is None or self._faults.drop():
            return  # settled already, or expired (or an injected drop)
        reply_to = entry[1]
        if isinstance(reply_to, ChannelPeer):
            if not reply_to.send(encode(reply)):
                self._arm(ChannelFlush(), FLUSH_RETRY)
        else:
            self.send(reply_to, encode(reply))

    def _cancel(self, cancel: CancelCall) -> None:
        """A call still queued for the start is dropped (nothing of it ran); an open one
        goes to on_cancel. A cancel may come before its call is delivered (read in the same
        batch; or the call came through thespian, the cancel on a call channel): it is
        kept, and the call gets on_cancel right after on_call (a kernel's ToolAnswer sent
        after its cancel must reach the cell, which is then interrupted)."""
        if self._open.unqueue(cancel.call_id):
            return
        call = self._open.get(cancel.call_id)
        if call is not None:
            self.on_cancel(call, cancel.reason)
        else:
            self._open.cancel_ahead(cancel.call_id, cancel.reason)

    # --- the start protocol (with the kind's supervisor) -----------------------------
    def _start(self, start: Start) -> None:
        self.state = "starting"
        self.previous_end = start.previous_end
        if start.previous_end.startswith(EVICTED):
            holds_state = self.usage([]).holds_state
            self._evicted_note = evicted_note(self.name, start.previous_end, holds_state)
        self._idle_ttl = start.child.get("idle_ttl")
        if start.channel and self._host_pid:
            self.last_error = self._channel.open(self._host_pid) or self.last_error
        try:
            self.on_start(start.key, start.config)
        except (ResourceUnavailable, PlaceError) as exc:  # (a place's refusal lasts)
            self._start_failed(str(exc), unavailable=True)
            return
        except Exception as exc:
            self._start_failed(f"{type(exc).__name__}: {exc}", unavailable=False)
            return
        if not self._life.deferred:
            self._start_done()

    def _start_done(self) -> None:
        self._life.started = True
        if not self._life.state_explicit:
            self.state = "ready"
        self.send_encoded(
            self._parent, Started(self.kind, self.key, self.incarnation, True, os.getpid())
        )
        self._report_pids()
        if self._idle_ttl:
            self._arm(Idle(), self._idle_ttl)
        if self.state == "ready":
            self.set_state("ready")  # flush calls queued before Start

    def _start_failed(self, error: str, unavailable: bool) -> None:
        self.state = "failed"
        start_error = self._life.start_failed(self.name, error, unavailable)
        self.last_error = error
        self.send_encoded(
            self._parent,
            Started(self.kind, self.key, self.incarnation, False, os.getpid(), error, unavailable),
        )
        for call, reply_to in self._open.take_queued():
            self._open.enter(call, reply_to)
            self.fail(call, *start_error)
        self.send(self.myAddress, ActorExitRequest())

    def _report_pids(self) -> None:
        # sent once the message being handled is done: listing a process tree takes
        # milliseconds (psutil reads /proc), which a call's reply should not wait for; a
        # process started meanwhile dies with us anyway (parent-death signal)
        self._pids_due = True

    def _send_pids(self) -> None:
        self._pids_due = False
        if self._parent is not None:
            self.send_encoded(
                self._parent, Pids(self.kind, self.key, self.incarnation, self.owned_pids())
            )

    # --- the call channel (tether.resources.call_channel) ----------------------------
    def _watch(self) -> ThespianWatch | None:
        fds = [*self._owner_fds, *self._channel.fds(), *self.watch_fds()]
        return ThespianWatch(fds) if fds else None

    def watched_ready(self, ready: list[int]) -> None:
        self._read_channel(ready)
        self.handle_watch(ready)

    def _read_channel(self, ready: list[int]) -> None:
        """Deliver the calls that came on the channel, in order (cancels act at once)."""
        cancels, error = self._channel.read(ready)
        if error:
            self.last_error = error
        for cancel in cancels:
            self._cancel(cancel)
        while (arrival := self._channel.next_arrival()) is not None:
            self._receive_call(*arrival)

    # --- timers: deadlines, idleness, delays -----------------------------------------
    def _arm(self, tag: Sweep | Idle | ChannelFlush, seconds: float) -> None:
        if self._armed.arm(tag):
            self.wakeupAfter(seconds, tag)

    def handle_wakeup(self, payload: object) -> None:  # (a tag of any class: matched on)
        if isinstance(payload, Sweep | Idle | ChannelFlush):
            self._armed.fired(payload)
        match payload:
            case Sweep():
                self._sweep()
            case ChannelFlush():
                if not self._channel.flush():
                    self._arm(ChannelFlush(), FLUSH_RETRY)
            case Delayed(call_id=call_id):
                entry = self._open.settle(call_id)
                if entry is not None:
                    self._deliver(*entry)
            case Idle():
                self._idle()
            case _:  # a subclass's own tag, armed with after(): its on_timer's type
                try:
                    self.on_timer(cast("Never", payload))
                except Exception as exc:
                    self.last_error = f"on_timer({payload!r}) failed: {exc!r}"
                    self._log_exception(exc)

    def _sweep(self) -> None:
        for call in self._open.expired(time.monotonic()):
            self.fail(
                call,
                ErrorCode.DEADLINE,
                f"{self.name} did not answer {call.op!r} before its deadline",
            )
        if self._open.busy:
            self._arm(Sweep(), SWEEP_PERIOD)

    def _idle(self) -> None:
        idle_for = time.monotonic() - self._last_activity
        if self._idle_ttl and idle_for >= self._idle_ttl and not self._open.open:
            self.stop("shutdown", f"idle for {idle_for:.1f} s (idle_ttl {self._idle_ttl:g} s)")
        elif self._idle_ttl:
            self._arm(Idle(), max(self._idle_ttl - idle_for, 0.05))

    # --- fault injection (tether.resources.faults) -----------------------------------
    def _inject(self, inject: Inject, reply_to: ActorAddress) -> None:
        fault, args = inject.fault, inject.args
        planned = self._faults.plan(fault, args, self.name)  # delay, drop_reply
        if planned is not None:
            ok, message = True, planned
        elif fault == "kill_process":
            ok, message = self.inject_kill_process()
        elif fault == "evict":
            ok, message = self._evict(str(args.get("why") or EVICTED))
        else:
            ok, message = False, f"{self.name} does not handle fault {fault!r}"
        self.reply_inject(reply_to, inject, ok, message)

    def _evict(self, why: str) -> tuple[bool, str]:
        """Stop to make room (tether.capacity.governor): a normal stop (its supervisor
        forgets it; the next call starts a fresh one), never inside a call."""
        if self._open.busy:
            return False, f"{self.name} is inside a call, so it was not stopped"
        self.stop("shutdown", why)
        return True, f"{self.name} stops: {why}"

    def inject_kill_process(self) -> tuple[bool, str]:
        return False, f"{self.name} owns no OS process; use crash_actor to kill the actor itself"

    # --- the end, health -------------------------------------------------------------
    def handle_exit_request(self) -> None:
        self.state = "stopped"
        message = f"{self.name} stopped" + (f": {self.last_error}" if self.last_error else "")
        for call in self._open.calls():
            self.fail_dying(call, message + "; call again to get a fresh one")
        for call, reply_to in self._open.take_queued():
            self._open.enter(call, reply_to)
            self.fail_dying(call, message + "; call again to get a fresh one")
        self.release()

    def release(self) -> None:
        try:
            self.on_stop()
        except Exception as exc:
            self._log_exception(exc)
        self._channel.close()

    def usage(self, pids: list[int]) -> UsageRecord:
        try:
            traits = traits_of(self.kind, self.config)
        except ValueError:  # a bad `capacity` entry in the kind's config: the table's
            traits = traits_of(self.kind)
        busy = self._open.busy
        return UsageRecord.build(self.name, self.kind, pids, self._last_activity, busy, traits)

    def health_node(self) -> HealthNode:
        node = super().health_node()
        if self.state == "ready" and self._open.open:
            node["state"] = "busy"
        node["pending"] = self._open.pending
        channel = self._channel.health()
        if channel is not None:
            node["call_channel"] = channel
        try:
            extra = self.health_extra()
        except Exception as exc:
            extra = {"health_extra_error": repr(exc)}
        node["extra"] = extra
        return node
