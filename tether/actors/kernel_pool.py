"""`KernelPoolActor` (kind "kernel_pool", shared, key = language): started spare kernels,
handed to a run's `KernelActor` (`tether.actors.kernel`) on its first cell."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass

from tether.actors.base import ResourceActor, ResourceUnavailable
from tether.actors.kernel import HANDSHAKE_RETRY, START_TIMEOUT, Handshake
from tether.json_types import JSONObject
from tether.kernels import bridge
from tether.kernels.handle import KernelHandle, tree_rss_mb
from tether.kernels.launch import KernelUnavailable, Launched, deno_binary, launch
from tether.kernels.layer import Layer, make_layer
from tether.messages.calls import Call
from tether.messages.kernel_ops import POOL, PoolStatus, Spare, Take
from tether.scratch import ProcessScratch

REFILL_DELAY = 0.2  # s after a spare is taken before its replacement starts
POOL_REST = 60.0  # s a pool stays empty after its spares were taken back to make room


@dataclass(frozen=True)
class Refill:  # start spares up to the pool's size
    pass


class KernelPoolActor(ResourceActor):
    """Started spare kernels of one language (key), handed to a run's KernelActor on its
    first cell (`Take`) and replaced in the background, so that cell pays no start.

    A spare dies with this actor (parent-death signal), also after it was handed over: a
    pool that crashes costs the runs their kernels' state, which their next cell reports,
    and never leaves a kernel behind. `spares` (config) is the pool size; 0 disables it.
    """

    def on_start(self, key: str, config: JSONObject) -> None:
        if key not in ("python", "javascript"):
            raise ResourceUnavailable(f"no kernel pool for language {key!r}")
        if key == "javascript":
            try:
                deno_binary()
            except KernelUnavailable as exc:
                raise ResourceUnavailable(str(exc)) from exc
        self.language = key
        spares = config.get("spares", 1)
        if not isinstance(spares, int | float | str):
            raise TypeError(f"spares: {spares!r} is not a number")
        self.size = int(spares)
        self.spares: list[KernelHandle] = []
        self.handed: list[Launched] = []  # our children now owned by runs (reaped here)
        self.taken = 0
        self.misses = 0
        self.after(0.0, Refill())  # (a first Take is answered before the launches fork)

    def refill(self) -> None:
        if time.monotonic() < getattr(self, "rest_until", 0.0):
            return  # (its spares were taken back for memory: tether.capacity)
        while len(self.spares) < self.size:
            layer = self._new_layer()
            launched = launch(self.language, os.getcwd(), layer=layer)
            handle = KernelHandle(launched, bridge.new_nonce(), prelude_done=False, layer=layer)
            handle.handshake()
            self.spares.append(handle)
        self._report_pids()
        self.after(HANDSHAKE_RETRY, Handshake())

    def on_call(self, call: Call) -> None:
        match POOL.parse(call):
            case Take():
                self.reply(call, {"spare": self._take()})
            case PoolStatus():
                self.reply(call, self.health_extra())

    def _new_layer(self) -> Layer | None:
        """A spare's Python layer, over the runtime's base Python (its run is not known
        yet); handed over with it, so %pip in its run installs there."""
        if self.language != "python":
            return None
        return make_layer(str(ProcessScratch("layer", under="layers").base / "venv"), None)

    def _discard(self, handle: KernelHandle) -> None:
        """A spare that was not handed over: the kernel and its layer go."""
        handle.close()
        if handle.layer is not None:
            shutil.rmtree(os.path.dirname(handle.layer.directory), ignore_errors=True)

    def _take(self) -> Spare | None:
        for handle in self.spares:
            if handle.ready and handle.alive():
                self.spares.remove(handle)
                handle.detach()
                self.handed.append(handle.launched)
                self.taken += 1
                # a kernel start burns a core for a second: not while the run's first
                # cell runs on the spare just handed over
                self.after(REFILL_DELAY, Refill())
                return handle.handover()
        self.misses += 1
        return None

    def watch_fds(self) -> list[int]:
        return [fd for handle in self.spares for fd in handle.fds()]

    def handle_watch(self, ready: list[int]) -> None:
        for handle in list(self.spares):
            if set(handle.wire.fds()) & set(ready):
                for channel, msg in handle.wire.drain():
                    if not handle.ready:
                        handle.take_handshake(channel, msg)
            if handle.failed or (handle.pidfd in ready and not handle.alive()):
                self.last_error = handle.failed or handle.exit_text()
                self.spares.remove(handle)
                self._discard(handle)
                self.after(1.0, Refill())  # (not at once: a kernel that cannot start loops)

    def on_timer(self, tag: Refill | Handshake) -> None:
        match tag:
            case Refill():
                self.refill()
            case Handshake():
                self._handshake_tick()

    def _handshake_tick(self) -> None:
        self.handed = [h for h in self.handed if h.process.alive()]
        starting = [h for h in self.spares if not h.ready]
        for handle in starting:
            if time.monotonic() - handle.started_at > START_TIMEOUT:
                self.spares.remove(handle)
                self._discard(handle)
            elif not handle.got_iopub:
                handle.handshake()
        if starting:
            self.after(HANDSHAKE_RETRY, Handshake())

    def owned_pids(self) -> list[int]:
        return [pid for handle in getattr(self, "spares", []) for pid in handle.owned_pids()]

    def _evict(self, why: str) -> tuple[bool, str]:
        """The governor wants the spares' memory (tether.capacity): discard them, but keep
        this actor - the kernels it handed over are runs' kernels now, and they would die
        with it. No refill for POOL_REST s."""
        dropped = len(self.spares)
        self.on_stop()
        self.rest_until = time.monotonic() + POOL_REST
        self.after(POOL_REST, Refill())
        self._report_pids()
        return True, f"{self.name} discarded {dropped} spare(s) for {POOL_REST:g} s: {why}"

    def on_stop(self) -> None:
        for handle in getattr(self, "spares", []):
            self._discard(handle)
        self.spares = []

    def health_extra(self) -> JSONObject:
        spares = getattr(self, "spares", [])
        return {
            "language": getattr(self, "language", self.key),
            "size": getattr(self, "size", 0),
            "ready": sum(1 for h in spares if h.ready),
            "starting": sum(1 for h in spares if not h.ready),
            "taken": getattr(self, "taken", 0),
            "misses": getattr(self, "misses", 0),
            "memory_mb": round(sum(tree_rss_mb(h.pid) for h in spares), 1),
        }
