"""eval: Python or JavaScript cells in a persistent kernel of the run (SPEC.md "eval").

The handler validates the description, rewrites IPython idioms (`tether.kernels.magics`,
a bad magic is an error before anything runs), and sends the cell to the run's "kernel"
actor for its language (`tether.actors.kernel`). On a conversation's first cell it first
takes a started spare from the "kernel_pool", so that cell pays no kernel start.

The tool bridge, host side: while a cell runs, a `tool(name, args)` in it comes back as an
early answer `{"status": "tool", "calls": [...]}`. The handler runs each call with
`ctx.call_tool`, i.e. through this run's own pipeline (tier by surface, guardrails,
approvals, wrappers), and sends the results back (`ToolAnswer`), then waits for the next
early answer or the cell's end. A batch from `tools([...])` runs concurrently, except tools
that are not parallel-safe (eval, debug), which run one after the other on this thread.
The actor holds no open call while a bridged call runs, so its inactivity budget is
suspended, and nothing on the actor side knows the host.

Per-run settings (`configure(run, ...)`): the launcher (a command prefix that enters the
conversation's isolated environment; default none, the host) and the budgets.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Final, Protocol

from tether.json_types import JSONObject, JSONValue
from tether.kernels.layer import project_interpreter
from tether.kernels.magics import MagicError, rewrite
from tether.messages.calls import ErrorCode, ResourceError
from tether.messages.kernel_ops import (
    DEFAULT_INACTIVITY,
    DEFAULT_WALL,
    CellDone,
    Execute,
    Spare,
    ToolAnswer,
    ToolRequest,
    read_cell_reply,
)
from tether.messages.ops import op_args, op_name
from tether.tools.results import Image, ToolResult
from tether.tools.spec import Needs, RunState, Tier, ToolContext, ToolSpec

FAMILY: Final = "eval"
KIND = "kernel"
POOL_KIND = "kernel_pool"
LANGUAGES = ("python", "javascript")
REPLY_SLACK = 60.0  # s the host waits beyond a cell's wall cap (interrupt, kill, answer)
TAKE_TIMEOUT = 5.0  # s to get a spare from the pool (its actor may be starting)
SERIAL_TOOLS = frozenset({"eval", "debug"})  # not parallel-safe (SPEC): never concurrent
GOOD_DESCRIPTION = "Load the sales CSV and summarise monthly revenue"


@dataclass
class EvalSettings:
    """One run's eval settings and what it already has (ctx.state["eval"])."""

    launcher: list[str] = field(default_factory=list)
    inactivity: float = DEFAULT_INACTIVITY
    wall: float = DEFAULT_WALL
    use_spares: bool = True
    kernels: set[str] = field(default_factory=set)  # languages that have had a kernel


class EvalRun(Protocol):
    """What `configure` and `prepare` need of a run (tether.run.Run)."""

    state: RunState  # (ToolContext.state)

    def context(self) -> ToolContext: ...


class PoolCaller(Protocol):
    """What `warm_spares` needs of the runtime (tether.runtime.Runtime): one call."""

    def call(
        self, run_id: str, kind: str, key: str, op: str, args: JSONObject, timeout: float
    ) -> object: ...  # (the answer is not read)


def configure(
    run: EvalRun,
    launcher: Sequence[str] = (),
    inactivity: float = DEFAULT_INACTIVITY,
    wall: float = DEFAULT_WALL,
    use_spares: bool = True,
) -> None:
    """Set a run's eval launcher and budgets (call before its first eval)."""
    if inactivity <= 0 or wall <= 0:
        raise ValueError("eval budgets must be positive numbers of seconds")
    settings = _settings(run.state)
    settings.launcher = [str(part) for part in launcher]
    settings.inactivity, settings.wall = float(inactivity), float(wall)
    settings.use_spares = bool(use_spares)


def _settings(state: RunState) -> EvalSettings:
    settings = state.get(FAMILY)
    if not isinstance(settings, EvalSettings):
        settings = state[FAMILY] = EvalSettings()
    return settings


def check_description(description: str) -> str | None:
    words = description.split()
    if 5 <= len(words) <= 10:
        return None
    return (
        f"eval: description must be 5-10 words saying what the cell does (it labels the cell "
        f"in the transcript); got {len(words)}: {description!r}. A good one: "
        f"{GOOD_DESCRIPTION!r}"
    )


def _eval(ctx: ToolContext, args: JSONObject) -> ToolResult:
    # (validated: strings, the language one of the enum's)
    language, code = str(args.get("language", "python")), str(args["code"])
    problem = check_description(str(args["description"]))
    if problem:
        return ToolResult.error(problem)
    try:
        rewritten = rewrite(language, code)
    except MagicError as exc:
        return ToolResult.error(f"eval: {exc.message}")
    settings = _settings(ctx.state)
    reset = bool(args.get("reset", False))
    spare = None
    first = language not in settings.kernels
    place = getattr(ctx, "place", None)  # (tether.places.Place; a spare runs on the host)
    placed = place is not None and place.kind != "host"
    # a spare runs on a layer over the runtime's Python: not for a project with its own
    own_python = bool(project_interpreter(str(ctx.workdir)))
    spares = settings.use_spares and not settings.launcher and not placed and not own_python
    if spares and (first or reset):
        spare = _take_spare(ctx, language, create_actor=first)
    op = Execute(
        code=rewritten.code,
        source=code if rewritten.code != code else "",
        reset=reset,
        inactivity=settings.inactivity,
        wall=settings.wall,
        launcher=settings.launcher,
        cwd=str(ctx.workdir) if str(ctx.workdir) != "/dev/null" else "",
        spare=spare,
        place=place.to_wire() if placed and place is not None else None,
    )
    timeout = settings.wall + REPLY_SLACK
    reply = read_cell_reply(ctx.call_resource(KIND, language, op_name(op), op_args(op), timeout))
    settings.kernels.add(language)
    while isinstance(reply, ToolRequest):
        answer = ToolAnswer(reply.cell, run_bridged(ctx, reply.calls))
        # (cancelled meanwhile - a withdrawn ask_user, say: the cell still gets its answers,
        # and the cancel that follows them interrupts it instead of leaving it waiting)
        reply = read_cell_reply(
            ctx.call_resource(
                KIND, language, op_name(answer), op_args(answer), timeout, deliver_cancelled=True
            )
        )
    return render(language, reply, list(rewritten.notes))


