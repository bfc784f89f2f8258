"""LSP results -> the actor's records: locations, symbols, code actions, hover text.

Pure functions of the server's answer. Positions stay in the server's units (its
negotiated position encoding); the host converts them with the line's text, which it reads
anyway for the record's `text`.
"""

from __future__ import annotations

from typing import Any

from tether.lsp.documents import path_of

SYMBOL_KINDS = {
    1: "file", 2: "module", 3: "namespace", 4: "package", 5: "class", 6: "method",
    7: "property", 8: "field", 9: "constructor", 10: "enum", 11: "interface", 12: "function",
    13: "variable", 14: "constant", 15: "string", 16: "number", 17: "boolean", 18: "array",
    19: "object", 20: "key", 21: "null", 22: "enum member", 23: "struct", 24: "event",
    25: "operator", 26: "type parameter",
}  # fmt: skip


def location(uri: str, rng: dict[str, Any]) -> dict[str, Any]:
    """A location as (path, 1-based lines, characters in the negotiated encoding).

    Characters stay in the server's units: converting them to code points needs the
    line's text, which the host reads anyway for the record's `text` (reading every
    referenced file here too doubled the cost of a large `references`)."""
    return {"path": str(path_of(uri)), **span(rng)}


def span(rng: dict[str, Any]) -> dict[str, int]:
    """A range as 1-based lines and characters in the negotiated encoding."""
    s, e = rng.get("start") or {}, rng.get("end") or {}
    sl = int(s.get("line", 0))
    return {
        "line": sl + 1,
        "character": int(s.get("character", 0)),
        "end_line": int(e.get("line", sl)) + 1,
        "end_character": int(e.get("character", 0)),
    }


def locations(r: Any) -> list[dict[str, Any]]:
    """Location | Location[] | LocationLink[] | null -> location records, without repeats
    (servers now and then list a declaration that is also a use twice)."""
    if r is None:
        return []
    items = r if isinstance(r, list) else [r]
    out, seen = [], set()
    for loc in items:
        if "targetUri" in loc:  # LocationLink
            uri = loc["targetUri"]
            rng = loc.get("targetSelectionRange") or loc.get("targetRange") or {}
        else:
            uri, rng = loc.get("uri", ""), loc.get("range") or {}
        rec = location(uri, rng)
        key = (rec["path"], rec["line"], rec["character"])
        if key not in seen:
            seen.add(key)
            out.append(rec)
    return out


def code_action(a: dict[str, Any]) -> dict[str, Any]:
    edit = a.get("edit") or {}
    files = len(edit.get("changes") or {}) + len(edit.get("documentChanges") or [])
    cmd = a.get("command")
    return {
        "title": a.get("title", ""),
        "kind": a.get("kind", ""),
        "preferred": bool(a.get("isPreferred")),
        "files": files,
        "command": (cmd.get("command") if isinstance(cmd, dict) else cmd) or "",
        "diagnostics": [d.get("message", "") for d in a.get("diagnostics") or []],
    }


def symbols(items: list[dict[str, Any]], doc_uri: str | None) -> list[dict[str, Any]]:
    """DocumentSymbol[] (hierarchical, in `doc_uri`) or SymbolInformation[] /
    WorkspaceSymbol[] -> flat symbol records, each with its container's dotted name."""
    out: list[dict[str, Any]] = []

    def walk(items: list[dict[str, Any]], container: str, uri: str | None) -> None:
        for s in items or []:
            if "location" in s:  # SymbolInformation / WorkspaceSymbol
                loc = s["location"]
                rec = location(loc.get("uri", ""), loc.get("range") or {})
                cont = s.get("containerName") or ""
            else:  # DocumentSymbol (hierarchical)
                rec = location(uri or "", s.get("selectionRange") or s.get("range") or {})
                cont = container
            rec.update(
                name=s.get("name", ""),
                kind=SYMBOL_KINDS.get(int(s.get("kind") or 0), "symbol"),
                container=cont,
                detail=s.get("detail") or "",
            )
            out.append(rec)
            if s.get("children"):
                walk(s["children"], f"{container}.{s['name']}" if container else s["name"], uri)

    walk(items, "", doc_uri)
    return out


def hover_text(r: Any) -> str:
    """Hover contents (MarkupContent | MarkedString | MarkedString[]) -> markdown text."""
    if not r:
        return ""
    c = r.get("contents") if isinstance(r, dict) else r

    def one(x: Any) -> str:
        if isinstance(x, str):
            return x
        if isinstance(x, dict):
            if "kind" in x:
                return str(x.get("value", ""))
            if "language" in x:
                return f"```{x['language']}\n{x.get('value', '')}\n```"
            return str(x.get("value", ""))
        return ""

    if isinstance(c, list):
        return "\n\n".join(t for t in (one(x) for x in c) if t).strip()
    return one(c).strip()


SITES_CAP = 20  # call sites kept per caller or callee (a generated function may have thousands)


def hierarchy_item(item: dict[str, Any]) -> dict[str, Any]:
    """A CallHierarchyItem / TypeHierarchyItem -> a location record at its name (its
    selectionRange), with its name, kind and detail."""
    rec = location(item.get("uri", ""), item.get("selectionRange") or item.get("range") or {})
    rec.update(
        name=item.get("name", ""),
        kind=SYMBOL_KINDS.get(int(item.get("kind") or 0), "symbol"),
        detail=item.get("detail") or "",
    )
    return rec


def hierarchy_calls(calls: Any, key: str) -> list[dict[str, Any]]:
    """CallHierarchyIncomingCall[] (`key` "from") / OutgoingCall[] ("to") -> item records,
    each with the call sites (`fromRanges`: in the caller's file for incoming calls, in the
    asked-about item's file for outgoing ones), without repeats (tsserver lists a site
    twice)."""
    out = []
    for call in calls or []:
        rec = hierarchy_item(call.get(key) or {})
        sites, seen = [], set()
        for rng in call.get("fromRanges") or []:
            site = span(rng)
            mark = (site["line"], site["character"])
            if mark not in seen:
                seen.add(mark)
                sites.append(site)
        rec["sites"] = sites[:SITES_CAP]
        rec["sites_total"] = len(sites)
        out.append(rec)
    return out
