"""`KernelSession`: what happens to a kernel's cells, sans-io (like the LSP and DAP sessions).

The kernel actor (`tether.actors.kernel.KernelActor`) owns the kernel process: it starts
or adopts it, does the handshake, watches its memory and reaps it when idle. Everything a
*cell* goes through is kept here, in one object that never reads a socket or arms a timer
itself: a cell to run (`submit`), the kernel's messages once its handshake is done
(`take`), the host's answer to a bridged tool call (`tool_answer`), a cancel (`cancel`),
the timers it asked for (`on_timer`) and the kernel's loss (`kernel_lost`). It acts
through a small `CellIO` (send to the kernel, answer or fail a call, arm a timer), so the
tests feed it fake Jupyter messages (tests/kernels/test_session_sansio.py).

A cell's life:

    submit -> execute_request -> iopub outputs -> execute_reply + iopub idle -> the result
    (a late publisher, Deno, may publish after idle: a kernel_info request marks the end)

- Tool bridge: an input_request whose prompt carries the bridge sentinel and the kernel's
  nonce answers the call early with `{"status": "tool", ...}`; the host's `ToolAnswer`
  becomes the kernel's input_reply. A plain input() gets "" and a note.
- Budgets: no output for `inactivity` seconds (a pending bridged call does not count) or
  `wall` seconds in all -> interrupt_request on the control channel, and `KillIfStill`
  after the grace (the actor kills the kernel then).
- One cell runs at a time; the next may queue only behind a cancelled one winding down.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tether.json_types import JSONObject
from tether.kernels import bridge
from tether.kernels.cell import Cell
from tether.kernels.outputs import CellOutput
from tether.kernels.wire import KernelMessage
from tether.messages.calls import Call, ErrorCode
from tether.messages.kernel_ops import CellDone, CellReply, Execute, ToolAnswer, ToolRequest

LATE_PUBLISHERS = ("javascript",)  # kernels that may publish a cell's output after its idle
SETTLE_CAP = 0.05  # s to wait for their end marker (a kernel_info's iopub status) at most

_ids = itertools.count(1)


# timer tags (armed through CellIO.after; the owner hands them back to on_timer)
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
class KillIfStill:  # the cell was interrupted: the owner kills the kernel if it still runs
    cell_id: str


class CellIO(Protocol):
    """What the session asks of its owner."""

    def send(self, channel: str, msg_type: str, content: JSONObject) -> str:
        """A message to the kernel; its msg_id."""

    def execute(self, code: str) -> str:
        """An execute_request; its msg_id."""

    def reply(self, call: Call, reply: CellReply) -> None: ...

    def fail(self, call: Call, code: ErrorCode, message: str) -> None: ...

    def after(self, seconds: float, tag: Budget | Settle | RunWaiting | KillIfStill) -> None: ...

    def kernel(self) -> tuple[int, bool] | None:
        """The kernel's (pid, ready: its handshake is done), None when there is none."""

    def limits_hit(self) -> list[str]:
        """Notes on the kernel's limits this cell ran into (a full disk, refused forks)."""

    def ended(self) -> None:
        """A cell ended (the owner arms its idle reaping)."""


