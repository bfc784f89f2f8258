"""The `lsp` actions call_hierarchy and type_hierarchy: one level of callers or callees,
supertypes or subtypes of the symbol at `line` + `symbol`.

`direction` is required: there is no safe default between "who calls this" and "what does
this call", and a model that left it out would read one answer as the other. The server
decides what it can answer (`tether.lsp.session.hierarchy`); a refusal names the servers
that can.
"""

from __future__ import annotations

import os
from typing import cast

from tether.json_types import JSONObject, JSONValue
from tether.messages.language_server_ops import Hierarchy, HierarchyDirection, HierarchyReply
from tether.tools.lsp_tool import render
from tether.tools.lsp_tool.model_records import Lines, model_records
from tether.tools.lsp_tool.notes import noted
from tether.tools.lsp_tool.targets import ask, line_arg, locate, text_arg
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

QUERY_TIMEOUT = 30.0
DIRECTIONS = {
    "call_hierarchy": {"incoming": "who calls it", "outgoing": "what it calls"},
    "type_hierarchy": {"supertypes": "what it extends or implements", "subtypes": "what extends or implements it"},
}  # fmt: skip


def _directions(action: str) -> str:
    return " or ".join(f'"{d}" ({why})' for d, why in DIRECTIONS[action].items())


def bad_direction(action: str, direction: JSONValue) -> ToolResult | None:
    """The error for a missing or wrong `direction` (None: it is one of the action's)."""
    example = (
        f'{{"action": "{action}", "file": "src/app.py", "line": 12, "symbol": "load_config", '
        f'"direction": "{next(iter(DIRECTIONS[action]))}"}}'
    )
    if direction is None:
        return ToolResult.error(f"{action} needs direction: {_directions(action)}, e.g. {example}.")
    if direction in DIRECTIONS[action]:
        return None
    other = next((a for a, ds in DIRECTIONS.items() if direction in ds), None)
    belongs = f" belongs to {other}" if other else " is not a direction"
    return ToolResult.error(
        f"direction {direction!r}{belongs}; {action} takes {_directions(action)}, e.g. {example}."
    )


def hierarchy(ctx: ToolContext, action: str, args: JSONObject) -> ToolResult:
    """call_hierarchy / type_hierarchy (the arguments are checked by name already)."""
    direction = args.get("direction")
    bad = bad_direction(action, direction)
    if bad:
        return bad
    file, line, symbol = text_arg(args, "file"), line_arg(args), text_arg(args, "symbol")
    if not file or line is None:
        return ToolResult.error(
            f'{action} needs file, line, symbol and direction, e.g. {{"action": "{action}", '
            f'"file": "src/app.py", "line": 12, "symbol": "load_config", "direction": '
            f'"{direction}"}}.'
        )
    located = locate(ctx, file, line, symbol)
    if isinstance(located, ToolResult):
        return located
    path, span, target = located
    op = Hierarchy(
        cast(HierarchyDirection, direction), str(path), span.line, span.start, render.CAPS[action]
    )
    found = ask(ctx, target.key, op, HierarchyReply, QUERY_TIMEOUT)
    lines = Lines(ctx)
    enc = found.encoding
    items = model_records(ctx, found.items, lines, enc)
    items.sort(key=lambda r: (os.path.isabs(r["path"]), r["path"], r["line"]))
    origin = model_records(ctx, found.origin, lines, enc)
    total = found.total
    name = symbol or ""
    text = render.hierarchy(str(direction), name, items, total, f"{file}:{line}", origin)
    if target.row.open_files_only and direction in ("incoming", "subtypes") and origin:
        what = "callers" if direction == "incoming" else "subtypes"
        text += (
            f"\n({target.row.name} knows only the files opened in it so far, by lsp calls "
            f"and writes: {what} in the others may be missing, as for references.)"
        )
    data = {
        "direction": direction,
        "items": items,
        "total": total,
        "capped": total > len(items),
        "origin": origin,
        "server_ms": found.server_ms,
    }
    return noted(ctx, ToolResult.ok(text, data=data), found)
