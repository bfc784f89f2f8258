"""The ops of the `debug_session` resource kind (one debug session per conversation).

The host resolves paths and the adapter (the intersection rule, `tether.debug.adapters`)
and sends one of these; the DebugSessionActor matches on it (`DEBUG.parse(call)`).
Paths are absolute and already confined to the workspace by the tool's guardrails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    op_name = "breakpoints"
    file: str
    lines: list[int] = field(default_factory=list)


@DEBUG.op
@dataclass(frozen=True)
class Launch:
    adapter: str  # a row of tether.debug.adapters
    program: str
    root: str  # the directory holding the adapter's root marker: the program's cwd
    args: list[str] = field(default_factory=list)
    wait: float = 10.0  # s to wait for a stop or the exit before "still running"
    # the run's breakpoints, kept by the host (file -> lines): a session that lost some (a
    # new incarnation) sets them before it starts the program, and says so
    breakpoints: dict[str, list[int]] = field(default_factory=dict)


@DEBUG.op
@dataclass(frozen=True)
class Attach:
    adapter: str
    root: str
    port: int | None = None
    pid: int | None = None
    wait: float = 2.0
    breakpoints: dict[str, list[int]] = field(default_factory=dict)  # as for Launch


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
