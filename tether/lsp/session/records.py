"""LSP results -> the actor's records: locations, symbols, code actions, hover text.

Pure functions of the server's answer. Positions stay in the server's units (its
negotiated position encoding); the host converts them with the line's text, which it reads
anyway for the record's `text`.
"""

from __future__ import annotations

from tether.json_types import JSONObject, JSONValue
from tether.lsp.documents import path_of
from tether.lsp.narrow import obj, objs, text, whole
from tether.messages.language_server_ops import (
    CodeActionRecord,
    HierarchyRecord,
    LocationRecord,
    Span,
    SymbolRecord,
)

SYMBOL_KINDS = {
    1: "file", 2: "module", 3: "namespace", 4: "package", 5: "class", 6: "method",
    7: "property", 8: "field", 9: "constructor", 10: "enum", 11: "interface", 12: "function",
    13: "variable", 14: "constant", 15: "string", 16: "number", 17: "boolean", 18: "array",
    19: "object", 20: "key", 21: "null", 22: "enum member", 23: "struct", 24: "event",
    25: "operator", 26: "type parameter",
}  # fmt: skip


def location(uri: str, rng: JSONValue) -> LocationRecord:
    """A location as (path, 1-based lines, characters in the negotiated encoding).

    Characters stay in the server's units: converting them to code points needs the
    line's text, which the host reads anyway for the record's `text` (reading every
    referenced file here too doubled the cost of a large `references`)."""
    return {"path": str(path_of(uri)), **span(rng)}


def span(rng: JSONValue) -> Span:
    """A range as 1-based lines and characters in the negotiated encoding."""
    s, e = obj(obj(rng).get("start")), obj(obj(rng).get("end"))
    sl = whole(s.get("line"))
    return {
        "line": sl + 1,
        "character": whole(s.get("character")),
        "end_line": whole(e.get("line"), sl) + 1,
        "end_character": whole(e.get("character")),
    }


def locations(r: JSONValue) -> list[LocationRecord]:
    """Location | Location[] | LocationLink[] | null -> location records, without repeats
    (servers now and then list a declaration that is also a use twice)."""
    out, seen = [], set()
    for loc in objs(r if isinstance(r, list) else [r]):
        if "targetUri" in loc:  # LocationLink
            uri = text(loc["targetUri"])
            rng = loc.get("targetSelectionRange") or loc.get("targetRange")
        else:
            uri, rng = text(loc.get("uri")), loc.get("range")
        rec = location(uri, rng)
        key = (rec["path"], rec["line"], rec["character"])
        if key not in seen:
            seen.add(key)
            out.append(rec)
    return out


def code_action(a: JSONObject) -> CodeActionRecord:
    edit = obj(a.get("edit"))
    changes, document_changes = edit.get("changes"), edit.get("documentChanges")
    files = (len(changes) if isinstance(changes, dict) else 0) + (
        len(document_changes) if isinstance(document_changes, list) else 0
    )
    cmd = a.get("command")
    return {
        "title": text(a.get("title")),
        "kind": text(a.get("kind")),
        "preferred": bool(a.get("isPreferred")),
        "files": files,
        "command": text(obj(cmd).get("command") if isinstance(cmd, dict) else cmd),
        "diagnostics": [text(d.get("message")) for d in objs(a.get("diagnostics"))],
    }


def symbols(items: JSONValue, doc_uri: str | None) -> list[SymbolRecord]:
    """DocumentSymbol[] (hierarchical, in `doc_uri`) or SymbolInformation[] /
    WorkspaceSymbol[] -> flat symbol records, each with its container's dotted name."""
    out: list[SymbolRecord] = []

    def walk(items: JSONValue, container: str, uri: str | None) -> None:
        for s in objs(items):
            if "location" in s:  # SymbolInformation / WorkspaceSymbol
                loc = obj(s["location"])
                rec = location(text(loc.get("uri")), loc.get("range"))
                cont = text(s.get("containerName"))
            else:  # DocumentSymbol (hierarchical)
                rec = location(uri or "", s.get("selectionRange") or s.get("range"))
                cont = container
            name = text(s.get("name"))
            out.append(
                {
                    **rec,
                    "name": name,
                    "kind": SYMBOL_KINDS.get(whole(s.get("kind")), "symbol"),
                    "container": cont,
                    "detail": text(s.get("detail")),
                }
            )
            if s.get("children"):
                walk(s["children"], f"{container}.{name}" if container else name, uri)

    walk(items, "", doc_uri)
    return out


def hover_text(r: JSONValue) -> str:
    """Hover contents (MarkupContent | MarkedString | MarkedString[]) -> markdown text."""
    if not r:
        return ""
    c = r.get("contents") if isinstance(r, dict) else r

    def one(x: JSONValue) -> str:
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


def hierarchy_item(item: JSONObject) -> HierarchyRecord:
    """A CallHierarchyItem / TypeHierarchyItem -> a location record at its name (its
    selectionRange), with its name, kind and detail."""
    rec = location(text(item.get("uri")), item.get("selectionRange") or item.get("range"))
    return {
        **rec,
        "name": text(item.get("name")),
        "kind": SYMBOL_KINDS.get(whole(item.get("kind")), "symbol"),
        "detail": text(item.get("detail")),
    }


def hierarchy_calls(calls: JSONValue, key: str) -> list[HierarchyRecord]:
    """CallHierarchyIncomingCall[] (`key` "from") / OutgoingCall[] ("to") -> item records,
    each with the call sites (`fromRanges`: in the caller's file for incoming calls, in the
    asked-about item's file for outgoing ones), without repeats (tsserver lists a site
    twice)."""
    out = []
    for call in objs(calls):
        rec = hierarchy_item(obj(call.get(key)))
        sites, seen = [], set()
        for rng in objs(call.get("fromRanges")):
            site = span(rng)
            mark = (site["line"], site["character"])
            if mark not in seen:
                seen.add(mark)
                sites.append(site)
        rec["sites"] = sites[:SITES_CAP]
        rec["sites_total"] = len(sites)
        out.append(rec)
    return out
