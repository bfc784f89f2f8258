"""The queries: navigation, symbols and rename - and `Session`, the whole state machine
(hierarchies are `hierarchy.py`'s).

Each op checks the server advertises the method, opens the document if needed, converts
the position to the server's encoding and sends one request; the answer becomes records
(`records.py`). A CONTENT_MODIFIED or cancelled answer is retried once (`_response_error`).
A rename is applied here, all or nothing and confined to the run's workspace, before the
call is answered; it is refused if the server's own edit (workspace/applyEdit) changed one
of its files after the request was sent, since an unversioned edit would not fit the text.
"""

from __future__ import annotations

from typing import Any

from tether.lsp import workspace_edit
from tether.lsp.documents import Document, uri_of
from tether.lsp.jsonrpc import Response
from tether.lsp.servers import sample_file
from tether.lsp.session import records
from tether.lsp.session.core import Op
from tether.lsp.session.hierarchy import HierarchySession
from tether.messages.calls import ErrorCode
from tether.messages.language_server_ops import (
    Diagnostics,
    DocumentSymbols,
    Hierarchy,
    Navigate,
    Rename,
    Status,
    Sync,
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


class Session(HierarchySession):
    """One client session with one language server process (see the package docstring)."""

    def serve(self, op: Op) -> None:
        match op.request:
            case Navigate() as nav:
                self._nav(op, nav)
            case Hierarchy() as h:
                self._hierarchy(op, h)
            case DocumentSymbols() as ds:
                self._document_symbols(op, ds)
            case WorkspaceSymbols() as ws:
                self._workspace_symbols(op, ws)
            case Diagnostics() as diag:
                self._diagnostics(op, diag)
            case Sync() as sync:
                self._sync(op, sync)
            case Rename() as rename:
                self._rename(op, rename)
            case Status():
                self._done(op, self.status())
            case _:
                self._fail(op, ErrorCode.BAD_REQUEST, f"{self.row.name} does not serve {op.op}")

    def _open_for(self, op: Op, method: str, path: str) -> Document | None:
        """`path`, open in the server, if the server offers `method`; else None (and the op
        has failed, saying why)."""
        if not self._supports(op, method):
            return None
        return self._open(op, path)

    # navigation ---------------------------------------------------------------------------
    def _nav(self, op: Op, nav: Navigate) -> None:
        method = NAV_METHODS[nav.action]
        doc = self._open_for(op, method, nav.path)
        if doc is None:
            return
        pos = self._position(doc, nav.line0, nav.char)
        params: dict[str, Any] = {"textDocument": {"uri": doc.uri}, "position": pos}
        if nav.action == "references":
            params["context"] = {"includeDeclaration": True}
        if nav.action == "code_actions":
            end = self._position(doc, nav.line0, nav.end_char)
            params = {
                "textDocument": {"uri": doc.uri},
                "range": {"start": pos, "end": end},
                "context": {"diagnostics": self._raw_diagnostics_on(doc.uri, nav.line0)},
            }
        self._request(method, params, op.deadline, op, lambda op, resp: self._on_nav(op, nav, resp))

    def _on_nav(self, op: Op, nav: Navigate, resp: Response) -> None:
        if self._response_error(op, resp, lambda: self._nav(op, nav)):
            return
        r = resp.result
        if nav.action == "hover":
            self._done(op, {"hover": records.hover_text(r)})
        elif nav.action == "code_actions":
            self._done(op, {"actions": [records.code_action(a) for a in r or []]})
        else:  # only what the host will show crosses (a references answer can be huge)
            locs = records.locations(r)
            limit = nav.limit or len(locs)
            self._done(
                op,
                {
                    "locations": locs[:limit],
                    "total": len(locs),
                    "encoding": self.caps.position_encoding,
                },
            )

    # symbols ------------------------------------------------------------------------------
    def _document_symbols(self, op: Op, ds: DocumentSymbols) -> None:
        doc = self._open_for(op, "textDocument/documentSymbol", ds.path)
        if doc is None:
            return

        def on_symbols(op: Op, resp: Response) -> None:
            if not self._response_error(op, resp, lambda: self._document_symbols(op, ds)):
                self._symbols_done(op, resp, uri_of(ds.path))

        self._request(
            "textDocument/documentSymbol",
            {"textDocument": {"uri": doc.uri}},
            op.deadline,
            op,
            on_symbols,
        )

    def _workspace_symbols(self, op: Op, ws: WorkspaceSymbols) -> None:
        if not self._supports(op, "workspace/symbol") or self._await_load(op):
            return
        if self.row.symbols_need_open and not self.docs.open:
            sample = sample_file(self.row, self.root)  # the server searches open projects
            if sample is not None:
                _doc, msgs = self.docs.ensure_open(sample)
                for m in msgs:
                    self.io.write(m)

        def on_symbols(op: Op, resp: Response) -> None:
            if not self._response_error(op, resp, lambda: self._workspace_symbols(op, ws)):
                self._symbols_done(op, resp, None)

        self._request("workspace/symbol", {"query": ws.query}, op.deadline, op, on_symbols)

    def _symbols_done(self, op: Op, resp: Response, doc_uri: str | None) -> None:
        syms = records.symbols(resp.result or [], doc_uri)
        self._done(op, {"symbols": syms, "encoding": self.caps.position_encoding})

    # rename -------------------------------------------------------------------------------
    def _rename(self, op: Op, rename: Rename) -> None:
        doc = self._open_for(op, "textDocument/rename", rename.path)
        if doc is None:
            return
        pos = self._position(doc, rename.line0, rename.char)
        td = {"uri": doc.uri}
        if self.caps.supports("textDocument/prepareRename") and not op.prepared:

            def on_prepare(op: Op, resp: Response) -> None:
                if self._response_error(op, resp, lambda: self._rename(op, rename)):
                    return
                if resp.result is None:
                    self._fail(
                        op,
                        ErrorCode.BAD_REQUEST,
                        f"{self.row.name} says the symbol at line {pos['line'] + 1} cannot be "
                        "renamed (prepareRename returned nothing): point at a name you own",
                    )
                    return
                op.prepared = True
                self._rename(op, rename)

            self._request(
                "textDocument/prepareRename",
                {"textDocument": td, "position": pos},
                op.deadline,
                op,
                on_prepare,
            )
            return
        op.epoch = self.edit_epoch  # what the server computes the rename against
        self._request(
            "textDocument/rename",
            {"textDocument": td, "position": pos, "newName": rename.new_name},
            op.deadline,
            op,
            lambda op, resp: self._on_rename(op, rename, resp),
        )

    def _on_rename(self, op: Op, rename: Rename, resp: Response) -> None:
        if self._response_error(op, resp, lambda: self._rename(op, rename)):
            return
        if not resp.result:
            self._fail(op, ErrorCode.FAILED, f"{self.row.name} returned no edit for the rename")
            return
        also = (
            f" ({self.row.name} itself changed {', '.join(op.server_edits)} during the call)"
            if op.server_edits
            else ""
        )
        # An unversioned edit computed before a server edit landed in one of its files would
        # be applied to text it was not computed for (seen with clangd: an applyTweak during
        # a rename turned `placeholder` into `placeassist`).
        since = op.epoch
        try:
            stale = sorted(
                str(p)
                for p in workspace_edit.named_paths(resp.result)
                if self.edited_at.get(p, since) > since
            )
        except (AttributeError, TypeError) as e:
            self._fail(op, ErrorCode.FAILED, f"{self.row.name} returned a malformed edit: {e}")
            return
        if stale:
            self._fail(
                op,
                ErrorCode.FAILED,
                f"rename not applied, nothing was written by it: {', '.join(stale)} changed "
                f"while {self.row.name} computed it{also}; call lsp_rename again",
            )
            return
        try:
            plan = self.apply_edit(resp.result, rename.confine or None)
        except workspace_edit.EditError as e:
            self._fail(op, ErrorCode.FAILED, f"rename not applied, nothing was written: {e}{also}")
            return
        payload: dict[str, Any] = {
            "files": [{"path": str(p), "edits": n} for p, n in sorted(plan.edits.items()) if n],
            "created": [str(p) for p in plan.created],
            "renamed": [[str(a), str(b)] for a, b in plan.renamed],
            "deleted": [str(p) for p in plan.deleted],
        }
        if op.server_edits:
            payload["server_edits"] = sorted(set(op.server_edits))
        self._done(op, payload)
