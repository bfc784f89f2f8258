"""The queries: navigation, symbols and rename (hierarchies are `hierarchy.py`'s).

Each op checks the server advertises the method, opens the document if needed, converts
the position to the server's encoding and sends one request; the answer becomes records
(`records.py`). A CONTENT_MODIFIED or cancelled answer is retried once (`_response_error`).
A rename is applied here, all or nothing and confined to the run's workspace, before the
call is answered; it is refused if the server's own edit (workspace/applyEdit) changed one
of its files after the request was sent, since an unversioned edit would not fit the text.
"""

from __future__ import annotations

from pathlib import Path

from tether.json_types import JSONObject
from tether.lsp import workspace_edit
from tether.lsp.documents import uri_of
from tether.lsp.narrow import objs
from tether.lsp.servers import sample_file
from tether.lsp.session import records
from tether.lsp.session.edits import Edits
from tether.lsp.session.freshness import Freshness
from tether.lsp.session.link import Answer
from tether.lsp.session.readiness import Readiness
from tether.lsp.session.serving import Serving
from tether.lsp.session.table import Op
from tether.messages.calls import ErrorCode
from tether.messages.language_server_ops import (
    CodeActionsReply,
    DocumentSymbols,
    HoverReply,
    LocationsReply,
    Navigate,
    Rename,
    RenameReply,
    SymbolsReply,
    WorkspaceSymbols,
)

NAV_METHODS = {
    "definition": "textDocument/definition",
    "type_definition": "textDocument/typeDefinition",
    "implementation": "textDocument/implementation",
    "references": "textDocument/references",
    "hover": "textDocument/hover",
    "code_actions": "textDocument/codeAction",
}


