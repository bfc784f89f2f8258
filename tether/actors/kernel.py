"""`KernelActor` (kind "kernel", RUN scope, key = language): a run's persistent Python or
JavaScript interpreter; `kinds()` declares it with the spare pool (`tether.actors.kernel_pool`).

One KernelActor per run and language owns one Jupyter kernel process (ipykernel, or
Deno's `deno jupyter`), started on the first cell, or handed over started by the spare pool.
The kernel's wire (`tether.kernels.wire`) is driven from the actor's own loop: it reacts
to what arrives, and to the kernel's death through a pidfd. What happens to each cell
(outputs, the tool bridge's early answers, budgets and interrupts, the result) is the
sans-io `tether.kernels.session.KernelSession`, fed by this actor; the actor keeps the
kernel's life: start or adopt, handshake, memory, idle reaping, and the kill of a kernel
that ignored an interrupt for `interrupt_grace` (the result carries the partial output
and says what happened). A kernel that died, was killed,
went over its memory limit or was reaped for idleness is simply gone: the next cell starts
a fresh one, and its result says the state was lost.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass

from tether.actors.base import ResourceActor, ResourceUnavailable
from tether.capacity import ceiling
from tether.capacity.usage import EVICTED
from tether.health_node import HealthNode
from tether.json_types import JSONObject
from tether.kernels import bridge
from tether.kernels.handle import KernelHandle, tree_rss_mb
from tether.kernels.launch import KernelUnavailable, Launched, deno_binary, launch
from tether.kernels.layer import Layer, LayerError, make_layer
from tether.kernels.session import Budget, KernelSession, KillIfStill, RunWaiting, Settle
from tether.kernels.wire import KernelMessage
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import Call, ErrorCode
from tether.messages.kernel_ops import (
    KERNEL,
    CellReply,
    Execute,
    Status,
    ToolAnswer,
    cell_payload,
)
from tether.owned_process import OwnedProcess
from tether.places import Place
from tether.processes import kill_tree
from tether.scratch import ProcessScratch

START_TIMEOUT = 60.0  # s for a new kernel to answer kernel_info and run its prelude
HANDSHAKE_RETRY = 0.2  # s between kernel_info requests until iopub is seen to be connected
INTERRUPT_GRACE = 3.0  # s a cell has to stop after an interrupt before the kernel is killed
IDLE_REAP = 1800.0  # s without a cell before a kernel is shut down to free its memory
MEMORY_LIMIT_MB = 4096.0  # RSS of the kernel's process tree; over it, the kernel is restarted
MEMORY_CHECK = 1.0  # s between memory checks while a cell runs or ran in the last 10 s
# s between them once the kernel is idle: a kernel grows while its cells run, and each
# check scans /proc for the kernel's children (an idle server of many conversations paid
# for one scan a second per kernel; what outruns a check meets the kernel's ceiling)
MEMORY_IDLE_CHECK = 10.0


# timer tags (ResourceActor.after / on_timer); a cell's own are the session's
@dataclass(frozen=True)
class Handshake:  # resend kernel_info until the kernel's iopub is seen
    pass


@dataclass(frozen=True)
class MemoryCheck:
    generation: int  # (a check armed before the last one is not acted on)


@dataclass(frozen=True)
class Reap:  # shut the kernel down if it has been idle for idle_reap
    pass


CHDIR = {"python": "__import__('os').chdir(%s)", "javascript": "Deno.chdir(%s)"}


def _int(config: JSONObject, name: str, default: float) -> float:
    value = config.get(name, default)
    return float(value) if isinstance(value, int | float) and value > 0 else default


OUTPUT_TAIL = 400  # chars of a running cell's output in its status (serve's progress)


class KernelActor(ResourceActor):
    def on_start(self, key: str, config: JSONObject) -> None:
        if key not in ("python", "javascript"):
            raise ResourceUnavailable(
                f"no kernel for language {key!r}: use 'python' or 'javascript'"
            )
        self.language = key
        self.handle: KernelHandle | None = None
        self.kernels_started = 0
        self.idle_reap = _int(config, "idle_reap", IDLE_REAP)
        self.memory_limit = _int(config, "memory_limit_mb", MEMORY_LIMIT_MB)
        self.interrupt_grace = _int(config, "interrupt_grace", INTERRUPT_GRACE)
        self.start_timeout = _int(config, "start_timeout", START_TIMEOUT)
        self.cells = KernelSession(key, _CellIO(self), self.interrupt_grace)
        self.memory_mb = 0.0
        self.memory_armed = False
        self.memory_generation = 0  # of the memory check armed last (the one acted on)
        self.memory_due = 0.0  # time.monotonic() it fires at
        self.place = Place.host()  # where its kernel runs (the run's place, with each Execute)
        # the kernel-enforced memory limit of the current kernel (tether.capacity.ceiling)
        self.ceiling: ceiling.Ceiling | None = None
        self.layer_dir: ProcessScratch | None = None  # the conversation's %pip layer
        self.layer: Layer | None = None  # made there, or adopted with a spare kernel
        self.layer_adopted = ""  # the directory of an adopted one (removed with us)
        if self.previous_end and not self.previous_end.startswith(EVICTED):
            # the actor before us ended (crashed, killed, stopped) with its kernel: the
            # run's next cell says what was lost, as after the kernel itself died (an
            # eviction's note is the base actor's)
            self.cells.kernel_lost(f"a new kernel actor took over ({self.previous_end})", True)

    # --- calls ---------------------------------------------------------------------------
    def on_call(self, call: Call) -> None:
        match KERNEL.parse(call):
            case Execute() as op:
                self._execute(call, op)
            case ToolAnswer() as answer:
                self.cells.tool_answer(call, answer)
            case Status():
                self.reply(call, self.health_extra())

    def _execute(self, call: Call, op: Execute) -> None:
        refusal = self.cells.refusal(op)
        if refusal:
            self.fail(call, ErrorCode.BAD_REQUEST, refusal)
            return
        if self.handle is not None and self.handle.exited():  # (before its pidfd's turn came)
            self._kernel_lost(self.handle.exit_text())
        cell = self.cells.new_cell(call, op)
        if op.reset and self.handle is not None:
            self._drop_kernel()
            cell.notes.append("reset: the previous kernel was shut down; this one starts clean")
        if self.handle is not None and op.spare:  # not needed after all: it must not linger
            kill_tree(op.spare.pid, grace=0.0, wait=False)
            shutil.rmtree(op.spare.directory, ignore_errors=True)
        if self.handle is None:
            try:
                self._new_kernel(op)
            except (KernelUnavailable, OSError, ValueError) as exc:
                self.fail(
                    call, ErrorCode.UNAVAILABLE, f"cannot start a {self.language} kernel: {exc}"
                )
                return
        self.cells.submit(cell)
        if self.memory_armed and self.memory_due - time.monotonic() > MEMORY_CHECK:
            self._arm_memory_check(MEMORY_CHECK)  # (the idle pace ends with this cell)

    # --- the kernel's life ---------------------------------------------------------------
    def _new_kernel(self, op: Execute) -> None:
        spare = op.spare
        if spare and not op.launcher:
            adopted = OwnedProcess(spare.pid)  # (the pool's child: reaped there)
            launched = Launched(self.language, adopted, spare.directory, dict(spare.connection))
            self.handle = KernelHandle(launched, spare.nonce, prelude_done=True)
            if spare.layer is not None:  # its layer is the conversation's from now on
                self._drop_layer()  # (a reset: the previous layer goes with its kernel)
                self.layer = spare.layer
                self.layer_adopted = self.layer.directory
            if not self.handle.alive():
                self.handle.close()
                self.handle = None
            elif op.cwd:  # started elsewhere: move it to the run's directory first
                self.handle.execute(CHDIR[self.language] % json.dumps(op.cwd), silent=True)
        if self.handle is None:
            if self.language == "javascript":
                deno_binary()  # KernelUnavailable with the install hint, before any start
            self.place = Place.from_wire(op.place) if op.place else Place.host()
            layer = self._layer(op.cwd)
            launched = launch(
                self.language,
                op.cwd or os.getcwd(),
                op.launcher,
                place=self.place,
                layer=layer,
                group=self.name.split("/", 1)[0],  # the run: its processes share its limits
            )
            self.handle = KernelHandle(launched, bridge.new_nonce(), prelude_done=False)
        self.handle.handshake()
        self.after(HANDSHAKE_RETRY, Handshake())
        self.kernels_started += 1
        if self.place.kind == "host":  # (another place's cgroup bounds the whole run)
            # twice the polled limit: slow growth is caught by the poll (a restart with its
            # message); what outruns the poll (a runaway cell) meets the kernel's ceiling
            limit = int(self.memory_limit * 2**20 * ceiling.OVER_POLLED)
            name = f"kernel-{self.handle.pid}"
            slack = ceiling.V8_SLACK if self.language == "javascript" else ceiling.DATA_SLACK
            self.ceiling = ceiling.apply(self.handle.owned_pids(), limit, name, slack=slack)
        self._report_pids()
        if not self.memory_armed:
            self._arm_memory_check(MEMORY_CHECK)

    def _layer(self, workspace: str) -> Layer | None:
        """The conversation's Python layer (made once; kept across its kernels, removed
        with this actor): the project's interpreter, and where %pip installs, so no cell
        installs into (or uninstalls from) tether's environment, in any place."""
        if self.language != "python" or self.place.kind == "prefix":
            return None  # (a prefix's environment has its own Python)
        if not workspace and self.place.kind != "host":
            raise ValueError(
                "a kernel in a sandbox place needs the run's working directory: open the "
                "run with workdir=..."
            )
        if self.layer is not None:
            return self.layer
        if self.layer_dir is None:
            self.layer_dir = ProcessScratch("layer", under="layers")
        directory = str(self.layer_dir.base / "venv")
        try:
            self.layer = make_layer(directory, workspace or None)
        except LayerError as exc:
            if self.place.kind != "host":
                raise
            # on the host, as before: tether's Python (the project's cannot take ipykernel)
            self.cells.carry_notes.append(f"{exc}; this kernel runs on tether's Python instead")
            self.layer = make_layer(directory, None)
        return self.layer

    def _drop_kernel(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None
            self._report_pids()
        if self.ceiling is not None:
            self.ceiling.release()

    def _kernel_lost(self, why: str) -> None:
        """The kernel is gone (died, killed, over its memory, reaped): end whatever it was
        doing with what it printed, and tell the next cell its state was lost."""
        over = self.ceiling.death_note() if self.ceiling is not None else ""
        why = f"{why}; {over}" if over else why
        started = self.handle is not None and self.handle.ready
        self._drop_kernel()
        self.cells.kernel_lost(why, started)

    # --- what the kernel says ------------------------------------------------------------
    def watch_fds(self) -> list[int]:
        return self.handle.fds() if self.handle is not None else []

    def handle_watch(self, ready: list[int]) -> None:
        handle = self.handle
        if handle is None:
            return
        if set(handle.wire.fds()) & set(ready):
            for channel, msg in handle.wire.drain():
                if self.handle is not handle:
                    return
                self._take(handle, channel, msg)
        if self.handle is handle and handle.pidfd is not None and handle.pidfd in ready:
            if not handle.alive():
                self._kernel_lost(handle.exit_text())

    def _take(self, handle: KernelHandle, channel: str, msg: KernelMessage) -> None:
        if not handle.ready:
            if handle.take_handshake(channel, msg):
                self.cells.run_waiting()
            elif handle.failed:
                self._kernel_lost(handle.failed)
            return
        self.cells.take(channel, msg, handle.nonce)

    def on_cancel(self, call: Call, reason: str) -> None:
        """The eval call was cancelled: its cell is interrupted (KernelSession.cancel)."""
        self.cells.cancel(call, reason)

    def on_timer(
        self, tag: Handshake | MemoryCheck | Reap | Budget | Settle | RunWaiting | KillIfStill
    ) -> None:
        cell = self.cells.cell
        match tag:
            case KillIfStill(cell_id=cell_id) if cell is not None and cell.cell_id == cell_id:
                self._kernel_lost(
                    f"the {self.language} kernel ignored the interrupt for "
                    f"{self.interrupt_grace:g} s and was killed"
                )
            case Handshake():
                self._handshake_tick()
            case MemoryCheck(generation=generation) if generation == self.memory_generation:
                self._check_memory()
            case MemoryCheck():
                pass  # (one armed before the last: superseded)
            case Reap():
                self._maybe_reap()
            case _:
                self.cells.on_timer(tag)

    def _handshake_tick(self) -> None:
        handle = self.handle
        if handle is None or handle.ready:
            return
        if time.monotonic() - handle.started_at > self.start_timeout:
            tail = handle.launched.log_tail(400)
            self._kernel_lost(
                f"the {self.language} kernel did not answer within {self.start_timeout:g} s"
                + (f" (its output: {tail})" if tail else "")
            )
            return
        if not handle.got_iopub:
            handle.handshake()
        self.after(HANDSHAKE_RETRY, Handshake())

    def _check_memory(self) -> None:
        self.memory_armed = False
        if self.handle is None:
            return
        self.memory_mb = tree_rss_mb(self.handle.pid)
        if self.memory_mb > self.memory_limit:
            self._kernel_lost(
                f"the {self.language} kernel used {self.memory_mb:.0f} MiB, over its limit of "
                f"{self.memory_limit:g} MiB, and was restarted"
            )
            return
        ran_lately = time.monotonic() - self.cells.last_used < MEMORY_IDLE_CHECK
        busy = self.cells.cell is not None or ran_lately
        self._arm_memory_check(MEMORY_CHECK if busy else MEMORY_IDLE_CHECK)

    def _arm_memory_check(self, seconds: float) -> None:
        self.memory_armed = True
        self.memory_generation += 1
        self.memory_due = time.monotonic() + seconds
        self.after(seconds, MemoryCheck(self.memory_generation))

    def _maybe_reap(self) -> None:
        idle = time.monotonic() - self.cells.last_used
        if self.handle is None or not self.cells.idle():
            return
        if idle >= self.idle_reap:
            self._drop_kernel()
            self.cells.carry_notes.append(
                f"the previous {self.language} kernel was idle for {idle:.0f} s and was shut "
                "down to free its memory; its variables, imports and data are lost: this cell "
                "ran in a fresh kernel"
            )

    # --- ownership and health --------------------------------------------------------------
    def owned_pids(self) -> list[int]:
        return self.handle.owned_pids() if self.handle is not None else []

    def inject_kill_process(self) -> tuple[bool, str]:
        handle = self.handle
        if handle is None or not handle.alive():
            return False, f"{self.name} has no live kernel to kill"
        handle.process.kill()
        return True, f"sent SIGKILL to {self.name}'s kernel (pid {handle.pid}) and its children"

    def on_stop(self) -> None:
        self._drop_kernel()
        self._drop_layer()

    def health_node(self) -> HealthNode:
        node = super().health_node()
        node["place"] = getattr(self, "place", Place.host()).describe()
        return node

    def _drop_layer(self) -> None:
        layer_dir, self.layer_dir = getattr(self, "layer_dir", None), None
        if layer_dir is not None:
            layer_dir.close()
        adopted, self.layer_adopted = getattr(self, "layer_adopted", ""), ""
        if adopted:  # (its scratch directory, made by the pool)
            shutil.rmtree(os.path.dirname(adopted), ignore_errors=True)
        self.layer = None

    def health_extra(self) -> JSONObject:
        handle = getattr(self, "handle", None)
        if handle is not None:
            self.memory_mb = tree_rss_mb(handle.pid)
        return {
            "language": getattr(self, "language", self.key),
            "place": getattr(self, "place", Place.host()).describe(),
            "kernel_pid": handle.pid if handle else None,
            "kernel_ready": bool(handle and handle.ready),
            "memory_mb": round(self.memory_mb, 1) if handle else 0.0,
            "memory_limit_mb": getattr(self, "memory_limit", MEMORY_LIMIT_MB),
            "memory_ceiling": limit.how if (limit := getattr(self, "ceiling", None)) else "",
            "cells_run": cells.cells_run if (cells := getattr(self, "cells", None)) else 0,
            "kernels_started": getattr(self, "kernels_started", 0),
            "cell_running": cells is not None and cells.cell is not None,
            "settle_caps": cells.settle_caps if cells is not None else 0,
            # the running cell's output so far (its end): tether serve's progress says it
            "cell_output": cells.cell.output.render().text[-OUTPUT_TAIL:]
            if cells is not None and cells.cell is not None
            else "",
        }


class _CellIO:
    """The kernel session's IO (tether.kernels.session.CellIO), done by its actor."""

    def __init__(self, actor: KernelActor) -> None:
        self.actor = actor

    def _handle(self) -> KernelHandle:
        assert self.actor.handle is not None, "the session asked for a kernel it was told of"
        return self.actor.handle

    def send(self, channel: str, msg_type: str, content: JSONObject) -> str:
        return self._handle().wire.send(channel, msg_type, content)

    def execute(self, code: str) -> str:
        return self._handle().execute(code)

    def reply(self, call: Call, reply: CellReply) -> None:
        self.actor.reply(call, cell_payload(reply))

    def fail(self, call: Call, code: ErrorCode, message: str) -> None:
        self.actor.fail(call, code, message)

    def after(self, seconds: float, tag: Budget | Settle | RunWaiting | KillIfStill) -> None:
        self.actor.after(seconds, tag)

    def kernel(self) -> tuple[int, bool] | None:
        handle = self.actor.handle
        return (handle.pid, handle.ready) if handle is not None else None

    def limits_hit(self) -> list[str]:
        return self._handle().limits_hit()

    def ended(self) -> None:
        self.actor.after(self.actor.idle_reap, Reap())


POOL_ACTOR_MB, SPARE_MB = 10, 80  # a pool's actor, and each spare kernel it keeps


def kinds(
    idle_reap: float = IDLE_REAP,
    memory_limit_mb: float = MEMORY_LIMIT_MB,
    interrupt_grace: float = INTERRUPT_GRACE,
    start_timeout: float = START_TIMEOUT,
    spares: int = 1,
) -> list[KindSpec]:
    """The kernel kinds with a host's settings (`Runtime.start(kinds=...)`); KINDS has the
    defaults. spares: started kernels kept per language (0: no pool)."""
    config: JSONObject = {
        "idle_reap": idle_reap,
        "memory_limit_mb": memory_limit_mb,
        "interrupt_grace": interrupt_grace,
        "start_timeout": start_timeout,
    }
    return [
        # never restarted behind the run's back: a kernel's state is gone anyway, and the
        # next cell starts a fresh one and says so (TEMPORARY: the actor itself is cheap)
        KindSpec(
            "kernel",
            "tether.actors.kernel:KernelActor",
            Scope.RUN,
            ChildSpec(Restart.TEMPORARY, shutdown_timeout=2.0),
            config=config,
        ),
        KindSpec(
            "kernel_pool",
            "tether.actors.kernel_pool:KernelPoolActor",
            Scope.SHARED,
            ChildSpec(Restart.TRANSIENT, backoff_initial=0.5),
            # what the memory budget reserves for it: its actor and its spares (a pool of
            # none holds only its actor; the table's 90 MiB is one spare's)
            config={
                "spares": int(spares),
                "capacity": {"expected_mb": POOL_ACTOR_MB + SPARE_MB * int(spares)},
            },
        ),
    ]


KINDS: list[KindSpec] = kinds()
