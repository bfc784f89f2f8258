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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tether.messages.ops import Vocabulary

WORKER = Vocabulary("vibe_worker")

PROTOCOL_PREFIX = "@tether "
BRIEF_MODES = ("arg", "stdin")
CAP_NAMES = ("seconds", "output_chars", "tool_calls", "tokens")  # see tether.tools.vibe_config.Caps


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
    place: dict[str, Any] | None = None  # the run's place (tether.places wire); None: host


@WORKER.op
@dataclass(frozen=True)
class Prepare:
    """Start the actor ahead of its Spawn (the host keeps the next worker's actor warm, so
    vibe_spawn does not wait for an actor process to be made)."""


@WORKER.op
@dataclass(frozen=True)
class Send:
    """Append `message` to the brief and run again (a running process is stopped first)."""

    message: str


@WORKER.op
@dataclass(frozen=True)
class Status:
    """The worker's snapshot: status, elapsed, output so far, result, pending prompt."""


@WORKER.op
@dataclass(frozen=True)
class Wait:
    """Answered when the current run ends, or after `seconds` (the snapshot either way)."""

    seconds: float


@WORKER.op
@dataclass(frozen=True)
class Poll:
    """Answered as soon as a prompt newer than `since` is pending or the worker is done,
    else after `seconds`: how the host hears of permission prompts without busy polling."""

    since: int
    seconds: float


@WORKER.op
@dataclass(frozen=True)
class Permit:
    """The parent's answer to permission prompt `prompt` (written to the worker's stdin)."""

    prompt: int
    allow: bool
    reason: str = ""


@WORKER.op
@dataclass(frozen=True)
class Kill:
    """SIGKILL the worker's process tree; answered once the process is gone. Repeatable."""


@WORKER.op
@dataclass(frozen=True)
class EndView:
    """The worker's change was resolved (or is no longer wanted): remove its view. The next
    run, if any, gets a new view of the workspace as it is then. Not while a run is live."""