class Queries:
    """The query part: serves navigation, symbols and rename."""

    def __init__(
        self,
        serving: Serving,
        root: Path,
        readiness: Readiness,
        freshness: Freshness,
        edits: Edits,
    ) -> None:
        self.s, self.root = serving, root
        self.readiness, self.freshness, self.edits = readiness, freshness, edits

    # navigation ---------------------------------------------------------------------------
    def nav(self, op: Op, nav: Navigate) -> None:
        method = NAV_METHODS[nav.action]
        doc = self.s.open_for(op, method, nav.path)
        if doc is None:
            return
        pos = self.s.position(doc, nav.line0, nav.char)
        params: JSONObject = {"textDocument": {"uri": doc.uri}, "position": pos}
        if nav.action == "references":
            params["context"] = {"includeDeclaration": True}
        if nav.action == "code_actions":
            end = self.s.position(doc, nav.line0, nav.end_char)
            params = {
                "textDocument": {"uri": doc.uri},
                "range": {"start": pos, "end": end},
                "context": {
                    "diagnostics": [*self.freshness.raw_diagnostics_on(doc.uri, nav.line0)]
                },
            }
        self.s.link.request(
            method, params, op.deadline, op, lambda resp: self._on_nav(op, nav, resp)
        )

    def _on_nav(self, op: Op, nav: Navigate, resp: Answer) -> None:
        if self.s.response_error(op, resp, lambda: self.nav(op, nav)):
            return
        r = resp.result
        if nav.action == "hover":
            self.s.table.done(op, HoverReply(records.hover_text(r)))
        elif nav.action == "code_actions":
            self.s.table.done(op, CodeActionsReply([records.code_action(a) for a in objs(r)]))
        else:  # only what the host will show crosses (a references answer can be huge)
            locs = records.locations(r)
            limit = nav.limit or len(locs)
            enc = self.s.caps.position_encoding
            self.s.table.done(op, LocationsReply(locs[:limit], len(locs), enc))

    # symbols ------------------------------------------------------------------------------
    def document_symbols(self, op: Op, ds: DocumentSymbols) -> None:
        doc = self.s.open_for(op, "textDocument/documentSymbol", ds.path)
        if doc is None:
            return

        def on_symbols(resp: Answer) -> None:
            if not self.s.response_error(op, resp, lambda: self.document_symbols(op, ds)):
                self._symbols_done(op, resp, uri_of(ds.path))

        self.s.link.request(
            "textDocument/documentSymbol",
            {"textDocument": {"uri": doc.uri}},
            op.deadline,
            op,
            on_symbols,
        )

    def workspace_symbols(self, op: Op, ws: WorkspaceSymbols) -> None:
        if not self.s.supports(op, "workspace/symbol") or self.readiness.await_load(op):
            return
        if self.s.row.symbols_need_open and not self.s.texts.docs.open:
            sample = sample_file(self.s.row, self.root)  # the server searches open projects
            if sample is not None:
                self.s.texts.ensure_open(sample)

        def on_symbols(resp: Answer) -> None:
            if not self.s.response_error(op, resp, lambda: self.workspace_symbols(op, ws)):
                self._symbols_done(op, resp, None)

        self.s.link.request("workspace/symbol", {"query": ws.query}, op.deadline, op, on_symbols)

    def _symbols_done(self, op: Op, resp: Answer, doc_uri: str | None) -> None:
        syms = records.symbols(resp.result or [], doc_uri)
        self.s.table.done(op, SymbolsReply(syms, self.s.caps.position_encoding))

    # rename -------------------------------------------------------------------------------
    def rename(self, op: Op, rename: Rename) -> None:
        doc = self.s.open_for(op, "textDocument/rename", rename.path)
        if doc is None:
            return
        pos = self.s.position(doc, rename.line0, rename.char)
        td: JSONObject = {"uri": doc.uri}
        if self.s.caps.supports("textDocument/prepareRename") and not op.prepared:

            def on_prepare(resp: Answer) -> None:
                if self.s.response_error(op, resp, lambda: self.rename(op, rename)):
                    return
                if resp.result is None:
                    self.s.table.fail(
                        op,
                        ErrorCode.BAD_REQUEST,
                        f"{self.s.row.name} says the symbol at line {rename.line0 + 1} cannot be "
                        "renamed (prepareRename returned nothing): point at a name you own",
                    )
                    return
                op.prepared = True
                self.rename(op, rename)

            self.s.link.request(
                "textDocument/prepareRename",
                {"textDocument": td, "position": pos},
                op.deadline,
                op,
                on_prepare,
            )
            return
        op.epoch = self.edits.epoch  # what the server computes the rename against
        self.s.link.request(
            "textDocument/rename",
            {"textDocument": td, "position": pos, "newName": rename.new_name},
            op.deadline,
            op,
            lambda resp: self._on_rename(op, rename, resp),
        )

    def _on_rename(self, op: Op, rename: Rename, resp: Answer) -> None:
        if self.s.response_error(op, resp, lambda: self.rename(op, rename)):
            return
        if not resp.result:
            self.s.table.fail(
                op, ErrorCode.FAILED, f"{self.s.row.name} returned no edit for the rename"
            )
            return
        also = (
            f" ({self.s.row.name} itself changed {', '.join(op.server_edits)} during the call)"
            if op.server_edits
            else ""
        )
        # An unversioned edit computed before a server edit landed in one of its files would
        # be applied to text it was not computed for (seen with clangd: an applyTweak during
        # a rename turned `placeholder` into `placeassist`).
        since, edit = op.epoch, resp.result
        try:
            if not isinstance(edit, dict):
                raise TypeError(f"a WorkspaceEdit is an object, not {type(edit).__name__}")
            stale = self.edits.stale(workspace_edit.named_paths(edit), since)
        except (AttributeError, TypeError) as e:
            self.s.table.fail(
                op, ErrorCode.FAILED, f"{self.s.row.name} returned a malformed edit: {e}"
            )
            return
        if stale:
            self.s.table.fail(
                op,
                ErrorCode.FAILED,
                f"rename not applied, nothing was written by it: {', '.join(stale)} changed "
                f"while {self.s.row.name} computed it{also}; call lsp_rename again",
            )
            return
        try:
            plan = self.edits.apply(edit, rename.confine or None)
        except workspace_edit.EditError as e:
            self.s.table.fail(
                op, ErrorCode.FAILED, f"rename not applied, nothing was written: {e}{also}"
            )
            return
        reply = RenameReply(
            files=[{"path": str(p), "edits": n} for p, n in sorted(plan.edits.items()) if n],
            created=[str(p) for p in plan.created],
            renamed=[[str(a), str(b)] for a, b in plan.renamed],
            deleted=[str(p) for p in plan.deleted],
            server_edits=sorted(set(op.server_edits)),
        )
        self.s.table.done(op, reply)
