"""`ResourceActor`: the base of every actor that owns a live resource (what every tether
actor shares, supervisors too, is `TetherActor` in tether.actors.actor).

A resource actor is created by its kind's supervisor with a key and a config, answers
`Call`s with exactly one `Reply` each (now or later), answers health queries, and cleans
up everything it owns when it stops.

    class EchoActor(ResourceActor):
        kind = "echo"
        def on_start(self, key, config): self.set_state("ready")
        def on_call(self, call): self.reply(call, {"echo": call.args})

A process-owning actor (`ProcessActor`, in tether.actors.process) additionally starts one
subprocess in its own process group, watches its pipes with ThespianWatch (no threads;
the message loop never blocks) and kills the whole process tree when it stops:

    class LanguageServerActor(ProcessActor):
        kind = "language_server"
        def on_start(self, key, config): self.spawn(argv, cwd=root)
        def on_stdout(self, data): ...  # feed the framing codec, settle pending requests
        def on_call(self, call):
            self.write(frame)  # request to the server; its answer settles the call later

What the base does for you:
- Calls that arrive before `on_start` finished, or while you keep the state "starting"
  (call `self.set_state("starting")` in on_start and `set_state("ready")` when the
  resource is usable), are queued and handed to `on_call` once the state is "ready".
- Every call is settled exactly once: a second reply() / fail() for the same call is
  ignored, and a call still open when its deadline passes is failed with `deadline`. An
  exception escaping `on_call` fails that call with `failed` and the exception text; it
  never kills the actor.
- `on_start` raising `ResourceUnavailable` means "cannot run here" (the supervisor does
  not retry); raising anything else is a crash (restart policy applies). A start that must
  wait for something (a probe subprocess) calls `defer_start()` in on_start and later
  `finish_start()` or `fail_start(...)`: the message loop runs meanwhile.
- A watchdog timer: if the host process dies or this actor's parent dies, the actor
  kills what it owns and exits (no orphans).
- Fault injection (delay, drop_reply, kill_process) and health are built in.
"""

from __future__ import annotations

import os
import select
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

from thespian.actors import ActorExitRequest, ThespianWatch

from tether.actors.actor import TetherActor
from tether.capacity.usage import EVICTED, UsageRecord, evicted_note, traits_of
from tether.channels import ChannelListener, ChannelPeer
from tether.messages.calls import Call, ErrorCode, Reply, ResourceError
from tether.messages.codec import CodecError, decode, encode
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

__all__ = ["FLUSH_RETRY", "ResourceActor", "ResourceUnavailable", "TetherActor"]

SWEEP_PERIOD = 0.5  # seconds between sweeps of open calls past their deadline
FLUSH_RETRY = 0.005  # seconds until a write a pipe or socket did not take is tried again


# --- timer tags: what a wakeup is for (thespian hands the payload back as it was given) ---
# A subclass defines its own tags (frozen dataclasses), arms them with `after()` and gets
# them back in `on_timer`, dispatched with `match`.


@dataclass(frozen=True)
class Sweep:
    """Fail the open calls past their deadline."""


@dataclass(frozen=True)
class Idle:
    """Stop if nothing came for the kind's idle_ttl."""


@dataclass(frozen=True)
class ChannelFlush:
    """Retry the replies a call channel's socket did not take."""


@dataclass(frozen=True)
class Delayed:
    """An injected delay is over: deliver the call now."""

    call_id: str


class ResourceUnavailable(Exception):
    """Raise from on_start when the resource cannot run here (binary or marker missing).
    The supervisor will not retry; calls get ErrorCode.UNAVAILABLE with this message."""


# cancels kept for calls that have not arrived yet (a cancel can overtake its call)
CANCELS_KEPT = 64


