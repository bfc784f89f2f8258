"""The `lsp` tool's actions on one file or query, and `lsp_rename`.

Each handler validates and resolves what it can without a server (the file, the line +
symbol position, which server and root), sends one Call to the `language_server` actor and
renders the reply for a model, with the same content as records in `ToolResult.data`.
"""

from __future__ import annotations

import os
import typing

from tether.json_types import JSONObject
from tether.lsp.servers import SERVERS, resolve
from tether.messages.calls import ResourceError
from tether.messages.language_server_ops import (
    CodeActionsReply,
    Diagnostics,
    DiagnosticsReply,
    DocumentSymbols,
    HoverReply,
    LocationsReply,
    NavAction,
    Navigate,
    Rename,
    RenameFile,
    RenameReply,
    SymbolsReply,
    WorkspaceSymbols,
)
from tether.tools.lsp_tool import render
from tether.tools.lsp_tool.checker import project_check
from tether.tools.lsp_tool.hierarchy import DIRECTIONS, hierarchy
from tether.tools.lsp_tool.model_records import (
    Lines,
    ModelSymbol,
    model_records,
    relative,
    severe,
)
from tether.tools.lsp_tool.notes import noted
from tether.tools.lsp_tool.status import reload, status
from tether.tools.lsp_tool.targets import ask, file_server, line_arg, locate, text_arg
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

QUERY_TIMEOUT = 30.0
NAV: tuple[NavAction, ...] = typing.get_args(NavAction)
HIERARCHIES = tuple(DIRECTIONS)  # call_hierarchy, type_hierarchy
ACTIONS = ("diagnostics", *NAV, *HIERARCHIES, "symbols", "status", "reload")


def lsp(ctx: ToolContext, args: JSONObject) -> ToolResult:
    action = args["action"]
    nav = next((a for a in NAV if a == action), None)
    if nav is not None:
        return _nav(ctx, nav, args)
    if action in HIERARCHIES:
        bad = _unexpected(action, args, {"file", "line", "symbol", "direction"})
        return bad or hierarchy(ctx, str(action), args)
    if action == "diagnostics":
        file = text_arg(args, "file")
        if not file:
            return ToolResult.error(
                'diagnostics needs file: a workspace-relative path, or "*" for the whole '
                "project (runs the project's own checker)."
            )
        return project_check(ctx) if file == "*" else _file_diagnostics(ctx, file)
    if action == "symbols":
        return _symbols(ctx, args)
    if action == "status":
        return status(ctx, text_arg(args, "file"))
    return reload(ctx, text_arg(args, "file"))


def _unexpected(action: str, args: JSONObject, allowed: set[str]) -> ToolResult | None:
    extra = sorted(k for k in args if k not in allowed and k != "action")
    if extra:
        return ToolResult.error(
            f"{action} does not take {', '.join(extra)}; it takes {', '.join(sorted(allowed)) or 'nothing'}."
        )
    return None


def _nav(ctx: ToolContext, action: NavAction, args: JSONObject) -> ToolResult:
    bad = _unexpected(action, args, {"file", "line", "symbol"})
    if bad:
        return bad
    file, line, symbol = text_arg(args, "file"), line_arg(args), text_arg(args, "symbol")
    if not file or line is None:
        return ToolResult.error(
            f'{action} needs file, line and symbol, e.g. {{"action": "{action}", '
            '"file": "src/app.py", "line": 12, "symbol": "load_config"}.'
        )
    located = locate(ctx, file, line, symbol)
    if isinstance(located, ToolResult):
        return located
    path, span, target = located
    op = Navigate(action, str(path), span.line, span.start, span.end, render.CAPS.get(action, 0))
    name = symbol if symbol is not None else ""
    where = f"{file}:{line}"
    if action == "hover":
        hover = ask(ctx, target.key, op, HoverReply, QUERY_TIMEOUT)
        return noted(
            ctx,
            ToolResult.ok(
                render.hover(name, where, hover.hover),
                data={
                    "file": file,
                    "line": line,
                    "symbol": name,
                    "hover": hover.hover,
                    "server_ms": hover.server_ms,
                },
            ),
            hover,
        )
    if action == "code_actions":
        answer = ask(ctx, target.key, op, CodeActionsReply, QUERY_TIMEOUT)
        acts = answer.actions[: render.CAPS["code_actions"]]
        return noted(
            ctx, ToolResult.ok(render.code_actions(acts, where), data={"actions": acts}), answer
        )
    found = ask(ctx, target.key, op, LocationsReply, QUERY_TIMEOUT)
    # the first CAPS[action], without repeats
    locs = found.locations[: render.CAPS[action]]
    shown = model_records(ctx, locs, Lines(ctx), found.encoding)
    result = ToolResult.ok(
        render.locations(action, name, shown, found.total, where),
        data={
            "locations": shown,
            "total": found.total,
            "capped": found.total > len(shown),
            "server_ms": found.server_ms,  # the language server's own share
        },
    )
    return noted(ctx, result, found)


