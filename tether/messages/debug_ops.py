"""The ops of the `debug_session` resource kind (one debug session per conversation), and
the replies the DebugSessionActor answers them with.

The host resolves paths and the adapter (the intersection rule, `tether.debug.adapters`)
and sends one of these; the DebugSessionActor matches on it (`DEBUG.parse(call)`).
Paths are absolute and already confined to the workspace by the tool's guardrails.

Replies: frozen dataclasses, checked as they come off the wire (`REPLIES`). A reply crosses
as the `Reply` payload, its fields flat (`debug_payload`); the host reads it back with the
op's declared reply (`op.reply`, `read_reply`), which checks every field is there with
its type. The records inside a reply (a frame, a
variable, a breakpoint's row) are frozen dataclasses too (`RECORDS`), maps on the wire,
read back and checked field by field (`tether.messages.nested`). A breakpoint's spec and
an adapter's features stay JSON objects (TypedDicts): the host keeps them in the run's
state (`ctx.state["debug"]`), which is saved as JSON.

    Status                                    -> StatusReply
    SetBreakpoints / SetFunctionBreakpoints   -> BreakpointsReply / FunctionsReply
    SetExceptionBreakpoints                   -> ExceptionsReply
    Launch, Attach                            -> Started (an Outcome, and the breakpoints)
    Continue, Pause, StepOver/In/Out          -> Outcome: Stopped | Exited | Running
    Threads, Stack, Scopes, Variables         -> ThreadsReply, StackReply, ScopesReply,
                                                 VariablesReply
    Evaluate, Output, Terminate               -> EvaluateReply, OutputReply, TerminateReply
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal, NotRequired, TypedDict, TypeVar, cast, overload

from tether.json_types import JSONValue
from tether.messages.nested import plain, record_lists, record_or_none, records
from tether.messages.ops import OpError, Records, Vocabulary

KIND = "debug_session"
KEY = "session"  # one session per conversation: every run's session actor has this key
# every op is idempotent: a call whose session actor went away (its TTL, terminate, a crash)
# is retried once on the run's next one, which has no program of the old one to act on and
# answers with why the previous session ended
DEBUG = Vocabulary(KIND, idempotent=True)
REPLIES = Records("debug_session reply")  # checks a reply as it comes off the wire
RECORDS = Records("debug_session record")  # and the records inside one


# --- breakpoints as the agent asks for them (checked by tether.debug.breakpoints) -----------
class LineSpec(TypedDict):
    """A line breakpoint as asked; `text`: its anchor, once the session has read it."""

    line: int
    condition: str
    hit_condition: str  # ours, normalised ("900", ">= 5", "% 3"); "" for none
    log_message: str
    text: NotRequired[str]


class FunctionSpec(TypedDict):
    name: str
    condition: str
    hit_condition: str


# --- records inside replies -------------------------------------------------------------
@RECORDS.op
@dataclass(frozen=True)
class Frame:
    id: int
    name: str
    file: str  # its source's path (or name, when it has no path)
    line: int
    source: str  # the line's text, in the code the program runs


@RECORDS.op
@dataclass(frozen=True)
class Variable:
    name: str
    value: str  # capped
    type: str
    reference: int  # 0: no children


@RECORDS.op
@dataclass(frozen=True)
class Children:
    """The first children of a reference (a stop's locals: of its first cheap scope)."""

    scope: str
    reference: int
    variables: list[Variable]
    total: int


@RECORDS.op
@dataclass(frozen=True)
class ExceptionInfo:
    type: str
    message: str


@RECORDS.op
@dataclass(frozen=True)
class ThreadRow:
    id: int
    name: str


@RECORDS.op
@dataclass(frozen=True)
class ScopeRow:
    name: str
    reference: int
    expensive: bool


@RECORDS.op
@dataclass(frozen=True)
class BreakpointRow:
    """A line breakpoint as the session holds it: asked, anchored, what the adapter said."""

    line: int
    verified: bool
    actual_line: int | None
    message: str
    state: str  # "" (active) | lost | refused | stale | spent
    moved_from: int | None
    condition: str
    hit_condition: str
    log_message: str
    source: str
    changed_since_launch: bool
    spec: LineSpec


@RECORDS.op
@dataclass(frozen=True)
class FunctionRow:
    name: str
    verified: bool
    message: str
    state: str  # "" | refused | spent
    condition: str
    hit_condition: str
    spec: FunctionSpec


@RECORDS.op
@dataclass(frozen=True)
class ExceptionReport:
    asked: list[str] | None  # ours (raised / uncaught); None: the adapter's default
    default: list[str]  # the adapter's default filters
    notes: list[str]  # a kind it cannot stop on, or always does


class FeatureReport(TypedDict):
    """What an adapter does with breakpoints (`tether.debug.breakpoints.Features`)."""

    condition: bool
    hit_condition: list[str]
    log_message: bool
    function: bool
    exceptions: dict[str, str]
    source: str  # table | capabilities


@RECORDS.op
@dataclass(frozen=True)
class Restored:
    """The run's breakpoints a new session set again before it started, and why it had lost
    them (files: path -> lines; exceptions: None when they were not restored)."""

    why: str
    files: dict[str, list[int]]
    functions: list[str]
    exceptions: list[str] | None


# --- replies ----------------------------------------------------------------------------
class OutcomeReply:
    """The reply a run-control op declares: the outcome it came to, one of Stopped,
    Exited and Running (read back as the one its `outcome` field names)."""


@REPLIES.op
@dataclass(frozen=True)
class Stopped(OutcomeReply):
    """A run-control op's outcome: the program stopped (where, why, its top frames and the
    top frame's locals). `note`: what the op did instead (pause of a stopped program);
    `memory`: it stopped on a MemoryError at the session's memory ceiling."""

    reason: str
    description: str
    thread_id: int | None
    frames: list[Frame]
    total_frames: int
    breakpoint: str = ""  # the breakpoint that made the stop ("" if none of ours)
    changed_since_launch: list[str] = field(default_factory=list)
    exception: ExceptionInfo | None = None
    locals: Children | None = None
    note: str = ""
    memory: str = ""
    outcome: Literal["stopped"] = "stopped"


@REPLIES.op
@dataclass(frozen=True)
class Exited(OutcomeReply):
    exit_code: int | None
    output_tail: str
    memory: str = ""  # it ended at the session's memory ceiling
    outcome: Literal["exited"] = "exited"


@REPLIES.op
@dataclass(frozen=True)
class Running(OutcomeReply):
    """No stop and no exit within `waited` s."""

    waited: float
    output_tail: str
    outcome: Literal["running"] = "running"


Outcome = Stopped | Exited | Running
_OUTCOMES: dict[str, type[Stopped] | type[Exited] | type[Running]] = {
    "stopped": Stopped,
    "exited": Exited,
    "running": Running,
}


@REPLIES.op
@dataclass(frozen=True)
class Started:
    """Launch and attach: the first outcome, the breakpoints as the start set them, what the
    adapter said it does (`features`) and the run's breakpoints set again (`restored`).
    Flat on the wire: the outcome's fields beside these."""

    outcome: Outcome
    breakpoints: dict[str, list[BreakpointRow]]
    functions: list[FunctionRow]
    exceptions: ExceptionReport
    features: FeatureReport | None = None
    restored_breakpoints: Restored | None = None


@REPLIES.op
@dataclass(frozen=True)
class StatusReply:
    """The session's state (`stopped`: the last stop while it is stopped), its breakpoints,
    and the actor's own: its pids, TTL and uptime, and why the previous session ended."""

    state: str  # none | starting | running | stopped | exited | ended
    adapter: str
    program: str
    stopped: Stopped | None
    exit_code: int | None
    end_reason: str
    breakpoints: dict[str, list[BreakpointRow]]
    functions: list[FunctionRow]
    exceptions: ExceptionReport
    pids: list[int] = field(default_factory=list)
    ttl: float | None = None
    uptime: float = 0.0
    previous_end: str = ""


@REPLIES.op
@dataclass(frozen=True)
class BreakpointsReply:
    file: str
    breakpoints: list[BreakpointRow]
    sent: bool  # a program runs: they were sent to the adapter


@REPLIES.op
@dataclass(frozen=True)
class FunctionsReply:
    functions: list[FunctionRow]
    sent: bool


@REPLIES.op
@dataclass(frozen=True)
class ExceptionsReply:
    exceptions: ExceptionReport
    sent: bool


@REPLIES.op
@dataclass(frozen=True)
class ThreadsReply:
    threads: list[ThreadRow]


@REPLIES.op
@dataclass(frozen=True)
class StackReply:
    thread_id: int | None
    frames: list[Frame]
    total_frames: int
    cap: int  # frames shown at most


@REPLIES.op
@dataclass(frozen=True)
class ScopesReply:
    frame_id: int
    scopes: list[ScopeRow]


@REPLIES.op
@dataclass(frozen=True)
class VariablesReply:
    scope: str
    reference: int
    variables: list[Variable]
    total: int


@REPLIES.op
@dataclass(frozen=True)
class EvaluateReply:
    expression: str
    frame_id: int | None
    value: str
    type: str
    reference: int  # 0: no children


@REPLIES.op
@dataclass(frozen=True)
class OutputReply:
    output: str
    dropped: int  # characters dropped from the front
    state: str


@REPLIES.op
@dataclass(frozen=True)
class TerminateReply:
    """`detached`: an attached program was left running; `processes_left`: those still
    alive after the session killed what it started."""

    terminated: bool
    detached: bool
    output_tail: str
    processes_left: list[int] = field(default_factory=list)


# the replies a reader builds as they are (an outcome is read as the one it names)
Declared = (
    Started
    | StatusReply
    | BreakpointsReply
    | FunctionsReply
    | ExceptionsReply
    | ThreadsReply
    | StackReply
    | ScopesReply
    | VariablesReply
    | EvaluateReply
    | OutputReply
    | TerminateReply
)
DebugReply = Stopped | Exited | Running | Declared
R = TypeVar("R", bound=Declared)
T = TypeVar("T")


def debug_payload(reply: DebugReply) -> dict[str, JSONValue]:
    """A reply as the `Reply` payload: its fields flat, the records inside as maps (a
    Started's outcome beside its own fields)."""
    if isinstance(reply, Started):
        out = plain(reply)
        del out["outcome"]
        return {**plain(reply.outcome), **out}
    return plain(reply)


def _record(cls: type[T], value: object, where: str) -> T:
    got = record_or_none(RECORDS, cls, value, where)
    if got is None:
        raise OpError(f"{where} must be a map of {cls.__name__}, got None")
    return got


def _children(value: object, where: str) -> Children | None:
    """A Children record, its variables read first."""
    if not isinstance(value, Mapping):
        return record_or_none(RECORDS, Children, value, where)
    shown = records(RECORDS, Variable, value.get("variables"), f"{where}.variables")
    return _record(Children, {**value, "variables": shown}, where)


@overload
def read_reply(expect: type[OutcomeReply], payload: Mapping[str, object]) -> Outcome: ...


@overload
def read_reply(expect: type[R], payload: Mapping[str, object]) -> R: ...


def read_reply(
    expect: type[R] | type[OutcomeReply], payload: Mapping[str, object]
) -> Declared | Outcome:
    """The `Reply` payload back as `expect`, the reply its op declares (`op.reply`), the
    records inside it too (OpError if a field of either is missing or mistyped)."""
    if expect is OutcomeReply:
        return _read_outcome(payload)
    if expect is Started:
        return _read_started(payload)
    if expect is StatusReply:
        return _read_status(payload)
    args = dict(payload)
    name = f"debug {expect.__name__}"
    if expect is BreakpointsReply:
        args["breakpoints"] = records(
            RECORDS, BreakpointRow, args.get("breakpoints"), f"{name}.breakpoints"
        )
    elif expect is FunctionsReply:
        args["functions"] = records(
            RECORDS, FunctionRow, args.get("functions"), f"{name}.functions"
        )
    elif expect is ExceptionsReply:
        args["exceptions"] = _record(ExceptionReport, args.get("exceptions"), f"{name}.exceptions")
    elif expect is ThreadsReply:
        args["threads"] = records(RECORDS, ThreadRow, args.get("threads"), f"{name}.threads")
    elif expect is StackReply:
        args["frames"] = records(RECORDS, Frame, args.get("frames"), f"{name}.frames")
    elif expect is ScopesReply:
        args["scopes"] = records(RECORDS, ScopeRow, args.get("scopes"), f"{name}.scopes")
    elif expect is VariablesReply:
        args["variables"] = records(RECORDS, Variable, args.get("variables"), f"{name}.variables")
    return REPLIES.build(cast("type[R]", expect), args)  # (not OutcomeReply: read above)


def _read_outcome(payload: Mapping[str, object]) -> Outcome:
    """A run-control op's payload back as the outcome its `outcome` names."""
    cls = _OUTCOMES.get(str(payload.get("outcome")))
    if cls is None:
        raise OpError(
            f"a debug outcome must be one of {sorted(_OUTCOMES)}, got {payload.get('outcome')!r}"
        )
    args = dict(payload)
    if cls is Stopped:
        args["frames"] = records(RECORDS, Frame, args.get("frames"), "debug Stopped.frames")
        args["exception"] = record_or_none(
            RECORDS, ExceptionInfo, args.get("exception"), "debug Stopped.exception"
        )
        args["locals"] = _children(args.get("locals"), "debug Stopped.locals")
    outcome: Outcome = REPLIES.build(cls, args)
    return outcome


def _breakpoint_fields(args: dict[str, object], name: str) -> None:
    """The line and function breakpoint rows and the exception report, read in place."""
    args["breakpoints"] = record_lists(
        RECORDS, BreakpointRow, args.get("breakpoints"), f"{name}.breakpoints"
    )
    args["functions"] = records(RECORDS, FunctionRow, args.get("functions"), f"{name}.functions")
    args["exceptions"] = _record(ExceptionReport, args.get("exceptions"), f"{name}.exceptions")


def _read_started(payload: Mapping[str, object]) -> Started:
    """A launch's or attach's payload back as Started (the outcome's fields beside its own)."""
    own = {f.name for f in dataclasses.fields(Started)} - {"outcome"}
    args = {k: v for k, v in payload.items() if k in own}
    _breakpoint_fields(args, "debug Started")
    args["restored_breakpoints"] = record_or_none(
        RECORDS, Restored, args.get("restored_breakpoints"), "debug Started.restored_breakpoints"
    )
    args["outcome"] = _read_outcome({k: v for k, v in payload.items() if k not in own})
    started: Started = REPLIES.build(Started, args)
    return started


def _read_status(payload: Mapping[str, object]) -> StatusReply:
    """A status payload back as StatusReply (its last stop read as an outcome)."""
    args = dict(payload)
    stopped = args.get("stopped")
    last = _read_outcome(stopped) if isinstance(stopped, Mapping) and stopped else None
    if last is not None and not isinstance(last, Stopped):
        raise OpError(f"a debug status's stopped must be a stop, got {last.outcome!r}")
    args["stopped"] = last
    _breakpoint_fields(args, "debug StatusReply")
    status: StatusReply = REPLIES.build(StatusReply, args)
    return status


# --- ops ----------------------------------------------------------------------------------
@DEBUG.op
@dataclass(frozen=True)
class Status:
    reply: ClassVar[type[StatusReply]] = StatusReply


@DEBUG.op
@dataclass(frozen=True)
class SetBreakpoints:
    """A file's line breakpoints, replacing its others (none: cleared). Each is a spec of
    `tether.debug.breakpoints.line_specs` (line, condition, hit_condition, log_message, and
    text: its anchor, when the host sets it again)."""

    op_name = "breakpoints"
    file: str
    breakpoints: list[LineSpec] = field(default_factory=list)
    reply: ClassVar[type[BreakpointsReply]] = BreakpointsReply


@DEBUG.op
@dataclass(frozen=True)
class SetFunctionBreakpoints:
    """The function breakpoints (name, condition, hit_condition), replacing the others."""

    op_name = "function_breakpoints"
    functions: list[FunctionSpec] = field(default_factory=list)
    reply: ClassVar[type[FunctionsReply]] = FunctionsReply


@DEBUG.op
@dataclass(frozen=True)
class SetExceptionBreakpoints:
    """Stop on these exceptions (raised / uncaught; none: on no exception at all)."""

    op_name = "exception_breakpoints"
    exceptions: list[str] = field(default_factory=list)
    reply: ClassVar[type[ExceptionsReply]] = ExceptionsReply


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
    breakpoints: dict[str, list[LineSpec]] = field(default_factory=dict)
    functions: list[FunctionSpec] = field(default_factory=list)
    exceptions: list[str] | None = None
    place: dict[str, JSONValue] | None = None  # the run's place (tether.places wire); None: host
    reply: ClassVar[type[Started]] = Started


@DEBUG.op
@dataclass(frozen=True)
class Attach:
    adapter: str
    root: str
    port: int | None = None
    pid: int | None = None
    wait: float = 2.0
    breakpoints: dict[str, list[LineSpec]] = field(default_factory=dict)  # as for Launch
    functions: list[FunctionSpec] = field(default_factory=list)
    exceptions: list[str] | None = None
    place: dict[str, JSONValue] | None = None  # as for Launch
    reply: ClassVar[type[Started]] = Started


@DEBUG.op
@dataclass(frozen=True)
class Continue:
    thread_id: int | None = None
    wait: float = 10.0
    reply: ClassVar[type[OutcomeReply]] = OutcomeReply


@DEBUG.op
@dataclass(frozen=True)
class Pause:
    thread_id: int | None = None
    wait: float = 5.0
    reply: ClassVar[type[OutcomeReply]] = OutcomeReply


@DEBUG.op
@dataclass(frozen=True)
class StepOver:
    thread_id: int | None = None
    wait: float = 10.0
    reply: ClassVar[type[OutcomeReply]] = OutcomeReply


@DEBUG.op
@dataclass(frozen=True)
class StepIn:
    thread_id: int | None = None
    wait: float = 10.0
    reply: ClassVar[type[OutcomeReply]] = OutcomeReply


@DEBUG.op
@dataclass(frozen=True)
class StepOut:
    thread_id: int | None = None
    wait: float = 10.0
    reply: ClassVar[type[OutcomeReply]] = OutcomeReply


@DEBUG.op
@dataclass(frozen=True)
class Threads:
    reply: ClassVar[type[ThreadsReply]] = ThreadsReply


@DEBUG.op
@dataclass(frozen=True)
class Stack:
    thread_id: int | None = None
    reply: ClassVar[type[StackReply]] = StackReply


@DEBUG.op
@dataclass(frozen=True)
class Scopes:
    frame_id: int
    reply: ClassVar[type[ScopesReply]] = ScopesReply


@DEBUG.op
@dataclass(frozen=True)
class Variables:
    reference: int
    reply: ClassVar[type[VariablesReply]] = VariablesReply


@DEBUG.op
@dataclass(frozen=True)
class Evaluate:
    expression: str
    frame_id: int | None = None
    reply: ClassVar[type[EvaluateReply]] = EvaluateReply


@DEBUG.op
@dataclass(frozen=True)
class Output:
    reply: ClassVar[type[OutputReply]] = OutputReply


@DEBUG.op
@dataclass(frozen=True)
class Terminate:
    reply: ClassVar[type[TerminateReply]] = TerminateReply


DebugOp = (
    Status
    | SetBreakpoints
    | SetFunctionBreakpoints
    | SetExceptionBreakpoints
    | Launch
    | Attach
    | Continue
    | Pause
    | StepOver
    | StepIn
    | StepOut
    | Threads
    | Stack
    | Scopes
    | Variables
    | Evaluate
    | Output
    | Terminate
)