class ResourceActor(TetherActor):
    """Serves calls for one (kind, key). Subclass and override the `on_*` hooks."""

    kind_name: ClassVar[str] = ""  # informational; the KindSpec decides the kind

    def __init__(self) -> None:
        super().__init__()
        self._open: dict[str, tuple[Call, Any]] = {}  # call_id -> (call, reply_to)
        self._queued: list[tuple[Call, Any]] = []  # calls that arrived before "ready"
        self._state_explicit = False
        self._started = False
        self._stopping = False
        self._last_activity = time.monotonic()
        self._idle_ttl: float | None = None
        self._idle_armed = False
        self._sweep_armed = False
        self._delay: list[float] = []  # injected delays, one per next call
        self._drop = 0  # injected: drop this many next replies
        self._start_error: tuple[str, str] | None = None
        self._start_deferred = False
        self._channel: ChannelListener | None = None  # the host's direct calls
        self._arrived: deque[tuple[Call, ChannelPeer]] = deque()  # read, not yet delivered
        self._channel_flush_armed = False
        self._cancelled_ahead: dict[str, str] = {}  # call id -> why, for a call not yet here
        self._evicted_note = ""  # for the first result after a predecessor was evicted

    # --- to override -----------------------------------------------------------------
    def on_start(self, key: str, config: dict[str, Any]) -> None:
        """Called once, before any call. Raise to fail the start (the supervisor decides)."""

    def on_call(self, call: Call) -> None:
        """Handle one call; settle it with reply()/fail(), now or later."""
        self.fail(
            call, ErrorCode.BAD_REQUEST, f"{self.name} does not handle calls (op {call.op!r})"
        )

    def on_timer(self, tag: Any) -> None:
        """A timer set with after() fired: `tag` is the object given (match on its class)."""

    def on_stop(self) -> None:
        """Release what the actor owns (ProcessActor already kills its process tree)."""

    def on_cancel(self, call: Call, reason: str) -> None:
        """The caller of the open `call` gave up (tether.call_scope): stop its work this
        kind's own way (interrupt a cell, cancel a server request). The host has answered
        the caller already; settling `call` now or later is harmless (the reply is dropped).
        By default the work runs on and its result is dropped."""

    def health_extra(self) -> dict[str, Any]:
        """Kind-specific health fields (e.g. a language server's root and indexing state)."""
        return {}

    # --- provided --------------------------------------------------------------------
    def reply(self, call: Call, payload: dict[str, Any]) -> None:
        """Settle `call` with a result. Ignored if it was settled already."""
        if self._evicted_note and call.call_id in self._open and "notes" in payload:
            # (only a reply that carries notes already: replies are typed, and a field
            # their kind does not declare is refused by the host - a kernel's cell has one)
            payload = {**payload, "notes": [*payload["notes"], self._evicted_note]}
            self._evicted_note = ""
        self._settle(call, Reply(call_id=call.call_id, ok=True, payload=payload))

    def fail(self, call: Call, code: str, message: str) -> None:
        """Settle `call` with an error (an ErrorCode and a message saying what to do next)."""
        self._settle(call, Reply(call_id=call.call_id, ok=False, error=code, message=message))

    def set_state(self, state: str, error: str = "") -> None:
        """starting | ready | busy | restarting | failed | stopped (+ last error)."""
        self.state = state
        self._state_explicit = True
        if error:
            self.last_error = error
        if state == "ready" and self._queued and self._started:
            queued, self._queued = self._queued, []
            for call, reply_to in queued:
                self._deliver(call, reply_to)

    def after(self, seconds: float, tag: Any) -> None:
        """One-shot timer (wakeupAfter); on_timer(tag) is called when it fires. `tag`: a
        frozen dataclass of the subclass's own (not one of the base's tags above)."""
        self.wakeupAfter(seconds, tag)

    def defer_start(self) -> None:
        """Call in on_start when the start ends later, on an event (a probe's exit, a
        timer): the supervisor hears nothing and holds the host's calls until
        `finish_start()` or `fail_start(...)`; health queries are answered meanwhile."""
        self._start_deferred = True

    def finish_start(self) -> None:
        """A deferred start succeeded: what returning from on_start does."""
        if self._start_deferred and not self._started and not self._stopping:
            self._start_deferred = False
            self._start_done()

    def fail_start(self, error: str, unavailable: bool) -> None:
        """A deferred start failed: what raising from on_start does (`unavailable`: as
        ResourceUnavailable, the supervisor does not retry; otherwise a crash)."""
        if self._start_deferred and not self._started and not self._stopping:
            self._start_deferred = False
            self._start_failed(error, unavailable)

    def stop(self, reason: str = "normal", error: str = "") -> None:
        """Stop this actor on its own. reason: "normal" (done), "crash" (broken: the
        supervisor's restart policy applies) or "shutdown" (reaped)."""
        if self._stopping:
            return
        self._stopping = True
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
        payload = {"incarnation": self.incarnation, "started": started}
        reply = Reply(call.call_id, False, payload, ErrorCode.MOVED, message)
        self._settle(call, reply)

    def open_calls(self) -> list[Call]:
        return [call for call, _ in self._open.values()]

    # --- machinery -------------------------------------------------------------------
    def _settle(self, call: Call, reply: Reply) -> None:
        entry = self._open.pop(call.call_id, None)
        if entry is None:
            return  # settled already, or expired
        if self._drop > 0:
            self._drop -= 1
            return
        reply_to = entry[1]
        if isinstance(reply_to, ChannelPeer):
            if not reply_to.send(encode(reply)):
                self._arm_channel_flush()
        else:
            self.send(reply_to, encode(reply))

    def handle_message(self, obj: Any, data: bytes, extra: Any, sender: Any) -> None:
        if isinstance(obj, Call):
            self._receive_call(obj, extra if extra is not None else sender)
        elif isinstance(obj, Start):
            self._start(obj)
        elif isinstance(obj, HealthQuery):
            self.send_encoded(sender, HealthReport(obj.query_id, self.health_node()))
        elif isinstance(obj, Inject):
            self._inject(obj, extra if extra is not None else sender)
        elif isinstance(obj, CancelCall):
            self._cancel(obj)

    def _cancel(self, cancel: CancelCall) -> None:
        """A call still queued for the start is dropped (nothing of it ran); an open one
        goes to on_cancel. A cancel may come before its call is delivered (read in the same
        batch; or the call came through thespian, the cancel on a call channel): it is
        kept, and the call gets on_cancel right after on_call (a kernel's ToolAnswer sent
        after its cancel must reach the cell, which is then interrupted)."""
        for item in self._queued:
            if item[0].call_id == cancel.call_id:
                self._queued.remove(item)
                return
        entry = self._open.get(cancel.call_id)
        if entry is not None:
            self.on_cancel(entry[0], cancel.reason)
        else:
            self._cancelled_ahead[cancel.call_id] = cancel.reason
            while len(self._cancelled_ahead) > CANCELS_KEPT:
                del self._cancelled_ahead[next(iter(self._cancelled_ahead))]

    def _start(self, start: Start) -> None:
        self.state = "starting"
        if start.previous_end.startswith(EVICTED):
            holds_state = self.usage([]).holds_state
            self._evicted_note = evicted_note(self.name, start.previous_end, holds_state)
        self._idle_ttl = start.child.get("idle_ttl")
        if start.channel and self._host_pid:
            self._open_channel()
        try:
            self.on_start(start.key, start.config)
        except ResourceUnavailable as exc:
            self._start_failed(str(exc), unavailable=True)
            return
        except Exception as exc:
            self._start_failed(f"{type(exc).__name__}: {exc}", unavailable=False)
            return
        if not self._start_deferred:
            self._start_done()

    def _start_done(self) -> None:
        self._started = True
        if not self._state_explicit:
            self.state = "ready"
        self.send_encoded(
            self._parent, Started(self.kind, self.key, self.incarnation, True, os.getpid())
        )
        self._report_pids()
        self._arm_idle()
        if self.state == "ready":
            self.set_state("ready")  # flush calls queued before Start

    def _start_failed(self, error: str, unavailable: bool) -> None:
        self.state = "failed"
        self._start_error = (
            ErrorCode.UNAVAILABLE if unavailable else ErrorCode.RESOURCE_DIED,
            error if unavailable else f"{self.name} failed to start: {error}",
        )
        self.last_error = error
        self.send_encoded(
            self._parent,
            Started(self.kind, self.key, self.incarnation, False, os.getpid(), error, unavailable),
        )
        for call, reply_to in self._queued:
            self._open[call.call_id] = (call, reply_to)
            self.fail(call, *self._start_error)
        self._queued = []
        self._stopping = True
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

    def _receive_call(self, call: Call, reply_to: Any) -> None:
        self._last_activity = time.monotonic()
        if self._start_error:
            self._open[call.call_id] = (call, reply_to)
            self.fail(call, self._start_error[0], self._start_error[1])
            return
        if self._stopping or self.state in ("failed", "stopped"):
            self._open[call.call_id] = (call, reply_to)
            message = (
                f"{self.name or self.kind} is stopping ({self.last_error or 'no error'}); "
                "call again to get a fresh one"
            )
            self.moved(call, message, started=False)  # never started here: safe to resend
            return
        if not self._started or self.state == "starting":
            self._queued.append((call, reply_to))
            self._arm_sweep()
            return
        if self._delay:
            seconds = self._delay.pop(0)
            self._open[call.call_id] = (call, reply_to)
            self.wakeupAfter(seconds, Delayed(call.call_id))
            self._arm_sweep()
            return
        self._deliver(call, reply_to)

    def _deliver(self, call: Call, reply_to: Any) -> None:
        self._open[call.call_id] = (call, reply_to)
        try:
            self.on_call(call)
            cancelled = self._cancelled_ahead.pop(call.call_id, None)
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
            self._arm_sweep()

    # --- the call channel (tether.channels) ------------------------------------------
    def _open_channel(self) -> None:
        channel = ChannelListener(self._host_pid)
        why_not = channel.open()
        if why_not:
            self.last_error = why_not  # the host keeps calling through thespian
        else:
            self._channel = channel

    def _watch(self) -> ThespianWatch | None:
        fds = [*(self._channel.fds() if self._channel else ()), *self.watch_fds()]
        return ThespianWatch(fds) if fds else None

    def watch_fds(self) -> list[int]:
        """Descriptors of the resource to watch (ProcessActor: its subprocess's pipes);
        handle_watch gets those that are ready."""
        return []

    def watched_ready(self, ready: list[int]) -> None:
        self._read_channel(ready)
        self.handle_watch(ready)

    def _read_channel(self, ready: list[int]) -> None:
        """Deliver the calls that came on the channel, in order. They wait in `_arrived`,
        not in a local list, so a long handler's `serve_arrivals` takes the ones read
        with it in the same batch too."""
        if self._channel is not None:
            for peer, data in self._channel.read(ready):
                try:
                    call = decode(data)
                except CodecError as exc:
                    self.last_error = f"call channel: {exc}"
                    continue
                if isinstance(call, Call):
                    self._arrived.append((call, peer))
                elif isinstance(call, CancelCall):
                    self._cancel(call)
        while self._arrived:
            self._receive_call(*self._arrived.popleft())

    def serve_arrivals(self) -> None:
        """Take the calls already waiting on the call channel now, from inside a long
        handler: they are delivered (on_call) without waiting for it to return to
        thespian's loop. Calls sent through thespian wait for the loop as usual."""
        if self._channel is None:
            return
        ready, _, _ = select.select(self._channel.fds(), [], [], 0)
        self._read_channel(ready)

    def _arm_channel_flush(self) -> None:
        if not self._channel_flush_armed:
            self._channel_flush_armed = True
            self.wakeupAfter(FLUSH_RETRY, ChannelFlush())

    def _arm_sweep(self) -> None:
        if not self._sweep_armed:
            self._sweep_armed = True
            self.wakeupAfter(SWEEP_PERIOD, Sweep())

    def _sweep(self) -> None:
        self._sweep_armed = False
        now = time.monotonic()
        for call, _ in list(self._open.values()):
            if call.deadline and now > call.deadline:
                self.fail(
                    call,
                    ErrorCode.DEADLINE,
                    f"{self.name} did not answer {call.op!r} before its deadline",
                )
        self._queued = [(c, r) for c, r in self._queued if not (c.deadline and now > c.deadline)]
        if self._open or self._queued:
            self._arm_sweep()

    def _arm_idle(self) -> None:
        if self._idle_ttl and not self._idle_armed:
            self._idle_armed = True
            self.wakeupAfter(self._idle_ttl, Idle())

    def handle_wakeup(self, payload: Any) -> None:
        match payload:
            case Sweep():
                self._sweep()
            case ChannelFlush():
                self._channel_flush_armed = False
                if self._channel is not None and not self._channel.flush():
                    self._arm_channel_flush()
            case Delayed(call_id=call_id):
                entry = self._open.pop(call_id, None)
                if entry is not None:
                    self._deliver(*entry)
            case Idle():
                self._idle()
            case _:  # a subclass's own tag, armed with after()
                try:
                    self.on_timer(payload)
                except Exception as exc:
                    self.last_error = f"on_timer({payload!r}) failed: {exc!r}"
                    self._log_exception(exc)

    def _idle(self) -> None:
        self._idle_armed = False
        idle_for = time.monotonic() - self._last_activity
        if self._idle_ttl and idle_for >= self._idle_ttl and not self._open:
            self.stop("shutdown", f"idle for {idle_for:.1f} s (idle_ttl {self._idle_ttl:g} s)")
        elif self._idle_ttl:
            self._idle_armed = True
            self.wakeupAfter(max(self._idle_ttl - idle_for, 0.05), Idle())

    def _inject(self, inject: Inject, reply_to: Any) -> None:
        fault, args = inject.fault, inject.args
        ok, message = True, ""
        if fault == "delay":
            seconds = float(args.get("seconds", 1.0))
            self._delay.extend([seconds] * int(args.get("count", 1)))
            message = (
                f"the next {int(args.get('count', 1))} call(s) to {self.name} wait {seconds:g} s"
            )
        elif fault == "drop_reply":
            self._drop += int(args.get("count", 1))
            message = (
                f"the next {int(args.get('count', 1))} reply(ies) of {self.name} will be dropped"
            )
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
        if self._open or self._queued:
            return False, f"{self.name} is inside a call, so it was not stopped"
        self.stop("shutdown", why)
        return True, f"{self.name} stops: {why}"

    def inject_kill_process(self) -> tuple[bool, str]:
        return False, f"{self.name} owns no OS process; use crash_actor to kill the actor itself"

    def handle_exit_request(self) -> None:
        self.state = "stopped"
        message = f"{self.name} stopped" + (f": {self.last_error}" if self.last_error else "")
        for call, _ in list(self._open.values()):
            self.fail_dying(call, message + "; call again to get a fresh one")
        for call, reply_to in self._queued:
            self._open[call.call_id] = (call, reply_to)
            self.fail_dying(call, message + "; call again to get a fresh one")
        self._queued = []
        self.release()

    def release(self) -> None:
        try:
            self.on_stop()
        except Exception as exc:
            self._log_exception(exc)
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def usage(self, pids: list[int]) -> UsageRecord:
        try:
            traits = traits_of(self.kind, self.config)
        except ValueError:  # a bad `capacity` entry in the kind's config: the table's
            traits = traits_of(self.kind)
        busy = bool(self._open or self._queued)
        return UsageRecord.build(self.name, self.kind, pids, self._last_activity, busy, traits)

    def health_node(self) -> dict[str, Any]:
        node = super().health_node()
        if self.state == "ready" and self._open:
            node["state"] = "busy"
        node["pending"] = len(self._open) + len(self._queued)
        if self._channel is not None:
            node["call_channel"] = {
                "connections": len(self._channel.peers),
                "refused": self._channel.refused,
            }
        try:
            extra = self.health_extra()
        except Exception as exc:
            extra = {"health_extra_error": repr(exc)}
        node["extra"] = extra
        return node