def _file_diagnostics(ctx: ToolContext, file: str) -> ToolResult:
    found = file_server(ctx, file)
    if isinstance(found, ToolResult):
        return found
    path, target = found
    diags = ask(ctx, target.key, Diagnostics(str(path), 10.0), DiagnosticsReply, QUERY_TIMEOUT)
    if diags.pending:
        pending = ToolResult.error(
            f"diagnostics pending for {file}: {target.row.name} did not finish checking it in "
            "10 s (it may still be indexing - see lsp status). Try again shortly.",
            data={"pending": [file]},
        )
        return noted(ctx, pending, diags)
    first = next(iter(diags.files.values()), None)  # None: never seen
    raw = severe(first or [])
    recs = model_records(ctx, raw, Lines(ctx))
    shown = recs[: render.CAPS["diagnostics"]]
    result = ToolResult.ok(
        render.diagnostics(shown, len(recs), f"{file} ({target.row.name})"),
        data={"diagnostics": shown, "total": len(recs), "server": target.row.name},
    )
    return noted(ctx, result, diags)


def _symbols(ctx: ToolContext, args: JSONObject) -> ToolResult:
    bad = _unexpected("symbols", args, {"file", "query"})
    if bad:
        return bad
    file, query = text_arg(args, "file"), text_arg(args, "query")
    if not file and not query:
        return ToolResult.error(
            'symbols needs query (workspace search, e.g. {"action": "symbols", "query": '
            '"Config"}) or file (the symbols of one file).'
        )
    lines = Lines(ctx)
    if file and not query:
        found = file_server(ctx, file)
        if isinstance(found, ToolResult):
            return found
        path, target = found
        syms = ask(ctx, target.key, DocumentSymbols(str(path)), SymbolsReply, QUERY_TIMEOUT)
        recs = model_records(ctx, syms.symbols, lines, syms.encoding)
        recs.sort(key=lambda r: (r["line"], r["column"]))
        cap = render.CAPS["document_symbols"]
        result = ToolResult.ok(
            render.symbols(recs[:cap], len(recs), f"symbols in {file}"),
            data={"symbols": recs[:cap], "total": len(recs)},
        )
        return noted(ctx, result, syms)
    if file:
        found = file_server(ctx, file)
        if isinstance(found, ToolResult):
            return found
        targets = [found[1]]
    else:
        targets = [
            r for r in (resolve(row, ctx.workdir, ctx.workdir) for row in SERVERS) if r.usable
        ]
        if not targets:
            return ToolResult.error(
                "no language server can start at the workspace root (no root marker with an "
                "installed server); pass file to search through that file's server, or call "
                "lsp status."
            )
    recs, errors, answers = [], [], []
    for t in targets:
        try:
            syms = ask(ctx, t.key, WorkspaceSymbols(str(query)), SymbolsReply, QUERY_TIMEOUT)
        except ResourceError as e:
            # servers answer with stack traces (tsserver's "No Project"): the first line says it
            first = e.message.strip().splitlines()[0]
            if "No Project" in e.message:
                first += " (no project loaded yet: query one of its files first, then search)"
            errors.append(f"{t.row.name}: {first}")
            continue
        answers.append(syms)
        recs += model_records(ctx, syms.symbols, lines, syms.encoding)
    recs = [r for r in recs if _relevant(r, str(query))]
    recs.sort(key=lambda r: _symbol_rank(r, str(query)))
    cap = render.CAPS["workspace_symbols"]
    text = render.symbols(recs[:cap], len(recs), f"symbols matching {query!r}")
    if errors:
        text += "\n(" + "; ".join(errors) + ")"
    return noted(
        ctx, ToolResult.ok(text, data={"symbols": recs[:cap], "total": len(recs)}), *answers
    )


