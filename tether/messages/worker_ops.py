"""What the host may ask of a vibe worker actor (kind "vibe_worker"), and the line protocol a
worker process speaks on its stdout.

The host sends op instances (`engine.call(run_id, "vibe_worker", worker_id, Spawn(...))`);
the actor dispatches with `match WORKER.parse(call)`.

Worker processes print plain text (their progress, shown while they run) and, to ask the
parent for permission, one line `@tether {"permission": {"id": 1, "tool": "write",
"tier": "write", "arguments": {...}}}`. The answer arrives on the worker's stdin as one
JSON line `{"permission": 1, "allow": true|false, "reason": "..."}` (brief mode "arg"
only: in mode "stdin" the brief is followed by end of input, so a prompt is denied and
the denial is shown in the worker's output).

A worker whose backend counts its own tool calls and tokens reports them, cumulative for
the run, with a line `@tether {"usage": {"tool_calls": 12, "tokens": 34000}}` (either key
may be left out): that is what its `tool_calls` and `tokens` caps are checked against.

Each op declares its reply (`op.reply`): the worker's snapshot (`WorkerSnapshot`), or the
snapshot and what the op did (`SendReply`, `PermitReply`, `KillReply`), or `PrepareReply`.
A reply crosses flat as the `Reply` payload (`tether.messages.nested.plain`: the keys it
had before it was typed), the records in it (its prompts, its view, the cap that stopped
it) as maps; the host reads it back with `read_reply`, every field checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import ClassVar, Literal, TypedDict, TypeVar

from tether.json_types import JSONObject, JSONValue
from tether.messages.nested import record_or_none, records
from tether.messages.ops import Records, Vocabulary

WORKER = Vocabulary("vibe_worker", idempotent=False)
REPLIES = Records("vibe_worker reply")  # checks a reply as it comes off the wire
RECORDS = Records("vibe_worker record")  # and the records inside one

PROTOCOL_PREFIX = "@tether "
BRIEF_MODES = ("arg", "stdin")
CAP_NAMES = ("seconds", "output_chars", "tool_calls", "tokens")  # see tether.tools.vibe_config.Caps
# new: spawned, not started yet; running and waiting (for a permission): a live process
WorkerStatus = Literal["new", "running", "waiting", "done", "failed", "killed", "capped"]


# --- records and replies ------------------------------------------------------------------
@RECORDS.op
@dataclass(frozen=True)
class View:
    """One worker's view of the workspace (made by `tether.worker_views`, which re-exports
    it). Plain data: it travels in the worker's snapshot."""

    kind: str  # "overlay" | "copy"
    workspace: str
    base: str  # the view's own directory (everything below is removed with it)
    root: str  # where the worker works: the workspace's path (overlay) or the copy
    upper: str  # overlay: the upper layer ("" for a copy)
    made: str  # a file whose ctime is when the view was made
    copied: str  # copy: a file whose ctime is when the copy was done ("" for an overlay)
    userns: bool = False  # overlay: mounted in a user namespace (unprivileged)

    def to_dict(self) -> dict[str, str | bool]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> View:
        """A view from its map (checked: OpError if a field is missing or mistyped)."""
        view: View = RECORDS.build(cls, data)
        return view


@RECORDS.op
@dataclass(frozen=True)
class Prompt:
    """A permission prompt the worker printed, pending: `seq` numbers it for the host, `id`
    is the worker's own (echoed in the answer), `arguments` the tool's (foreign JSON)."""

    seq: int
    id: JSONValue
    tool: str
    tier: str
    arguments: JSONObject


@RECORDS.op
@dataclass(frozen=True)
class Capped:
    """The cap that stopped a run: its name (CAP_NAMES), limit, and what was used."""

    cap: str
    limit: float
    used: float


class SnapshotFields(TypedDict):
    """A WorkerSnapshot's fields by name: what a reply that extends it is built from."""

    worker_id: str
    label: str
    tier: str
    status: WorkerStatus
    run: int
    elapsed: float
    output: str
    output_chars: int
    result: str
    exit_code: int | None
    error: str
    prompts: list[Prompt]
    pid: int | None
    view: View | None
    view_unchanged: bool
    caps: dict[str, float]
    usage: dict[str, int]
    capped: Capped | None


@REPLIES.op
@dataclass(frozen=True)
class WorkerSnapshot:
    """What the host sees of a worker: its status and run number, the run's elapsed time,
    output so far and result (tails), exit code and error, pending prompts, pid while it
    runs, its view (None: none, or removed - `view_unchanged`: because it changed nothing),
    its caps, what it used (output_chars, and tool_calls/tokens as it reported them) and
    the cap that stopped it."""

    worker_id: str
    label: str
    tier: str
    status: WorkerStatus
    run: int
    elapsed: float
    output: str
    output_chars: int
    result: str
    exit_code: int | None
    error: str
    prompts: list[Prompt]
    pid: int | None
    view: View | None
    view_unchanged: bool
    caps: dict[str, float]
    usage: dict[str, int]
    capped: Capped | None

    @classmethod
    def new(cls, worker_id: str, label: str, tier: str) -> WorkerSnapshot:
        """A worker the host asked for, before its actor answered."""
        return cls(
            worker_id, label, tier, "new", 0, 0.0, "", 0, "", None, "", [], None, None, False,
            {}, {}, None,
        )  # fmt: skip

    def sent(self, stopped_previous: bool) -> SendReply:
        return SendReply(**self._fields(), stopped_previous=stopped_previous)

    def permitted(self, delivered: bool) -> PermitReply:
        return PermitReply(**self._fields(), delivered=delivered)

    def killed(self, was: WorkerStatus) -> KillReply:
        return KillReply(**self._fields(), was=was)

    def _fields(self) -> SnapshotFields:  # (the snapshot's own: a reply class adds its one)
        return SnapshotFields(
            worker_id=self.worker_id,
            label=self.label,
            tier=self.tier,
            status=self.status,
            run=self.run,
            elapsed=self.elapsed,
            output=self.output,
            output_chars=self.output_chars,
            result=self.result,
            exit_code=self.exit_code,
            error=self.error,
            prompts=self.prompts,
            pid=self.pid,
            view=self.view,
            view_unchanged=self.view_unchanged,
            caps=self.caps,
            usage=self.usage,
            capped=self.capped,
        )


