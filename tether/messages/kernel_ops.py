"""The ops of the "kernel" kind (one actor per run and language): run a cell, answer it.

A cell that calls `tool()` makes the actor answer `Execute` early with a `ToolRequest`
(the cell and its calls); the host runs the calls through the run's own pipeline and sends
`ToolAnswer`, which the actor answers the same way again (the next tool request, or the
cell's end: `CellDone`). So the actor never imports the host, and the call it holds open
is always the host's latest one.

Replies cross the wire as the `Reply` payload, their fields flat with `status` saying which
(`cell_payload`); the host reads them back as the class that status names, every field
checked (`read_cell_reply`), as the language server kind's replies are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tether.json_types import JSONObject, JSONValue  # noqa: F401 (get_type_hints reads Wire here)
from tether.messages.calls import Wire, WireValue
from tether.messages.ops import OpError, Records, Vocabulary, op_args

KERNEL = Vocabulary("kernel", idempotent=False)

DEFAULT_INACTIVITY = 300.0  # s without output (and without a pending bridged call)
DEFAULT_WALL = 3600.0  # s a cell may run at most, whatever it does


@dataclass(frozen=True)
class Layer:
    """A kernel's Python layer: a venv over a base interpreter (made by
    `tether.kernels.layer.make_layer`). Defined here because it crosses processes inside a
    `Spare`: the codec carries it, and the message layer imports no library."""

    directory: str
    python: str  # the layer's interpreter: run the kernel with it
    base: str  # the interpreter it is over (a project's, or the runtime's base Python)
    project_site: str  # "" when the project has no venv
    lends: bool  # tether's site-packages is on its path (ipykernel lent)

    def toolchains(self) -> list[str]:
        """What a sandbox must bind read-only for it to run (beyond the runtime's own)."""
        out = [str(Path(self.base).resolve().parent.parent)]
        if self.project_site:
            out.append(str(Path(self.project_site).parents[2]))  # <venv>/lib/pythonX.Y/site
        return out


@dataclass(frozen=True)
class Spare:
    """A started kernel the pool hands to a run's KernelActor (pool -> host -> kernel actor):
    what the adopter needs to talk to it, kill it and clean up after it."""

    language: str
    pid: int
    directory: str  # the kernel's scratch directory (connection file, log)
    connection: JSONObject  # the connection file's content (transport, ports, key)
    nonce: str  # the tool bridge's secret, set by the prelude the pool already ran
    layer: Layer | None  # its Python layer (None for JavaScript): the run's from now on


@KERNEL.op
@dataclass(frozen=True)
class Execute:
    code: str
    source: str = ""  # the cell as the model wrote it, when `code` is its rewritten form
    reset: bool = False  # throw the interpreter away and start a clean one first
    inactivity: float = DEFAULT_INACTIVITY
    wall: float = DEFAULT_WALL
    launcher: list[str] = field(default_factory=list)  # command prefix (isolated env)
    cwd: str = ""  # where a new kernel starts (the run's working directory)
    spare: Spare | None = None  # a started kernel handed over by the spare pool
    place: JSONObject | None = None  # the run's place (tether.places wire form); None: host


# --- replies ------------------------------------------------------------------------------
REPLIES = Records("kernel reply")  # checks a reply as it comes off the wire


@REPLIES.op
@dataclass(frozen=True)
class CellDone:
    """A cell's end: what it showed (text, images as {"mime", "data" (base64)}), what the
    model is told beside it (notes), its error, why it was interrupted ("" if it was not)."""

    text: str
    images: list[dict[str, str]]
    notes: list[str]
    error: str | None
    execution_count: int | None
    interrupted: str
    kernel_pid: int | None
    elapsed: float
    status: Literal["done"] = "done"


@REPLIES.op
@dataclass(frozen=True)
class ToolRequest:
    """A running cell's `tool()` calls, each {"name", "args"}: answer them with ToolAnswer."""

    cell: str
    calls: list[JSONObject]
    status: Literal["tool"] = "tool"


CellReply = CellDone | ToolRequest
_BY_STATUS: dict[str, type[CellDone] | type[ToolRequest]] = {"done": CellDone, "tool": ToolRequest}


def cell_payload(reply: CellReply) -> Wire:
    """A reply as the `Reply` payload: its fields, flat."""
    return op_args(reply)


def read_cell_reply(payload: Mapping[str, WireValue]) -> CellReply:
    """The `Reply` payload back as the reply its status names (OpError if it names none, or
    a field is missing or mistyped)."""
    cls = _BY_STATUS.get(str(payload.get("status")))
    if cls is None:
        raise OpError(
            f"a kernel reply's status must be one of {sorted(_BY_STATUS)}, got {payload.get('status')!r}"
        )
    reply: CellReply = REPLIES.build(cls, payload)
    return reply


# --- ops ----------------------------------------------------------------------------------
@KERNEL.op
@dataclass(frozen=True)
class ToolAnswer:
    cell: str
    results: list[JSONObject]  # one {"ok", "text", "data"} per requested call, in order


@KERNEL.op
@dataclass(frozen=True)
class Status:
    pass


POOL = Vocabulary("kernel_pool", idempotent=False)


@POOL.op
@dataclass(frozen=True)
class Take:
    """A started spare kernel: {"spare": Spare}, or {"spare": None} when none is ready."""


@POOL.op
@dataclass(frozen=True)
class PoolStatus:
    pass