def _relevant(rec: ModelSymbol, query: str) -> bool:
    """Inside the workspace every server match counts; outside it (a toolchain's sources) only
    names that contain the query: gopls fuzzy-matches "Stock" to syscall.SYS_GETSOCKOPT, and a
    hundred of those would bury the project's own `Stock`."""
    if not os.path.isabs(str(rec.get("path", ""))):
        return True
    return query.lower() in str(rec.get("name", "")).lower()


def _symbol_rank(rec: ModelSymbol, query: str) -> tuple[bool, bool, bool, bool, bool]:
    """Exact name, then case-insensitive, prefix, substring, then the servers' fuzzy
    matches (gopls matches "Item" to "IFA_F_TEMPORARY"); inside the workspace first."""
    name, q = str(rec.get("name", "")).rsplit(".", 1)[-1], query
    low, ql = name.lower(), q.lower()
    return (
        name != q,
        low != ql,
        not low.startswith(ql),
        ql not in low,
        os.path.isabs(str(rec.get("path", ""))),
    )


def lsp_rename(ctx: ToolContext, args: JSONObject) -> ToolResult:
    file, line, symbol = text_arg(args, "file"), line_arg(args), text_arg(args, "symbol")
    new_name = text_arg(args, "new_name")
    if file is None or line is None or symbol is None or new_name is None:  # (all required)
        return ToolResult.error("lsp_rename needs file, line, symbol and new_name.")
    if not new_name.strip():
        return ToolResult.error("new_name is empty; pass the new identifier.")
    located = locate(ctx, file, line, symbol)
    if isinstance(located, ToolResult):
        return located
    path, span, target = located
    try:
        done = ask(
            ctx,
            target.key,
            Rename(
                str(path),
                span.line,
                span.start,
                str(new_name),
                confine=[str(ctx.workdir)],
                # a write-tier call: while it is served, the server's own edits
                # (workspace/applyEdit) may land inside `confine`
                write_tier=True,
            ),
            RenameReply,
            QUERY_TIMEOUT,
        )
    except ResourceError as e:
        return ToolResult.error(f"lsp_rename: {e.message}", data={"code": e.code})
    files: list[RenameFile] = [
        {"path": relative(ctx, f["path"]), "edits": f["edits"]} for f in done.files
    ]
    created = [relative(ctx, p) for p in done.created]
    extra: dict[str, list[str] | list[list[str]]] = {
        "created": created,
        "renamed": [[relative(ctx, a), relative(ctx, b)] for a, b in done.renamed],
        "deleted": [relative(ctx, p) for p in done.deleted],
    }
    server = [relative(ctx, p) for p in done.server_edits]
    written = sorted({f["path"] for f in files} | set(created) | set(server))
    text = render.rename(symbol, new_name, files, extra)
    data: dict[str, list[RenameFile] | list[str] | list[list[str]]] = {
        "files": files,
        **extra,
        "written": written,
    }
    if server:  # the server's own workspace/applyEdit, accepted during this write-tier call
        text += f"\nThe language server itself also changed: {', '.join(server)}."
        data["server_edits"] = server
    return noted(ctx, ToolResult.ok(text, data=data), done)