def _take_spare(ctx: ToolContext, language: str, create_actor: bool = False) -> Spare | None:
    """A started kernel from the pool, or None. create_actor (the run's first cell in this
    language): the run's kernel actor is created meanwhile (a process start), not after."""
    calls: list[tuple[str, str, str, JSONObject]] = [(POOL_KIND, language, "take", {})]
    if create_actor:
        calls.append((KIND, language, "status", {}))
    got = ctx.gather(calls, TAKE_TIMEOUT)[0]
    if isinstance(got, ResourceError):
        return None  # no pool (or it cannot start): the kernel actor starts its own
    spare = got.get("spare")
    return spare if isinstance(spare, Spare) else None


def run_bridged(ctx: ToolContext, calls: Sequence[Mapping[str, JSONValue]]) -> list[JSONObject]:
    """Run a cell's tool() calls through the run's pipeline; one result per call."""

    def one(call: Mapping[str, JSONValue]) -> JSONObject:
        args = call.get("args")  # (the bridge made it an object: tether.kernels.bridge)
        result = ctx.call_tool(str(call["name"]), dict(args) if isinstance(args, dict) else {})
        return {"ok": not result.is_error, "text": result.text, "data": result.data}

    if len(calls) == 1 or any(c["name"] in SERIAL_TOOLS for c in calls):
        return [one(call) for call in calls]
    with ThreadPoolExecutor(max_workers=min(8, len(calls))) as pool:
        return list(pool.map(one, calls))


def render(language: str, done: CellDone, notes: list[str]) -> ToolResult:
    """The model-facing result of a finished cell."""
    notes = [*notes, *done.notes]
    parts = [done.text]
    error = done.error
    if error:
        parts.append(error)
    parts.extend(f"[note] {note}" for note in notes)
    text = "\n".join(p.rstrip("\n") for p in parts if p).strip("\n")
    images = tuple(
        Image(base64.b64decode(i["data"]), i.get("mime", "image/png")) for i in done.images
    )
    data = {
        "language": language,
        "execution_count": done.execution_count,
        "error": error,
        "interrupted": done.interrupted,
        "notes": notes,
        "elapsed": done.elapsed,
    }
    failed = bool(error) or bool(done.interrupted)
    if failed:
        return ToolResult(text=text or "(no output)", is_error=True, data=data, images=images)
    return ToolResult.ok(text, data=data, images=images)


_DESCRIPTION = (
    "Run a Python (default) or JavaScript cell in this conversation's persistent "
    "interpreter: variables, imports and loaded data stay between calls, as in a notebook. "
    "The last expression is echoed; display(), pandas tables and matplotlib figures (as "
    "images) work; %pip, %cd, !cmd, %%bash and %%timeit are rewritten into plain code. "
    'Inside a cell, tool("read", {"path": "a.py"}) (JavaScript: await tool(...)) calls '
    "your own tools, with the same approvals; tools([(name, args), ...]) runs several at "
    "once. A cell printing nothing for 5 minutes is interrupted. Not for parallel use. "
    'Example: eval {"code": "import pandas as pd\\ndf = pd.read_csv(\'sales.csv\')\\n'
    'df.describe()", "description": "Load the sales CSV and summarise it"}'
)


def specs() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="eval",
            tier=Tier.EXEC,
            description=_DESCRIPTION,
            schema={
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "the cell"},
                    "description": {
                        "type": "string",
                        "description": "5-10 words: what the cell does (the transcript label)",
                    },
                    "language": {
                        "type": "string",
                        "enum": list(LANGUAGES),
                        "description": "python (default) or javascript",
                    },
                    "reset": {
                        "type": "boolean",
                        "description": "throw the interpreter away and start a clean one first",
                    },
                },
                "required": ["code", "description"],
                "additionalProperties": False,
            },
            handler=_eval,
            needs=frozenset({Needs.KERNELS, Needs.CONVERSATION}),
            parallel_safe=False,
        )
    ]


__all__ = ["configure", "specs", "render", "run_bridged", "ErrorCode"]


def warm_spares(runtime: PoolCaller, languages: Sequence[str] = ("python",)) -> None:
    """Start the spare pools now (they start on first use otherwise), so that even the
    first conversation's first cell finds a started kernel."""
    for language in languages:
        runtime.call("", POOL_KIND, language, "pool_status", {}, TAKE_TIMEOUT)


def prepare(
    run: EvalRun, languages: Sequence[str] = ("python",), start_kernels: bool = False
) -> None:
    """Create the run's kernel actors now, without kernels (a few MiB each), so that the
    first cell pays neither an actor start nor, with a spare in the pool, a kernel start.
    For hosts that open a conversation some time before its first eval. start_kernels:
    start the kernels too (blocks until they run; a sandboxed run has no spares, so this
    is how its first cell finds a started kernel), counted against capacity like any."""
    for language in languages:
        run.context().call_resource(KIND, language, "status", {}, TAKE_TIMEOUT)
        if start_kernels:
            ctx = run.context()
            _eval(
                ctx,
                {
                    "code": "pass",
                    "description": "start the kernel ahead of its first cell",
                    "language": language,
                },
            )
