"""`diagnostics "*"`: the project's own checker, run by a `checker` actor of the tree.

basedpyright --outputjson, tsc --noEmit, cc -fsyntax-only, go vet ./..., cargo check, dart
analyze: the row's `checker` says which. The run itself is the actor's subprocess
(tether.actors.checker), so it dies with the runtime like every other process of the tree;
the actor answers with the same records as a language server's diagnostics.
"""

from __future__ import annotations

from tether.lsp.checkers import CHECKER_TIMEOUT, finding
from tether.lsp.servers import SERVERS, make_key, resolve
from tether.messages.calls import ResourceError
from tether.messages.checker_ops import Check, read_check_reply
from tether.places import Place
from tether.places.registry import placed_key
from tether.tools.lsp_tool import render
from tether.tools.lsp_tool.model_records import Lines, ModelFinding, model_records, severe
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

CALL_SLACK = 10.0  # s the call waits beyond the checker's own time limit (the actor's word)


def project_check(ctx: ToolContext) -> ToolResult:
    targets = [r for r in (resolve(row, ctx.workdir, ctx.workdir) for row in SERVERS) if r.root]
    if not targets:
        markers = sorted({m for row in SERVERS for m in row.root_markers})
        return ToolResult.error(
            'diagnostics "*" runs the project\'s own checker, found by a root marker at the '
            f"workspace root; none is there (looked for {', '.join(markers)}). Pass a file "
            "instead."
        )
    parts: list[str] = []
    recs: list[ModelFinding] = []
    ran: list[str] = []
    for t in targets:
        row = t.row
        if row.checker is None:
            continue
        try:
            reply = ctx.call_resource(
                "checker",
                placed_key(
                    make_key(row.name, t.root or ctx.workdir),
                    getattr(ctx, "place", None) or Place.host(),  # (one checker per place)
                ),
                Check(),
                None,
                timeout=CHECKER_TIMEOUT + CALL_SLACK,
            )
            found = read_check_reply(reply).records
        except ResourceError as e:
            parts.append(f"{row.checker_name}: not run - {e.message}")
            continue
        ran.append(row.checker_name)
        model = model_records(ctx, severe([finding(r) for r in found]), Lines(ctx))
        recs += model
        parts.append(f"{row.checker_name}: {len(model)} finding(s)")
    if not ran:  # (not "no errors or warnings": nothing was checked)
        return ToolResult.error(
            "project check: no checker ran (" + "; ".join(parts) + "); check a file instead"
        )
    shown = recs[: render.CAPS["diagnostics"]]
    text = render.diagnostics(shown, len(recs), "project check (" + "; ".join(parts) + ")")
    return ToolResult.ok(text, data={"diagnostics": shown, "total": len(recs), "checkers": ran})
