"""`TetherActor`: what every tether actor shares (supervisors and resource actors alike).

Thespian hands each actor its messages; a tether actor decodes them (one msgpack codec,
`tether.messages.codec`), holds what overtook its parent's `Start`, dispatches the rest to
`handle_*` hooks, and keeps a watchdog: if the host process dies or this actor's parent
dies, the actor releases what it owns and exits (no orphans). The watchdog is two pidfds
in the actor's watch (the kernel says when either process exits); a timer polls instead
only where pidfds cannot be opened. Resource actors
(`tether.actors.base.ResourceActor`) and supervisors (`tether.supervisors.core`) build on it.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import time
import traceback
from dataclasses import dataclass
from typing import ClassVar

from thespian.actors import (
    Actor,
    ActorAddress,
    ActorExitRequest,
    ChildActorExited,
    PoisonMessage,
    ThespianWatch,
    WakeupMessage,
    WatchMessage,
)

from tether.capacity.usage import TREE_TRAITS, UsageRecord
from tether.health_node import HealthNode, health_node
from tether.json_types import JSONObject
from tether.messages.calls import ErrorCode, Reply
from tether.messages.codec import CodecError, decode, encode
from tether.messages.control import Inject, Start
from tether.processes import (
    close_inherited_fds,
    die_with_parent,
    host_alive,
    owner_pidfds,
    title_tree_process,
    tree_process_title,
)

WATCHDOG_PERIOD = 0.25  # s between checks that the host and our parent are alive (no pidfd)


@dataclass(frozen=True)
class Watchdog:
    """Check that the host and our parent are still alive."""


class TetherActor(Actor):
    """What every tether actor shares: message decoding, the watchdog, timers, health.

    Thespian messages we send are `bytes` (an encoded message) or `(bytes, extra)`, where
    extra is a thespian address (or a dict of them) that cannot ride inside msgpack.
    """

    def __init__(self) -> None:
        super().__init__()
        # Every actor is a fork of its parent: what it inherited is shared copy-on-write
        # until the collector touches it (each object's gc header). Frozen, those pages stay
        # shared: ~20 MiB less unique memory per supervisor, ~5 per resource actor
        # (benchmarks/conversation_memory.py).
        gc.freeze()
        self.kind = ""
        self.key = ""
        self.name = ""
        self.incarnation = 0  # a number that grows with each start (not a count: `restarts`)
        self.restarts = 0
        self.config: JSONObject = {}  # (plain msgpack-able data: tether.kinds.KindSpec)
        self.started_at = time.monotonic()
        self.last_error = ""
        self.state = "starting"
        self._parent: ActorAddress | None = None
        # thespian forks each actor from its parent actor's process (multiprocessing)
        parent = multiprocessing.parent_process()
        self._parent_pid = parent.pid if parent is not None and parent.pid else os.getppid()
        # until Start arms the watchdog (which releases what we own, then exits), nothing
        # here would notice a parent that died after creating us: the kernel does - and
        # if it died before we got here, we go now
        die_with_parent(signal.SIGKILL)
        self._dies_with_parent = True
        if os.getppid() != self._parent_pid:
            os._exit(0)
        self._host_pid = 0
        self._host_create_time = 0.0
        self._watchdog_armed = False
        self._owner_fds: list[int] = []  # pidfds on the parent and the host (the watchdog)
        self._got_start = False
        # (a decoded message: any type tether.messages.codec registers; matched on)
        self._early: list[tuple[object, bytes, ActorAddress | None, ActorAddress]] = []
        self._pids_due = False  # owned pids changed: tell the parent after this message

    needs_start: ClassVar[bool] = True  # hold other messages until Start arrived

    # --- thespian entry point --------------------------------------------------------
    # (`msg`: whatever thespian delivers - bytes, a tuple, its own system messages)
    def receiveMessage(self, msg: object, sender: ActorAddress) -> ThespianWatch | None:  # noqa: N802
        try:
            try:
                self._dispatch(msg, sender)
            finally:  # (also after a handler that failed once it had started a process)
                if self._pids_due:
                    self._send_pids()
        except Exception as exc:  # never let thespian retry-then-poison our messages
            self.last_error = f"internal error: {exc!r}"
            self._log_exception(exc)
        return self._watch()

    def _dispatch(self, msg: object, sender: ActorAddress) -> None:  # (msg: as above)
        if isinstance(msg, bytes):
            self._handle_encoded(msg, None, sender)
        elif isinstance(msg, tuple) and len(msg) == 2 and isinstance(msg[0], bytes):
            self._handle_encoded(msg[0], msg[1], sender)
        elif isinstance(msg, WakeupMessage):
            self._handle_wakeup(msg.payload)
        elif isinstance(msg, WatchMessage):
            if any(fd in self._owner_fds for fd in msg.ready):
                self._emergency_exit()  # the parent or the host exited
            self.watched_ready(msg.ready)
        elif isinstance(msg, ChildActorExited):
            self.handle_child_exited(msg.childAddress)
        elif isinstance(msg, ActorExitRequest):
            self.handle_exit_request()
        elif isinstance(msg, PoisonMessage):
            self.handle_poison(msg, sender)

    def _handle_encoded(
        self, data: bytes, extra: ActorAddress | None, sender: ActorAddress
    ) -> None:
        try:
            obj = decode(data)
        except CodecError as exc:
            self.last_error = str(exc)
            return
        if not self._got_start and not isinstance(obj, Start) and self.needs_start:
            # messages from other senders can overtake our parent's Start: hold them
            self._early.append((obj, data, extra, sender))
            return
        if isinstance(obj, Start):
            close_inherited_fds(self)
            self._got_start = True
            self._parent = sender
            self.kind, self.key, self.name = obj.kind, obj.key, obj.name
            title_tree_process(tree_process_title(self.kind, self.key))  # what ps shows
            self.incarnation = obj.incarnation
            self.restarts = obj.restarts
            self.config = obj.config
            self._host_pid, self._host_create_time = obj.host_pid, obj.host_create_time
            self._arm_watchdog()
            self.handle_message(obj, data, extra, sender)
            self.after_start()
            early, self._early = self._early, []
            for item in early:
                self.handle_message(*item)
            return
        self.handle_message(obj, data, extra, sender)

    def _handle_wakeup(self, payload: object) -> None:  # (a tag of any class: matched on)
        match payload:
            case Watchdog():
                self._watchdog_armed = False
                if not self._owner_alive():
                    self._emergency_exit()
                self._arm_watchdog()
            case _:
                self.handle_wakeup(payload)

    # --- watchdog --------------------------------------------------------------------
    def _arm_watchdog(self) -> None:
        if self._watchdog_armed:
            return
        if self._dies_with_parent:
            die_with_parent(0)  # the watchdog takes over, and exits cleanly
            self._dies_with_parent = False
        self._watchdog_armed = True
        if not self._owner_fds:
            fds = owner_pidfds(self._parent_pid, self._host_pid, self._host_create_time)
            if fds is None:
                self._emergency_exit()  # (gone while we started)
            self._owner_fds = fds or []
        if not self._owner_fds:  # (no pidfd here: look on a timer)
            self.wakeupAfter(WATCHDOG_PERIOD, Watchdog())

    def _owner_alive(self) -> bool:
        if os.getppid() != self._parent_pid:
            return False  # our parent actor died and we were re-parented
        return host_alive(self._host_pid, self._host_create_time)

    def _emergency_exit(self) -> None:
        """The host or our parent is gone: release what we own and exit now."""
        with contextlib.suppress(Exception):
            self.release()
        os._exit(0)

    # --- to override by the kinds of actor -------------------------------------------
    def send_error(self, reply_to: ActorAddress, call_id: str, code: str, message: str) -> None:
        """Answer call `call_id` with a typed error (one of ErrorCode) the model can act on."""
        self.send(reply_to, encode(Reply(call_id, False, error=code, message=message)))

    def reply_inject(self, reply_to: ActorAddress, inject: Inject, ok: bool, message: str) -> None:
        if ok:
            self.send(reply_to, encode(Reply(inject.call_id, True, {"message": message})))
        else:
            self.send_error(reply_to, inject.call_id, ErrorCode.BAD_REQUEST, message)

    def after_start(self) -> None:
        """Start was handled (a supervisor reports Started here; resource actors do it
        themselves once on_start returned)."""

    def handle_message(
        self, obj: object, data: bytes, extra: ActorAddress | None, sender: ActorAddress
    ) -> None:  # (obj: a decoded message, as in `_early`)
        pass

    def handle_wakeup(self, payload: object) -> None:  # (a tag of any class: matched on)
        pass

    def watched_ready(self, ready: list[int]) -> None:
        """Descriptors this actor watches (`_watch`) are ready."""
        self.handle_watch(ready)

    def handle_watch(self, ready: list[int]) -> None:
        pass

    def handle_child_exited(self, address: ActorAddress) -> None:
        pass

    def handle_exit_request(self) -> None:
        self.release()

    def handle_poison(self, msg: PoisonMessage, sender: ActorAddress) -> None:
        self.last_error = f"a message could not be handled: {str(msg.details)[-300:]}"

    def release(self) -> None:
        """Free what this actor owns (called on exit, and by the watchdog)."""

    def _watch(self) -> ThespianWatch | None:
        return ThespianWatch(self._owner_fds) if self._owner_fds else None

    def owned_pids(self) -> list[int]:
        return []

    def health_node(self) -> HealthNode:
        # (listed once: a process tree's descendants take psutil a scan of /proc, ~10 ms)
        pids = [os.getpid(), *self.owned_pids()]
        return health_node(
            self.name,
            self.kind,
            self.key,
            self.state,
            uptime=time.monotonic() - self.started_at,
            last_error=self.last_error,
            pids=pids,
            usage=self.usage(pids).to_wire(),
        )

    def usage(self, pids: list[int]) -> UsageRecord:
        """What this actor costs (`pids`: its process and what it owns) and whether it may
        be stopped (tether.capacity.usage); a supervisor is the tree itself: counted, never
        stopped to make room."""
        return UsageRecord.build(self.name, self.kind, pids, self.started_at, False, TREE_TRAITS)

    def _log_exception(self, exc: BaseException) -> None:
        import logging

        logging.getLogger("tether").error(
            "%s %s: %s", type(self).__name__, self.name, "".join(traceback.format_exception(exc))
        )

    def send_encoded(
        self, address: ActorAddress, msg: object, extra: ActorAddress | None = None
    ) -> None:  # (msg: a registered message, as tether.messages.codec.encode takes it)
        data = encode(msg)
        self.send(address, data if extra is None else (data, extra))
