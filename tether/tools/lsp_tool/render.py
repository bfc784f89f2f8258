"""Model-facing text for language-server answers (pure functions over records).

What a model reads well, and why:
- every location as `path:line` plus the code on that line, so the answer can be checked
  without another read;
- hover as the signature block and then the doc comment;
- references grouped by file, in file order, with a count; callers, callees, supertypes
  and subtypes too, each caller with the lines where it calls;
- caps stated as "capped at 50 of N" so a model knows it saw a prefix, not everything.

Records (`ToolResult.data`) carry the same: path (workspace-relative when inside the
workspace), line, column, end_line, end_column (1-based, code points), text.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.lsp.diagnostics import SEVERITY_NAMES
from tether.messages.language_server_ops import CodeActionRecord, RenameFile
from tether.tools.lsp_tool.model_records import (
    ModelDiagnostic,
    ModelFinding,
    ModelHierarchyItem,
    ModelLocation,
    ModelSymbol,
)

CAPS = {"references": 50, "definition": 50, "type_definition": 50, "implementation": 50,
        "call_hierarchy": 50, "type_hierarchy": 50,
        "workspace_symbols": 100, "document_symbols": 200, "code_actions": 50,
        "diagnostics": 100, "folded": 20}  # fmt: skip

WHAT = {
    "definition": "definition",
    "type_definition": "type definition",
    "implementation": "implementation",
    "references": "reference",
}


def capped(n_shown: int, n_total: int) -> str:
    return f" (capped at {n_shown} of {n_total})" if n_total > n_shown else ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def locations(
    action: str, symbol: str, records: Sequence[ModelLocation], total: int, where: str
) -> str:
    """definition / type_definition / implementation / references."""
    what = WHAT[action]
    if not records:
        return f"no {what} found for `{symbol}` at {where}."
    head = f"{_plural(total, what)} of `{symbol}`{capped(len(records), total)}:"
    if action != "references" and len(records) <= 3:
        return "\n".join(
            [head, *(f"{r['path']}:{r['line']}: {r.get('text', '').strip()}" for r in records)]
        )
    out = [head]
    by_file: dict[str, list[ModelLocation]] = {}
    for r in records:
        by_file.setdefault(r["path"], []).append(r)
    for path, recs in by_file.items():
        out.append(f"{path} ({len(recs)})")
        out.extend(f"  {r['line']}: {r.get('text', '').strip()}" for r in recs)
    return "\n".join(out)


HOVER_CAP = 4000  # characters of hover text shown (a docstring can be a whole manual page)


def hover(symbol: str, where: str, text: str) -> str:
    if not text.strip():
        return f"no hover information for `{symbol}` at {where}."
    body = text.strip()
    if len(body) > HOVER_CAP:
        body = (
            body[:HOVER_CAP]
            + f"\n… (hover capped at {HOVER_CAP} of {len(text.strip())} characters)"
        )
    return f"`{symbol}` at {where}:\n{body}"


def symbols(records: Sequence[ModelSymbol], total: int, header: str) -> str:
    if not records:
        return f"{header}: none found."
    out = [f"{header}: {total}{capped(len(records), total)}"]
    for r in records:
        cont = f" in {r['container']}" if r.get("container") else ""
        detail = f" {r['detail']}" if r.get("detail") else ""
        out.append(f"{r['path']}:{r['line']}: {r['kind']} {r['name']}{detail}{cont}")
    return "\n".join(out)


def diagnostic_line(d: ModelDiagnostic | ModelFinding) -> str:
    sev = SEVERITY_NAMES.get(int(d.get("severity") or 1), "error")
    code = f" [{d['code']}]" if d.get("code") else ""
    msg = str(d.get("message", "")).replace("\n", "\n    ")
    line = f"{d['path']}:{d['line']}:{d.get('column', 1)}: {sev}{code}: {msg}"
    if d.get("text"):
        line += f"\n    | {d['text'].strip()}"
    return line


def diagnostics(
    records: Sequence[ModelDiagnostic] | Sequence[ModelFinding], total: int, header: str
) -> str:
    if not records:
        return f"{header}: no errors or warnings."
    errors = sum(1 for d in records if int(d.get("severity") or 1) == 1)
    warnings = sum(1 for d in records if int(d.get("severity") or 1) == 2)
    out = [
        f"{header}: {_plural(errors, 'error')}, {_plural(warnings, 'warning')}"
        f"{capped(len(records), total)}"
    ]
    out.extend(diagnostic_line(d) for d in records)
    return "\n".join(out)


def code_actions(records: list[CodeActionRecord], where: str) -> str:
    if not records:
        return f"no code actions offered at {where}."
    out = [f"{_plural(len(records), 'code action')} at {where}:"]
    for a in records:
        pref = " (preferred)" if a.get("preferred") else ""
        kind = f" [{a['kind']}]" if a.get("kind") else ""
        fixes = f" fixes: {'; '.join(a['diagnostics'])}" if a.get("diagnostics") else ""
        out.append(f"- {a['title']}{kind}{pref}{fixes}")
    return "\n".join(out)


def rename(
    symbol: str,
    new_name: str,
    files: list[RenameFile],
    extra: dict[str, list[str] | list[list[str]]],
) -> str:
    n = sum(f["edits"] for f in files)
    out = [
        f"renamed `{symbol}` to `{new_name}`: {_plural(n, 'edit')} in {_plural(len(files), 'file')}"
    ]
    out.extend(f"  {f['path']}: {f['edits']}" for f in files)
    for what in ("created", "renamed", "deleted"):
        for item in extra.get(what) or []:
            out.append(f"  {what}: {' -> '.join(item) if isinstance(item, list) else item}")
    return "\n".join(out)


def folded(new: list[ModelDiagnostic], pending: list[str], cap: int = CAPS["folded"]) -> str:
    """The block diagnostics-on-write appends to a write's result ("" when nothing to say)."""
    out = []
    if new:
        errors = sum(1 for d in new if int(d.get("severity") or 1) == 1)
        out.append(
            f"New diagnostics after this write ({_plural(errors, 'error')}, "
            f"{_plural(len(new) - errors, 'warning')}){capped(min(cap, len(new)), len(new))}:"
        )
        out.extend(diagnostic_line(d) for d in new[:cap])
    if pending:
        out.append(
            "Diagnostics pending for "
            + ", ".join(pending)
            + ": the language server had not finished checking this version; "
            "call lsp diagnostics on the file to see them."
        )
    return "\n".join(out)