class KernelSession:
    def __init__(
        self,
        language: str,
        io: CellIO,
        interrupt_grace: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.language = language
        self.io = io
        self.interrupt_grace = interrupt_grace
        self.clock = clock
        self.cell: Cell | None = None  # the cell the kernel runs
        self.waiting: Cell | None = None  # a cell waiting for its kernel to be ready
        self.done: dict[str, CellDone] = {}  # last finished cell (answered late)
        self.carry_notes: list[str] = []  # for the next cell: what happened to the state
        self.cells_run = 0
        self.settle_caps = 0  # how often a late publisher's end marker came too late
        self.last_used = clock()

    # --- cells in ------------------------------------------------------------------------
    def refusal(self, op: Execute) -> str:
        """Why a cell cannot be taken now ("" when it can)."""
        winding_down = self.cell is not None and self.cell.cancelled and not op.reset
        if (self.cell is not None and not winding_down) or self.waiting is not None:
            return (
                "a cell is still running in this kernel; wait for its result (eval cells of "
                "one conversation run one at a time)"
            )
        return ""

    def new_cell(self, call: Call, op: Execute) -> Cell:
        """The cell of `call`, carrying what happened to the state since the last one."""
        cell = Cell(f"c{next(_ids)}", call, op, CellOutput(source=op.source or None))
        cell.notes.extend(self.carry_notes)
        self.carry_notes = []
        return cell

    def submit(self, cell: Cell) -> None:
        """Run `cell` as soon as the kernel is ready and no cell runs (it may be now)."""
        self.last_used = self.clock()
        self.waiting = cell
        kernel = self.io.kernel()
        if kernel is not None and kernel[1] and self.cell is None:
            self.run_waiting()  # (else it runs when the cancelled cell has stopped)

    def run_waiting(self) -> None:
        cell, self.waiting = self.waiting, None
        if cell is None or self.io.kernel() is None:
            return
        self.cell = cell
        cell.started_at = cell.last_activity = self.clock()
        cell.msg_id = self.io.execute(cell.op.code)
        self._arm_budget(cell)

    def tool_answer(self, call: Call, answer: ToolAnswer) -> None:
        cell = self.cell
        if cell is None or cell.cell_id != answer.cell:
            final = self.done.pop(answer.cell, None)
            if final is not None:
                self.io.reply(call, final)
            else:
                self.io.fail(call, ErrorCode.BAD_REQUEST, f"no running cell {answer.cell!r} here")
            return
        cell.call = call
        if cell.final is not None:  # it ended (killed) while the host ran the tool
            self._answer(cell)
            return
        if cell.tool_pending and self.io.kernel() is not None:
            value = bridge.encode_answer(list(answer.results))
            self.io.send("stdin", "input_reply", {"value": value})
            cell.tool_pending = False
            cell.last_activity = self.clock()
            self._arm_budget(cell)

    def cancel(self, call: Call, reason: str) -> None:
        """The eval call was cancelled: its cell is interrupted (the kernel and its state
        stay), so the conversation's next cell runs at once."""
        waiting = self.waiting
        if (
            waiting is not None
            and waiting.call is not None
            and waiting.call.call_id == call.call_id
        ):
            self.waiting = None  # (its kernel was still starting: nothing ran)
            self.io.fail(call, ErrorCode.CANCELLED, f"cancelled before the cell ran: {reason}")
            return
        cell = self.cell
        if cell is not None and cell.call is not None and cell.call.call_id == call.call_id:
            cell.cancelled = True
            self.interrupt(cell, f"the call was cancelled ({reason})")

    # --- what the kernel says ------------------------------------------------------------
    def take(self, channel: str, msg: KernelMessage, nonce: str) -> None:
        """A message of the kernel (its handshake done); `nonce`: the kernel's bridge nonce."""
        cell = self.cell
        parent = msg.get("parent_header", {}).get("msg_id")
        if cell is not None and cell.flush_id and parent == cell.flush_id and channel == "iopub":
            self.finish(cell)  # the kernel's iopub got past the cell: nothing more is coming
            return
        if cell is None or parent != cell.msg_id:
            return
        msg_type, content = msg["msg_type"], msg["content"]
        if channel == "iopub":
            if msg_type == "status":
                cell.got_idle = cell.got_idle or content.get("execution_state") == "idle"
            else:  # (execute_input too: its execution count locates tracebacks)
                cell.output.add(msg_type, content)
                cell.last_activity = self.clock()
                cell.got_result = cell.got_result or msg_type == "execute_result"
        elif channel == "shell" and msg_type == "execute_reply":
            cell.output.add(msg_type, content)
            cell.got_reply = True
            count = content.get("execution_count")
            cell.execution_count = count if isinstance(count, int) else None
        elif channel == "stdin" and msg_type == "input_request":
            self._input_request(cell, str(content.get("prompt", "")), nonce)
            return
        if not (cell.got_reply and cell.got_idle) or cell.final is not None:
            return
        if self.language not in LATE_PUBLISHERS or cell.got_result:
            self.finish(cell)
        elif not cell.flush_id:
            # Deno may publish a cell's output after its idle: a kernel_info request goes
            # through after it, and its iopub status marks the end (capped). Its streams,
            # displays and echoed result leave through one queue, in order, the result
            # last: a cell whose result is here needs no marker
            cell.flush_id = self.io.send("shell", "kernel_info_request", {})
            self.io.after(SETTLE_CAP, Settle(cell.cell_id))

    def _input_request(self, cell: Cell, prompt: str, nonce: str) -> None:
        request = bridge.parse_request(prompt, nonce)
        if request is None or isinstance(request, str):
            if request is None:
                cell.notes.append(
                    "input()/prompt() got an empty answer: nobody can type into an eval cell; "
                    "put the value in the code instead"
                )
                value = ""
            else:
                value = bridge.encode_answer([{"ok": False, "text": request, "data": None}])
            self.io.send("stdin", "input_reply", {"value": value})
            return
        cell.tool_pending = True
        call, cell.call = cell.call, None
        if call is not None:
            calls: list[JSONObject] = [{"name": name, "args": args} for name, args in request.calls]
            self.io.reply(call, ToolRequest(cell.cell_id, calls))

    # --- a cell's end --------------------------------------------------------------------
    def finish(self, cell: Cell) -> None:
        if cell.final is not None:
            return
        kernel = self.io.kernel()
        if kernel is not None:
            cell.notes.extend(self.io.limits_hit())
        rendered = cell.output.render()
        if cell is self.cell:
            self.cell = None
            if self.waiting is not None and kernel is not None and kernel[1]:
                self.io.after(0, RunWaiting())  # (after this cell's answer has gone)
        self.cells_run += 1
        self.last_used = self.clock()
        cell.final = CellDone(
            text=rendered.text,
            images=[{"mime": i.mime, "data": i.data} for i in rendered.images],
            notes=[*cell.notes, *rendered.notes],
            error=rendered.error,
            execution_count=cell.execution_count,
            interrupted=cell.interrupted,
            kernel_pid=kernel[0] if kernel is not None else None,
            elapsed=round(self.clock() - cell.started_at, 4),
        )
        self._answer(cell)
        self.io.ended()

    def _answer(self, cell: Cell) -> None:
        assert cell.final is not None
        if cell.call is not None:
            self.io.reply(cell.call, cell.final)
            cell.call = None
        else:  # the host is running a bridged call: it gets this with its ToolAnswer
            self.done = {cell.cell_id: cell.final}

    def kernel_lost(self, why: str, started: bool) -> None:
        """The kernel is gone (`started`: it had run its handshake): end whatever it was
        doing with what it printed, and tell the next cell its state was lost."""
        waiting, self.waiting = self.waiting, None
        if not started:  # it never ran a cell: nothing was lost, it just cannot start
            if waiting is not None and waiting.call is not None:
                self.io.fail(
                    waiting.call,
                    ErrorCode.FAILED,
                    f"the {self.language} kernel could not start: {why}. Fix what its output "
                    "says (or the launcher) and run the cell again.",
                )
            return
        lost = f"{why}; its variables, imports and data are lost"
        if waiting is not None and waiting.call is not None:
            self.io.fail(
                waiting.call, ErrorCode.FAILED, f"{lost}. Run the cell again to use a fresh kernel."
            )
        if self.cell is not None:  # it did not finish: an error, with what it printed
            self.cell.interrupted = self.cell.interrupted or why
            self.cell.notes.append(f"{lost}. The next cell starts a fresh kernel.")
            self.finish(self.cell)
        self.carry_notes.append(f"{lost}: this cell ran in a fresh kernel")

    # --- budgets and timers --------------------------------------------------------------
    def on_timer(self, tag: object) -> None:
        cell = self.cell
        match tag:
            case Budget(cell_id=cell_id):
                self._check_budget(cell_id)
            case Settle(cell_id=cell_id) if cell is not None and cell.cell_id == cell_id:
                self.settle_caps += 1
                self.finish(cell)
            case RunWaiting() if self.cell is None:
                self.run_waiting()

    def _arm_budget(self, cell: Cell) -> None:
        now = self.clock()
        left = min(
            cell.op.wall - (now - cell.started_at),
            cell.op.inactivity - (now - cell.last_activity),
        )
        self.io.after(max(left, 0.01), Budget(cell.cell_id))

    def _check_budget(self, cell_id: str) -> None:
        cell = self.cell
        if cell is None or cell.cell_id != cell_id or cell.interrupted or self.io.kernel() is None:
            return
        now = self.clock()
        if now - cell.started_at >= cell.op.wall:
            why = f"the cell ran for {cell.op.wall:g} s, its wall-clock cap"
        elif not cell.tool_pending and now - cell.last_activity >= cell.op.inactivity:
            why = f"the cell printed nothing for {cell.op.inactivity:g} s, its inactivity budget"
        else:
            self._arm_budget(cell)
            return
        self.interrupt(cell, why)

    def interrupt(self, cell: Cell, why: str) -> None:
        """interrupt_request on the control channel; KillIfStill after the grace."""
        if self.io.kernel() is None or cell.interrupted:
            return
        cell.interrupted = why
        cell.notes.append(f"{why}: it was interrupted; the output above is what it printed")
        self.io.send("control", "interrupt_request", {})
        self.io.after(self.interrupt_grace, KillIfStill(cell.cell_id))

    def idle(self) -> bool:
        """No cell runs or waits (the kernel may be reaped)."""
        return self.cell is None and self.waiting is None
