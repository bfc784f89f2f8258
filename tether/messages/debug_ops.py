"""The ops of the `debug_session` resource kind (one debug session per conversation).

The host resolves paths and the adapter (the intersection rule, `tether.debug.adapters`)
and sends one of these; the DebugSessionActor matches on it (`DEBUG.parse(call)`).
Paths are absolute and already confined to the workspace by the tool's guardrails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tether.messages.ops import Vocabulary

KIND = "debug_session"
KEY = "session"  # one session per conversation: every run's session actor has this key
DEBUG = Vocabulary(KIND)


@DEBUG.op
@dataclass(frozen=True)
class Status:
    pass


@DEBUG.op
@dataclass(frozen=True)
class SetBreakpoints:
    """A file's line breakpoints, replacing its others (none: cleared). Each is a spec of
    `tether.debug.breakpoints.line_specs` (line, condition, hit_condition, log_message, and
    text: its anchor, when the host sets it again)."""

    op_name = "breakpoints"
    file: str
    breakpoints: list[dict[str, Any]] = field(default_factory=list)


@DEBUG.op
@dataclass(frozen=True)
class SetFunctionBreakpoints:
    """The function breakpoints (name, condition, hit_condition), replacing the others."""

    op_name = "function_breakpoints"
    functions: list[dict[str, Any]] = field(default_factory=list)


@DEBUG.op
@dataclass(frozen=True)
class SetExceptionBreakpoints:
    """Stop on these exceptions (raised / uncaught; none: on no exception at all)."""

    op_name = "exception_breakpoints"
    exceptions: list[str] = field(default_factory=list)


@DEBUG.op
@dataclass(frozen=True)
class Launch:
    adapter: str  # a row of tether.debug.adapters
    program: str
    root: str  # the directory holding the adapter's root marker: the program's cwd
    args: list[str] = field(default_factory=list)
    wait: float = 10.0  # s to wait for a stop or the exit before "still running"
    # the run's breakpoints, kept by the host (file -> specs as for SetBreakpoints): a
    # session that lost some (a new incarnation) sets them before it starts the program,
    # and says so; so for function breakpoints and exceptions (None: never set)
    breakpoints: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    functions: list[dict[str, Any]] = field(default_factory=list)
    exceptions: list[str] | None = None
    place: dict[str, Any] | None = None  # the run's place (tether.places wire); None: host


@DEBUG.op
@dataclass(frozen=True)
class Attach:
    adapter: str
    root: str
    port: int | None = None
    pid: int | None = None
    wait: float = 2.0
    breakpoints: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # as for Launch
    functions: list[dict[str, Any]] = field(default_factory=list)
    exceptions: list[str] | None = None
    place: dict[str, Any] | None = None  # as for Launch


@DEBUG.op
@dataclass(frozen=True)
class Continue:
    thread_id: int | None = None
    wait: float = 10.0


@DEBUG.op
@dataclass(frozen=True)
class Pause:
    thread_id: int | None = None
    wait: float = 5.0


@DEBUG.op
@dataclass(frozen=True)
class StepOver:
    thread_id: int | None = None
    wait: float = 10.0


@DEBUG.op
@dataclass(frozen=True)
class StepIn:
    thread_id: int | None = None
    wait: float = 10.0


@DEBUG.op
@dataclass(frozen=True)
class StepOut:
    thread_id: int | None = None
    wait: float = 10.0


@DEBUG.op
@dataclass(frozen=True)
class Threads:
    pass


@DEBUG.op
@dataclass(frozen=True)
class Stack:
    thread_id: int | None = None


@DEBUG.op
@dataclass(frozen=True)
class Scopes:
    frame_id: int


@DEBUG.op
@dataclass(frozen=True)
class Variables:
    reference: int


@DEBUG.op
@dataclass(frozen=True)
class Evaluate:
    expression: str
    frame_id: int | None = None


@DEBUG.op
@dataclass(frozen=True)
class Output:
    pass


@DEBUG.op
@dataclass(frozen=True)
class Terminate:
    pass