HIERARCHY_WHAT = {"incoming": "caller", "outgoing": "callee",
                  "supertypes": "supertype", "subtypes": "subtype"}  # fmt: skip
SITES_SHOWN = 5  # call sites shown under each caller or callee


def hierarchy(
    direction: str,
    symbol: str,
    records: Sequence[ModelHierarchyItem],
    total: int,
    where: str,
    origin: Sequence[ModelHierarchyItem],
) -> str:
    """call_hierarchy / type_hierarchy: the items grouped by file like references; under
    each caller the lines where it calls the symbol, under each callee where it is called."""
    calls = direction in ("incoming", "outgoing")
    if not origin:
        named = "function or method" if calls else "class, interface or other type"
        return (
            f"no {'call' if calls else 'type'} hierarchy for `{symbol}` at {where}: the server "
            f"found no {named} there. Point at its name where it is declared or used."
        )
    first = origin[0]
    about = f"`{symbol}` ({first['kind']} at {first['path']}:{first['line']})"
    what = HIERARCHY_WHAT[direction]
    if not records:
        return f"no {what}s of {about}."
    out = [f"{_plural(total, what)} of {about}{capped(len(records), total)}:"]
    by_file: dict[str, list[ModelHierarchyItem]] = {}
    for r in records:
        by_file.setdefault(r["path"], []).append(r)
    for path, recs in by_file.items():
        out.append(f"{path} ({len(recs)})")
        for r in recs:
            out.append("  " + _hierarchy_item(r, direction))
            sites = r.get("sites") or []
            for s in sites[:SITES_SHOWN]:
                at = f"{s['path']}:" if direction == "outgoing" else ""
                out.append(f"      {at}{s['line']}: {s.get('text', '').strip()}")
            more = int(r.get("sites_total", len(sites))) - min(len(sites), SITES_SHOWN)
            if more > 0:
                out.append(f"      … and {_plural(more, 'more call')}")
    return "\n".join(out)


def _hierarchy_item(r: ModelHierarchyItem, direction: str) -> str:
    if direction in ("supertypes", "subtypes"):
        code = r.get("text", "").strip()
        return f"{r['line']}: {code or r['kind'] + ' ' + r['name']}"
    if r["kind"] in ("module", "file"):  # tsserver: a call at a module's top level
        head = f"top level of {r['name']}"
    else:
        detail = f" - {r['detail']}" if r.get("detail") else ""  # a signature, a module
        head = f"{r['line']}: {r['kind']} {r['name']}{detail}"
    return head + (", calling it at:" if direction == "incoming" else ", called at:")
