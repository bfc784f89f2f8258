"""What a run keeps of its debugging: its breakpoints, until it clears them.

The breakpoints a run set are its intent until it clears them (or `terminate` does), so
the host keeps them (`ctx.state["debug"]`, saved with the run by `tether.serve.run_state`)
and `actions` sends them with every launch and attach: a session actor that lost them
(restarted after a crash or its TTL, built anew with its RunActor or the whole tree, or a
retried launch on a new incarnation) sets them again before it starts the program, and
says so. With them: what each adapter said it does with breakpoints (`debug adapters`).
"""

from __future__ import annotations

from typing import Final, TypedDict

from tether.messages.debug_ops import (
    BreakpointRow,
    FeatureReport,
    FunctionRow,
    FunctionSpec,
    LineSpec,
    Started,
)
from tether.tools.spec import ToolContext

FAMILY: Final = "debug"  # the run's state of the family: ctx.state[FAMILY]


class Kept(TypedDict, total=False):
    """What the run keeps of its debugging: its breakpoints, sent with every launch, and
    what each adapter said it does with breakpoints."""

    breakpoints: dict[str, list[LineSpec]]
    functions: list[FunctionSpec]
    exceptions: list[str]
    features: dict[str, FeatureReport]


def kept(ctx: ToolContext) -> Kept:
    """What the run keeps, made kept if it was not yet."""
    state: Kept = ctx.state.setdefault(FAMILY, Kept())
    return state


def seen(ctx: ToolContext) -> Kept:
    """What the run keeps, without making it keep anything ({}: nothing yet)."""
    state: Kept = ctx.state.get(FAMILY, {})
    return state


def keep_lines(
    ctx: ToolContext, rows: dict[str, list[BreakpointRow]], replace: list[str] | None = None
) -> None:
    """The run's line breakpoints, as the session answered them (their anchors, and their
    lines as the last launch moved them); `replace`: files whose set is exactly `rows`."""
    lines = kept(ctx).setdefault("breakpoints", {})
    for path in replace or []:
        lines.pop(path, None)
    for path, file_rows in rows.items():
        if file_rows:
            lines[path] = [r.spec for r in file_rows]


def keep_functions(ctx: ToolContext, rows: list[FunctionRow]) -> None:
    kept(ctx)["functions"] = [f.spec for f in rows]


def keep_exceptions(ctx: ToolContext, kinds: list[str]) -> None:
    kept(ctx)["exceptions"] = kinds


def keep_launch(ctx: ToolContext, started: Started, adapter: str) -> None:
    """After a launch: the breakpoints as it moved them, and what the adapter said it can do."""
    keep_lines(ctx, started.breakpoints)
    if started.functions:
        keep_functions(ctx, started.functions)
    if started.features:
        kept(ctx).setdefault("features", {})[adapter] = started.features


def forget_breakpoints(ctx: ToolContext) -> None:
    """`terminate` clears the run's breakpoints (what the adapters said of themselves stays)."""
    state = seen(ctx)
    state.pop("breakpoints", None)
    state.pop("functions", None)
    state.pop("exceptions", None)
