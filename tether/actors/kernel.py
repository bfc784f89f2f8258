"""`KernelActor` (kind "kernel", RUN scope, key = language): a run's persistent Python or
JavaScript interpreter; `kinds()` declares it with the spare pool (`tether.actors.kernel_pool`).

One KernelActor per run and language owns one Jupyter kernel process (ipykernel, or
Deno's `deno jupyter`), started on the first cell, or handed over started by the spare pool.
The kernel's wire (`tether.kernels.wire`) is driven from the actor's own loop: it reacts
to what arrives, and to the kernel's death through a pidfd. A cell:

    Execute -> execute_request -> iopub outputs (CellOutput) -> execute_reply + iopub idle
            -> the rendered result (Deno may publish after idle: a kernel_info marks the end)

Tool bridge: an input_request whose prompt carries the bridge sentinel and this kernel's
nonce becomes an early answer `{"status": "tool", ...}`; the host runs the calls and sends
`ToolAnswer`, which becomes the kernel's input_reply (`tether.messages.kernel_ops`).
A plain input() gets "" and a note.

Budgets: no output for `inactivity` seconds (a pending bridged call does not count) or
`wall` seconds in all -> interrupt_request (ipykernel and Deno both take it on the control
channel); still running `interrupt_grace` later -> the kernel is killed. Either way the
result carries the partial output and says what happened. A kernel that died, was killed,
went over its memory limit or was reaped for idleness is simply gone: the next cell starts
a fresh one, and its result says the state was lost.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any

from tether.actors.base import ResourceActor, ResourceUnavailable
from tether.capacity import ceiling
from tether.health_node import HealthNode
from tether.kernels import bridge
from tether.kernels.cell import Cell
from tether.kernels.handle import KernelHandle, tree_rss_mb
from tether.kernels.launch import KernelUnavailable, Launched, deno_binary, launch
from tether.kernels.layer import Layer, LayerError, layer_from_wire, make_layer
from tether.kernels.outputs import CellOutput
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import Call, ErrorCode
from tether.messages.kernel_ops import KERNEL, Execute, Status, ToolAnswer
from tether.places import Place
from tether.processes import kill_tree
from tether.scratch import ProcessScratch

START_TIMEOUT = 60.0  # s for a new kernel to answer kernel_info and run its prelude
HANDSHAKE_RETRY = 0.2  # s between kernel_info requests until iopub is seen to be connected
INTERRUPT_GRACE = 3.0  # s a cell has to stop after an interrupt before the kernel is killed
IDLE_REAP = 1800.0  # s without a cell before a kernel is shut down to free its memory
MEMORY_LIMIT_MB = 4096.0  # RSS of the kernel's process tree; over it, the kernel is restarted
MEMORY_CHECK = 1.0  # s between memory checks
LATE_PUBLISHERS = ("javascript",)  # kernels that may publish a cell's output after its idle
SETTLE_CAP = 0.05  # s to wait for their end marker (a kernel_info's iopub status) at most


# timer tags (ResourceActor.after / on_timer)
@dataclass(frozen=True)
class Budget:  # check a cell's inactivity budget and wall-clock cap
    cell_id: str


@dataclass(frozen=True)
class Settle:  # a late publisher's end marker did not come in time: finish the cell
    cell_id: str


@dataclass(frozen=True)
class RunWaiting:  # the cancelled cell stopped: run the cell that queued behind it
    pass


@dataclass(frozen=True)
class KillIfStill:  # the cell was interrupted: kill the kernel if it still runs
    cell_id: str


@dataclass(frozen=True)
class Handshake:  # resend kernel_info until the kernel's iopub is seen
    pass


@dataclass(frozen=True)
class MemoryCheck:
    pass


@dataclass(frozen=True)
class Reap:  # shut the kernel down if it has been idle for idle_reap
    pass


CHDIR = {"python": "__import__('os').chdir(%s)", "javascript": "Deno.chdir(%s)"}

_ids = itertools.count(1)


def _int(config: dict[str, Any], name: str, default: float) -> float:
    value = config.get(name, default)
    return float(value) if isinstance(value, int | float) and value > 0 else default


class KernelActor(ResourceActor):
    def on_start(self, key: str, config: dict[str, Any]) -> None:
        if key not in ("python", "javascript"):
            raise ResourceUnavailable(
                f"no kernel for language {key!r}: use 'python' or 'javascript'"
            )
        self.language = key
        self.handle: KernelHandle | None = None
        self.cell: Cell | None = None
        self.waiting: Cell | None = None  # a cell waiting for its kernel to be ready
        self.done: dict[str, dict[str, Any]] = {}  # last finished cell (answered late)
        self.carry_notes: list[str] = []  # for the next cell: what happened to the state
        self.kernels_started = 0
        self.cells_run = 0
        self.last_used = time.monotonic()
        self.idle_reap = _int(config, "idle_reap", IDLE_REAP)
        self.memory_limit = _int(config, "memory_limit_mb", MEMORY_LIMIT_MB)
        self.interrupt_grace = _int(config, "interrupt_grace", INTERRUPT_GRACE)
        self.start_timeout = _int(config, "start_timeout", START_TIMEOUT)
        self.memory_mb = 0.0
        self.memory_armed = False
        self.settle_caps = 0
        self.place = Place.host()  # where its kernel runs (the run's place, with each Execute)
        # the kernel-enforced memory limit of the current kernel (tether.capacity.ceiling)
        self.ceiling: ceiling.Ceiling | None = None
        self.layer_dir: ProcessScratch | None = None  # the conversation's %pip layer
        self.layer: Layer | None = None  # made there, or adopted with a spare kernel
        self.layer_adopted = ""  # the directory of an adopted one (removed with us)

    # --- calls ---------------------------------------------------------------------------
    def on_call(self, call: Call) -> None:
        match KERNEL.parse(call):
            case Execute() as op:
                self._execute(call, op)
            case ToolAnswer() as answer:
                self._tool_answer(call, answer)
            case Status():
                self.reply(call, self.health_extra())

    def _execute(self, call: Call, op: Execute) -> None:
        winding_down = self.cell is not None and self.cell.cancelled and not op.reset
        if (self.cell is not None and not winding_down) or self.waiting is not None:
            self.fail(
                call,
                ErrorCode.BAD_REQUEST,
                "a cell is still running in this kernel; wait for its result (eval cells of "
                "one conversation run one at a time)",
            )
            return
        if self.handle is not None and self.handle.exited():  # (before its pidfd's turn came)
            self._kernel_lost(self.handle.exit_text())
        cell = Cell(f"c{next(_ids)}", call, op, CellOutput(source=op.source or None))
        cell.notes.extend(self.carry_notes)
        self.carry_notes = []
        if op.reset and self.handle is not None:
            self._drop_kernel()
            cell.notes.append("reset: the previous kernel was shut down; this one starts clean")
        if self.handle is not None and op.spare:  # not needed after all: it must not linger
            kill_tree(int(op.spare["pid"]), grace=0.0, wait=False)
            shutil.rmtree(str(op.spare["directory"]), ignore_errors=True)
        if self.handle is None:
            try:
                self._new_kernel(op)
            except (KernelUnavailable, OSError, ValueError) as exc:
                self.fail(
                    call, ErrorCode.UNAVAILABLE, f"cannot start a {self.language} kernel: {exc}"
                )
                return
        self.last_used = time.monotonic()
        self.waiting = cell
        if self.handle is not None and self.handle.ready and self.cell is None:
            self._run_waiting()  # (else it runs when the cancelled cell has stopped)

    def _tool_answer(self, call: Call, answer: ToolAnswer) -> None:
        cell = self.cell
        if cell is None or cell.cell_id != answer.cell:
            final = self.done.pop(answer.cell, None)
            if final is not None:
                self.reply(call, final)
            else:
                self.fail(call, ErrorCode.BAD_REQUEST, f"no running cell {answer.cell!r} here")
            return
        cell.call = call
        if cell.final is not None:  # it ended (killed) while the host ran the tool
            self._answer(cell)
            return
        if cell.tool_pending and self.handle is not None:
            value = bridge.encode_answer(list(answer.results))
            self.handle.wire.send("stdin", "input_reply", {"value": value})
            cell.tool_pending = False
            cell.last_activity = time.monotonic()
            self._arm_budget(cell)

    # --- the kernel's life ---------------------------------------------------------------
    def _new_kernel(self, op: Execute) -> None:
        spare = op.spare
        if spare and not op.launcher:
            launched = Launched(
                self.language, int(spare["pid"]), str(spare["directory"]), dict(spare["connection"])
            )
            self.handle = KernelHandle(launched, str(spare["nonce"]), prelude_done=True)
            if spare.get("layer"):  # its layer is the conversation's from now on
                self._drop_layer()  # (a reset: the previous layer goes with its kernel)
                self.layer = layer_from_wire(dict(spare["layer"]))
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
            self.memory_armed = True
            self.after(MEMORY_CHECK, MemoryCheck())

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
            self.carry_notes.append(f"{exc}; this kernel runs on tether's Python instead")
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
        waiting, self.waiting = self.waiting, None
        if not started:  # it never ran a cell: nothing was lost, it just cannot start
            if waiting is not None and waiting.call is not None:
                self.fail(
                    waiting.call,
                    ErrorCode.FAILED,
                    f"the {self.language} kernel could not start: {why}. Fix what its output "
                    "says (or the launcher) and run the cell again.",
                )
            return
        lost = f"{why}; its variables, imports and data are lost"
        if waiting is not None and waiting.call is not None:
            self.fail(
                waiting.call, ErrorCode.FAILED, f"{lost}. Run the cell again to use a fresh kernel."
            )
        if self.cell is not None:  # it did not finish: an error, with what it printed
            self.cell.interrupted = self.cell.interrupted or why
            self.cell.notes.append(f"{lost}. The next cell starts a fresh kernel.")
            self._finish(self.cell)
        self.carry_notes.append(f"{lost}: this cell ran in a fresh kernel")

    def _run_waiting(self) -> None:
        cell, self.waiting = self.waiting, None
        if cell is None or self.handle is None:
            return
        self.cell = cell
        cell.started_at = cell.last_activity = time.monotonic()
        cell.msg_id = self.handle.execute(cell.op.code)
        self._arm_budget(cell)

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

    def _take(self, handle: KernelHandle, channel: str, msg: dict[str, Any]) -> None:
        if not handle.ready:
            if handle.take_handshake(channel, msg):
                self._run_waiting()
            elif handle.failed:
                self._kernel_lost(handle.failed)
            return
        cell = self.cell
        parent = msg.get("parent_header", {}).get("msg_id")
        if cell is not None and cell.flush_id and parent == cell.flush_id and channel == "iopub":
            self._finish(cell)  # the kernel's iopub got past the cell: nothing more is coming
            return
        if cell is None or parent != cell.msg_id:
            return
        msg_type, content = msg["msg_type"], msg["content"]
        if channel == "iopub":
            if msg_type == "status":
                cell.got_idle = cell.got_idle or content.get("execution_state") == "idle"
            else:  # (execute_input too: its execution count locates tracebacks)
                cell.output.add(msg_type, content)
                cell.last_activity = time.monotonic()
                cell.got_result = cell.got_result or msg_type == "execute_result"
        elif channel == "shell" and msg_type == "execute_reply":
            cell.output.add(msg_type, content)
            cell.got_reply = True
            cell.execution_count = content.get("execution_count")
        elif channel == "stdin" and msg_type == "input_request":
            self._input_request(cell, str(content.get("prompt", "")))
            return
        if not (cell.got_reply and cell.got_idle) or cell.final is not None:
            return
        if self.language not in LATE_PUBLISHERS or cell.got_result:
            self._finish(cell)
        elif not cell.flush_id:
            # Deno may publish a cell's output after its idle: a kernel_info request goes
            # through after it, and its iopub status marks the end (capped). Its streams,
            # displays and echoed result leave through one queue, in order, the result
            # last: a cell whose result is here needs no marker
            cell.flush_id = handle.wire.send("shell", "kernel_info_request", {})
            self.after(SETTLE_CAP, Settle(cell.cell_id))

    def _input_request(self, cell: Cell, prompt: str) -> None:
        assert self.handle is not None
        request = bridge.parse_request(prompt, self.handle.nonce)
        if request is None or isinstance(request, str):
            if request is None:
                cell.notes.append(
                    "input()/prompt() got an empty answer: nobody can type into an eval cell; "
                    "put the value in the code instead"
                )
                value = ""
            else:
                value = bridge.encode_answer([{"ok": False, "text": request, "data": None}])
            self.handle.wire.send("stdin", "input_reply", {"value": value})
            return
        cell.tool_pending = True
        call, cell.call = cell.call, None
        if call is not None:
            calls = [{"name": name, "args": args} for name, args in request.calls]
            self.reply(call, {"status": "tool", "cell": cell.cell_id, "calls": calls})

    # --- a cell's end --------------------------------------------------------------------
    def _finish(self, cell: Cell) -> None:
        if cell.final is not None:
            return
        if self.handle is not None:
            cell.notes.extend(self.handle.limits_hit())
        rendered = cell.output.render()
        if cell is self.cell:
            self.cell = None
            if self.waiting is not None and self.handle is not None and self.handle.ready:
                self.after(0, RunWaiting())  # (after this cell's answer has gone)
        self.cells_run += 1
        self.last_used = time.monotonic()
        cell.final = {
            "status": "done",
            "text": rendered.text,
            "images": [{"mime": i.mime, "data": i.data} for i in rendered.images],
            "notes": [*cell.notes, *rendered.notes],
            "error": rendered.error,
            "execution_count": cell.execution_count,
            "interrupted": cell.interrupted,
            "kernel_pid": self.handle.pid if self.handle else None,
            "elapsed": round(time.monotonic() - cell.started_at, 4),
        }
        self._answer(cell)
        self.after(self.idle_reap, Reap())

    def _answer(self, cell: Cell) -> None:
        assert cell.final is not None
        if cell.call is not None:
            self.reply(cell.call, cell.final)
            cell.call = None
        else:  # the host is running a bridged call: it gets this with its ToolAnswer
            self.done = {cell.cell_id: cell.final}

    # --- budgets and timers --------------------------------------------------------------
    def _arm_budget(self, cell: Cell) -> None:
        now = time.monotonic()
        left = min(
            cell.op.wall - (now - cell.started_at),
            cell.op.inactivity - (now - cell.last_activity),
        )
        self.after(max(left, 0.01), Budget(cell.cell_id))

    def _check_budget(self, cell_id: str) -> None:
        cell = self.cell
        if cell is None or cell.cell_id != cell_id or cell.interrupted or self.handle is None:
            return
        now = time.monotonic()
        if now - cell.started_at >= cell.op.wall:
            why = f"the cell ran for {cell.op.wall:g} s, its wall-clock cap"
        elif not cell.tool_pending and now - cell.last_activity >= cell.op.inactivity:
            why = f"the cell printed nothing for {cell.op.inactivity:g} s, its inactivity budget"
        else:
            self._arm_budget(cell)
            return
        self._interrupt(cell, why)

    def _interrupt(self, cell: Cell, why: str) -> None:
        """interrupt_request on the control channel; killed if still running after grace."""
        if self.handle is None or cell.interrupted:
            return
        cell.interrupted = why
        cell.notes.append(f"{why}: it was interrupted; the output above is what it printed")
        self.handle.wire.send("control", "interrupt_request", {})
        self.after(self.interrupt_grace, KillIfStill(cell.cell_id))

    def on_cancel(self, call: Call, reason: str) -> None:
        """The eval call was cancelled: its cell is interrupted (the kernel and its state
        stay), so the conversation's next cell runs at once."""
        waiting = self.waiting
        if (
            waiting is not None
            and waiting.call is not None
            and waiting.call.call_id == call.call_id
        ):
            self.waiting = None  # (its kernel was still starting: nothing ran)
            self.fail(call, ErrorCode.CANCELLED, f"cancelled before the cell ran: {reason}")
            return
        cell = self.cell
        if cell is not None and cell.call is not None and cell.call.call_id == call.call_id:
            cell.cancelled = True
            self._interrupt(cell, f"the call was cancelled ({reason})")

    def on_timer(self, tag: Any) -> None:
        cell = self.cell
        match tag:
            case Budget(cell_id=cell_id):
                self._check_budget(cell_id)
            case Settle(cell_id=cell_id) if cell is not None and cell.cell_id == cell_id:
                self.settle_caps += 1  # (health: how often the end marker came too late)
                self._finish(cell)
            case KillIfStill(cell_id=cell_id) if cell is not None and cell.cell_id == cell_id:
                self._kernel_lost(
                    f"the {self.language} kernel ignored the interrupt for "
                    f"{self.interrupt_grace:g} s and was killed"
                )
            case Handshake():
                self._handshake_tick()
            case RunWaiting() if self.cell is None:
                self._run_waiting()
            case MemoryCheck():
                self._check_memory()
            case Reap():
                self._maybe_reap()

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
        self.memory_armed = True
        self.after(MEMORY_CHECK, MemoryCheck())

    def _maybe_reap(self) -> None:
        idle = time.monotonic() - self.last_used
        if self.handle is None or self.cell is not None or self.waiting is not None:
            return
        if idle >= self.idle_reap:
            self._drop_kernel()
            self.carry_notes.append(
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
        kill_tree(handle.pid, grace=0.0, wait=False)
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

    def health_extra(self) -> dict[str, Any]:
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
            "cells_run": getattr(self, "cells_run", 0),
            "kernels_started": getattr(self, "kernels_started", 0),
            "cell_running": getattr(self, "cell", None) is not None,
            "settle_caps": getattr(self, "settle_caps", 0),
        }


def kinds(
    idle_reap: float = IDLE_REAP,
    memory_limit_mb: float = MEMORY_LIMIT_MB,
    interrupt_grace: float = INTERRUPT_GRACE,
    start_timeout: float = START_TIMEOUT,
    spares: int = 1,
) -> list[KindSpec]:
    """The kernel kinds with a host's settings (`Runtime.start(kinds=...)`); KINDS has the
    defaults. spares: started kernels kept per language (0: no pool)."""
    config = {
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
            config={"spares": int(spares)},
        ),
    ]


KINDS: list[KindSpec] = kinds()
