"""The shape of a tool: `ToolSpec`, its `Tier`, the `Surface`s that see it, and what it needs.

This module is the contract between the registry (which decides visibility and runs the
call pipeline) and the tool families (`lsp`, `ast_grep`, ...), which each contribute specs.
A spec is plain data plus one handler; a family never decides its own visibility.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict

from tether.json_types import JSONObject, JSONValue

if TYPE_CHECKING:  # (`import tether` needs no msgpack: a bare python imports tether.places)
    from tether.call_scope import CallScope
    from tether.messages.calls import GatherCall, Op, ResourceError, Wire, WireValue
    from tether.tools.debug_tool.kept import Kept
    from tether.tools.eval import EvalSettings
    from tether.tools.lsp_tool.notes import LspState
    from tether.tools.results import ToolResult
    from tether.tools.structural_index import StructuralState
    from tether.tools.vibe_workers import VibeWorkers


class Tier(enum.Enum):
    """SPEC.md "Approval tiers": exactly one per tool; decides which surfaces see it."""

    READ = "read"
    WRITE = "write"
    EXEC = "exec"


class Surface(enum.Enum):
    """Who is looking. PLAN and READONLY see only tier READ, and may call only tier READ."""

    DEFAULT = "default"
    PLAN = "plan"
    READONLY = "readonly"


class Needs(enum.Enum):
    """A resource a tool is registered for. A tool is on the surface only when all are connected."""

    WORKDIR = "workdir"
    CONVERSATION = "conversation"
    LANGUAGE_SERVERS = "language_servers"
    DEBUG_SESSIONS = "debug_sessions"
    PARSER = "parser"
    KERNELS = "kernels"
    QUESTION_PORT = "question_port"
    TARGET_SPACE = "target_space"
    VIBE = "vibe"


# Runtime resource kind -> the Needs it satisfies.
KIND_NEEDS: dict[str, Needs] = {
    "language_server": Needs.LANGUAGE_SERVERS,
    "parser": Needs.PARSER,
    "debug_session": Needs.DEBUG_SESSIONS,
    "kernel": Needs.KERNELS,
}


def parse_surface(value: Surface | str) -> Surface:
    """A surface given by value or name; a ValueError naming the valid ones."""
    if isinstance(value, Surface):
        return value
    try:
        return Surface(str(value).lower())
    except ValueError:
        valid = ", ".join(s.value for s in Surface)
        raise ValueError(f"unknown surface {value!r}: use one of {valid}") from None


class RunState(TypedDict, total=False):
    """A run's per-run state of the tool families, by family name (`ToolContext.state`):
    each family's own object, made by the family on first use. A plain dict at run time
    (tether.serve.run_state saves and restores parts of it)."""

    structural: StructuralState  # staged edits and their lock, the warmed languages
    lsp: LspState  # the diagnostics ledger, notes carried to the next lsp result
    debug: Kept  # the run's breakpoints, what each adapter said of itself
    eval: EvalSettings  # launcher, budgets, the languages that had a kernel
    vibe: VibeWorkers  # the run's vibe workers


class ToolContext(Protocol):
    """What a handler receives besides its (already validated) arguments.

    The registry builds one per call. Handlers reach live resources only through
    `call_resource`; they never touch thespian directly.
    """

    run_id: str
    workdir: Path
    state: RunState  # per-run state of tool families (staged edits, ledgers), by family name

    def resolve_path(self, rel: str) -> Path:
        """A workspace path, already checked by the confinement guardrail."""

    def call_resource(
        self,
        kind: str,
        key: str,
        op: Op,
        args: Mapping[str, WireValue] | None,
        timeout: float,
        deliver_cancelled: bool = False,
    ) -> Wire:
        """Ask the resource actor (kind, key) to do `op`: an op of the kind's vocabulary
        (`tether.messages.*_ops`, args None), or its name with `args`. Raises
        `ResourceError` on failure. An op its vocabulary declares idempotent is retried
        once if the actor dies under it (a bare name never is). `deliver_cancelled`: sent
        even once the call's scope was cancelled, so the actor hears the cancel right
        after it."""

    def gather(
        self,
        calls: Iterable[GatherCall],
        timeout: float,
    ) -> list[Wire | ResourceError]:
        """`call_resource` for many (kind, key, op, args) at once, concurrently (e.g. every
        parser of the pool); a failed or late call is a ResourceError in its slot."""

    def kind_keys(self, kind: str) -> list[str]:
        """The keys of the running actors of `kind` (e.g. the parser pool's slots); [] when
        no runtime is connected."""

    def relative(self, path: Path) -> str:
        """A resolved path as the model should see it: workspace-relative if inside."""

    def call_tool(self, name: str, args: Mapping[str, JSONValue]) -> ToolResult:
        """Run another tool through the full pipeline (the eval bridge uses this)."""

    @property
    def scope(self) -> CallScope:
        """The top-level call this handler serves: its id, deadline and cancel handle
        (every call_resource is clamped to its deadline and ends when it is cancelled)."""


Handler = Callable[[ToolContext, JSONObject], "ToolResult"]  # (arguments validated)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    tier: Tier
    description: str  # written for a model: what it does, when to use it, one example
    # (JSON Schema of the arguments, type: object; Mapping[str, JSONValue] once the
    # structural and vibe families annotate the sub-schemas they build apart)
    schema: Mapping[str, JSONValue]
    handler: Handler
    needs: frozenset[Needs] = field(default_factory=frozenset)
    path_args: tuple[str, ...] = ()  # argument names that hold workspace paths (guardrails)
    parallel_safe: bool = True  # SPEC: debug and eval are not safe to run in parallel