@REPLIES.op
@dataclass(frozen=True)
class SendReply(WorkerSnapshot):
    stopped_previous: bool  # a live run was stopped for the new one (its run: the next)


@REPLIES.op
@dataclass(frozen=True)
class PermitReply(WorkerSnapshot):
    delivered: bool  # False: no such prompt was pending (answered, or its run ended)


@REPLIES.op
@dataclass(frozen=True)
class KillReply(WorkerSnapshot):
    was: WorkerStatus  # "running" when this kill stopped it


@REPLIES.op
@dataclass(frozen=True)
class PrepareReply:
    prepared: bool
    spawned: bool  # the actor runs a worker already


WorkerReply = WorkerSnapshot | PrepareReply
R = TypeVar("R", bound=WorkerReply)


def read_reply(expect: type[R], payload: Mapping[str, object]) -> R:
    """The `Reply` payload back as `expect`, the records inside it too (OpError if a field
    of either is missing or mistyped)."""
    args = dict(payload)
    if issubclass(expect, WorkerSnapshot):
        name = f"vibe_worker {expect.__name__}"
        args["prompts"] = records(RECORDS, Prompt, args.get("prompts"), f"{name}.prompts")
        args["view"] = record_or_none(RECORDS, View, args.get("view"), f"{name}.view")
        args["capped"] = record_or_none(RECORDS, Capped, args.get("capped"), f"{name}.capped")
    reply: R = REPLIES.build(expect, args)
    return reply


# --- ops ----------------------------------------------------------------------------------


@WORKER.op
@dataclass(frozen=True)
class Spawn:
    """Start the worker process: `argv` (+ the brief as last argument in mode "arg")."""

    worker_id: str
    label: str
    tier: str
    brief: str
    argv: list[str]
    brief_mode: str = "arg"
    cwd: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    reap_after: float = 600.0  # s a finished worker is kept for list/wait, then reaped
    view: str = ""  # worker_views.KINDS: its runs work on its own view of cwd ("": none)
    caps: dict[str, float] = field(default_factory=dict)  # CAP_NAMES -> limit, per run
    place: JSONObject | None = None  # the run's place (tether.places wire); None: host
    reply: ClassVar[type[WorkerSnapshot]] = WorkerSnapshot


@WORKER.op
@dataclass(frozen=True)
class Prepare:
    """Start the actor ahead of its Spawn (the host keeps the next worker's actor warm, so
    vibe_spawn does not wait for an actor process to be made)."""

    reply: ClassVar[type[PrepareReply]] = PrepareReply


@WORKER.op
@dataclass(frozen=True)
class Send:
    """Append `message` to the brief and run again (a running process is stopped first)."""

    message: str
    reply: ClassVar[type[SendReply]] = SendReply


@WORKER.op
@dataclass(frozen=True)
class Status:
    """The worker's snapshot: status, elapsed, output so far, result, pending prompt."""

    reply: ClassVar[type[WorkerSnapshot]] = WorkerSnapshot


@WORKER.op
@dataclass(frozen=True)
class Wait:
    """Answered when the current run ends, or after `seconds` (the snapshot either way)."""

    seconds: float
    reply: ClassVar[type[WorkerSnapshot]] = WorkerSnapshot


@WORKER.op
@dataclass(frozen=True)
class Poll:
    """Answered as soon as a prompt newer than `since` is pending or the worker is done,
    else after `seconds`: how the host hears of permission prompts without busy polling."""

    since: int
    seconds: float
    reply: ClassVar[type[WorkerSnapshot]] = WorkerSnapshot


@WORKER.op
@dataclass(frozen=True)
class Permit:
    """The parent's answer to permission prompt `prompt` (written to the worker's stdin)."""

    prompt: int
    allow: bool
    reason: str = ""
    reply: ClassVar[type[PermitReply]] = PermitReply


@WORKER.op
@dataclass(frozen=True)
class Kill:
    """SIGKILL the worker's process tree; answered once the process is gone. Repeatable."""

    reply: ClassVar[type[KillReply]] = KillReply


@WORKER.op
@dataclass(frozen=True)
class EndView:
    """The worker's change was resolved (or is no longer wanted): remove its view. The next
    run, if any, gets a new view of the workspace as it is then. Not while a run is live."""

    reply: ClassVar[type[WorkerSnapshot]] = WorkerSnapshot
