"""Call and type hierarchy: one level of callers or callees, supertypes or subtypes.

Each is two requests (LSP 3.17): a prepare request at the position names the item(s) there
(`textDocument/prepareCallHierarchy` / `prepareTypeHierarchy`), then one follow-up per item
(`callHierarchy/incomingCalls|outgoingCalls`, `typeHierarchy/supertypes|subtypes`) whose
answers are merged. Both are sent only when the server advertises the provider, and a
server that advertises it but answers a request "method not found" (clangd 14 does, for
outgoingCalls and the standard type hierarchy) is taken at its word: the method is
remembered as missing and never sent again to this process. Either way the refusal names
the servers of the table that have the direction (`ServerRow.hierarchy`) and what to ask
instead.
"""

from __future__ import annotations

from tether.json_types import JSONObject
from tether.lsp.jsonrpc import METHOD_NOT_FOUND
from tether.lsp.narrow import objs
from tether.lsp.servers import having
from tether.lsp.session import records
from tether.lsp.session.link import Answer
from tether.lsp.session.serving import Serving
from tether.lsp.session.table import Op
from tether.messages.calls import ErrorCode
from tether.messages.language_server_ops import Hierarchy, HierarchyRecord, HierarchyReply

# direction -> (prepare method, follow-up method, the key of the item in a follow-up's
# answer: CallHierarchyIncomingCall.from, OutgoingCall.to; a type answer is the items)
METHODS: dict[str, tuple[str, str, str | None]] = {
    "incoming": ("textDocument/prepareCallHierarchy", "callHierarchy/incomingCalls", "from"),
    "outgoing": ("textDocument/prepareCallHierarchy", "callHierarchy/outgoingCalls", "to"),
    "supertypes": ("textDocument/prepareTypeHierarchy", "typeHierarchy/supertypes", None),
    "subtypes": ("textDocument/prepareTypeHierarchy", "typeHierarchy/subtypes", None),
}
PREPARED_CAP = 5  # items of one prepare followed up (a name may prepare to a few overloads)

WHAT = {"incoming": "incoming calls", "outgoing": "outgoing calls",
        "supertypes": "supertypes", "subtypes": "subtypes"}  # fmt: skip
INSTEAD = {
    "incoming": "Instead, lsp references on the symbol lists every use, its calls included.",
    "outgoing": "Instead, read the function and ask lsp definition about the calls in it.",
    "supertypes": "Instead, ask lsp definition about the base types named in its declaration.",
    "subtypes": "Instead, lsp implementation on the type lists what implements it.",
}


class Hierarchies:
    """The hierarchy part: serves `Hierarchy` ops, and remembers the methods this server
    process advertised but does not implement (`unimplemented`)."""

    def __init__(self, serving: Serving) -> None:
        self.s = serving
        self.unimplemented: set[str] = set()  # advertised, but answered "method not found"

    def serve(self, op: Op, h: Hierarchy) -> None:
        prepare, follow, _key = METHODS[h.direction]
        for method in (prepare, follow):
            if method in self.unimplemented or not self.s.caps.supports(method):
                self.s.table.fail(op, ErrorCode.UNAVAILABLE, self._lacks(h, method))
                return
        doc = self.s.open(op, h.path)
        if doc is None:
            return
        params: JSONObject = {
            "textDocument": {"uri": doc.uri},
            "position": self.s.position(doc, h.line0, h.char),
        }
        self.s.link.request(prepare, params, op.deadline, op, lambda r: self._prepared(op, h, r))

    def _prepared(self, op: Op, h: Hierarchy, resp: Answer) -> None:
        if self._not_found(op, h, resp) or self.s.response_error(
            op, resp, lambda: self.serve(op, h)
        ):
            return
        items = objs(resp.result)[:PREPARED_CAP]
        if not items:
            self._hierarchy_done(op, h, [], [])
            return
        self._follow(op, h, items, [])

    def _follow(
        self, op: Op, h: Hierarchy, items: list[JSONObject], found: list[list[HierarchyRecord]]
    ) -> None:
        """Ask the follow-up about the next item (`found`: the answers about the ones before),
        one at a time and in order, so the merged answer lists the first item's first."""
        _prepare, follow, key = METHODS[h.direction]
        item = items[len(found)]

        def answered(resp: Answer) -> None:
            if self._not_found(op, h, resp) or self.s.response_error(
                op, resp, lambda: self._follow(op, h, items, found)
            ):
                return
            if key is None:
                recs = [records.hierarchy_item(t) for t in objs(resp.result)]
            else:
                recs = records.hierarchy_calls(resp.result, key)
                here = records.hierarchy_item(item)["path"]  # outgoing calls sit in `item`
                for r in recs:
                    r["sites_path"] = r["path"] if key == "from" else here
            now = [*found, recs]
            if len(now) < len(items):
                self._follow(op, h, items, now)
            else:
                self._hierarchy_done(op, h, items, [r for rs in now for r in rs])

        self.s.link.request(follow, {"item": item}, op.deadline, op, answered)

    def _hierarchy_done(
        self, op: Op, h: Hierarchy, items: list[JSONObject], recs: list[HierarchyRecord]
    ) -> None:
        unique, seen = [], set()
        for r in recs:
            # overloads of one name share callers; and one call reaches every overload
            # of its callee (basedpyright lists `sum` three times for one call)
            if h.direction == "outgoing":
                mark: tuple[str | int, ...] = (r["path"], r["name"], str(r["sites"]))
            else:
                mark = (r["path"], r["line"], r["character"], r["name"])
            if mark not in seen:
                seen.add(mark)
                unique.append(r)
        limit = h.limit or len(unique)
        origin = [records.hierarchy_item(i) for i in items]
        enc = self.s.caps.position_encoding
        self.s.table.done(op, HierarchyReply(unique[:limit], len(unique), origin, enc))

    def _not_found(self, op: Op, h: Hierarchy, resp: Answer) -> bool:
        """The server answered "method not found" to a method it advertised: remember it,
        and fail the call saying so (True)."""
        if not resp.error or resp.error.get("code") != METHOD_NOT_FOUND:
            return False
        self.unimplemented.add(resp.method)
        self.s.table.fail(op, ErrorCode.UNAVAILABLE, self._lacks(h, resp.method))
        return True

    def _lacks(self, h: Hierarchy, method: str) -> str:
        name = self.s.row.name
        if method in self.unimplemented:
            why = f'it answered {method} "method not found", though it advertises the provider'
        else:
            why = f"{method} is not in its advertised capabilities"
        if h.direction in self.s.row.hierarchy:  # the table says it has it: another release
            since = self.s.row.hierarchy[h.direction]
            why += f"; {name} has it from release {since}" if since else ""
        others = [n for n in having(h.direction) if n.split()[0] != name]
        table = (
            f"Servers in the table that have {WHAT[h.direction]}: {', '.join(others)}."
            if others
            else f"No server in the table has {WHAT[h.direction]}."
        )
        return f"{name} does not offer {h.action} {h.direction} ({why}). {table} {INSTEAD[h.direction]}"
