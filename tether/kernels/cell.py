"""One eval cell's state in its kernel actor: the call it answers, its output so far,
and what the kernel has said about it (reply, idle, a pending bridged call)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tether.kernels.outputs import CellOutput
from tether.messages.calls import Call
from tether.messages.kernel_ops import CellDone, Execute


@dataclass
class Cell:
    cell_id: str
    call: Call | None  # the host's call to answer next (None while a bridged call runs)
    op: Execute
    output: CellOutput = field(default_factory=CellOutput)
    msg_id: str = ""
    started_at: float = field(default_factory=time.monotonic)
    last_activity: float = field(default_factory=time.monotonic)
    tool_pending: bool = False
    got_reply: bool = False
    got_idle: bool = False
    interrupted: str = ""
    cancelled: bool = False  # its call was cancelled: the next cell may queue behind it
    notes: list[str] = field(default_factory=list)
    final: CellDone | None = None  # its answer, once it ended
    flush_id: str = ""  # (late publishers) the kernel_info request that marks the end
    got_result: bool = False  # its execute_result (the echoed last expression) arrived
    execution_count: int | None = None
