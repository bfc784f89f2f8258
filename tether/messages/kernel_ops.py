"""The ops of the "kernel" kind (one actor per run and language): run a cell, answer it.

A cell that calls `tool()` makes the actor answer `Execute` early with
`{"status": "tool", "cell": ..., "calls": [...]}`; the host runs the calls through the
run's own pipeline and sends `ToolAnswer`, which the actor answers the same way again (the
next tool request, or the cell's end). So the actor never imports the host, and the call
it holds open is always the host's latest one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tether.messages.ops import Vocabulary

KERNEL = Vocabulary("kernel")

DEFAULT_INACTIVITY = 300.0  # s without output (and without a pending bridged call)
DEFAULT_WALL = 3600.0  # s a cell may run at most, whatever it does


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
    spare: dict[str, Any] | None = None  # a started kernel handed over by the spare pool
    place: dict[str, Any] | None = None  # the run's place (tether.places wire form); None: host


@KERNEL.op
@dataclass(frozen=True)
class ToolAnswer:
    cell: str
    results: list[dict[str, Any]]  # one {"ok", "text", "data"} per requested call, in order


@KERNEL.op
@dataclass(frozen=True)
class Status:
    pass


POOL = Vocabulary("kernel_pool")


@POOL.op
@dataclass(frozen=True)
class Take:
    """A started spare kernel (its pid, connection, nonce), or {"spare": None}."""


@POOL.op
@dataclass(frozen=True)
class PoolStatus:
    pass
