"""One client session with one language server process: the state machine behind the actor.

Sans-io: the session never reads a pipe, sleeps or starts a timer itself. Its owner (the
`LanguageServerActor`, or a plain test harness) feeds it the server's stdout bytes, the
calls, the timers it asked for, and the process's exit; the session answers through a
small `SessionIO` (write bytes, arm a timer, settle a call). So the message loop of the
actor never blocks: a call either settles at once or waits in a table keyed by our own
operation id, settled by a later response, publish, or timer (its deadline).

Operations (the `op` of a Call; paths are absolute, positions are code-point indexes
already resolved host-side from `line` + `symbol`):
    definition / type_definition / implementation / references / hover / code_actions
        {path, line0, char[, end_char]}
    document_symbols {path}          workspace_symbols {query}
    diagnostics {path[, cap]}        sync {paths[, cap]}  (after a write: sync+save+diagnose)
    rename {path, line0, char, new_name}
    status {}
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tether.actors.language_server import workspace_edit
from tether.actors.language_server.diagnostics import DEFAULT_CAP, FreshWait, Published, normalize
from tether.actors.language_server.documents import Document, Documents, path_of, uri_of
from tether.actors.language_server.jsonrpc import (
    CONTENT_MODIFIED,
    REQUEST_CANCELLED,
    Capabilities,
    JsonRpcClient,
    Notification,
    Response,
    ServerRequest,
    answer_server_request,
)
from tether.actors.language_server.positions import to_character
from tether.actors.language_server.servers import ServerRow
from tether.messages.calls import ErrorCode
from tether.protocol import FrameDecoder, FramingError

MAX_OTHER_PULLS = 4  # other open documents re-pulled after a write (files the write broke)
REPLY_MARGIN = 0.05  # s: settle a call this long before its deadline so the reply arrives

SYMBOL_KINDS = {
    1: "file", 2: "module", 3: "namespace", 4: "package", 5: "class", 6: "method",
    7: "property", 8: "field", 9: "constructor", 10: "enum", 11: "interface", 12: "function",
    13: "variable", 14: "constant", 15: "string", 16: "number", 17: "boolean", 18: "array",
    19: "object", 20: "key", 21: "null", 22: "enum member", 23: "struct", 24: "event",
    25: "operator", 26: "type parameter",
}  # fmt: skip

NAV_METHODS = {
    "definition": "textDocument/definition",
    "type_definition": "textDocument/typeDefinition",
    "implementation": "textDocument/implementation",
    "references": "textDocument/references",
    "hover": "textDocument/hover",
    "code_actions": "textDocument/codeAction",
}


class SessionIO(Protocol):
    def write(self, data: bytes) -> None: ...
    def after(self, seconds: float, tag: str) -> None: ...
    def done(self, token: Any, payload: dict[str, Any]) -> None: ...
    def error(self, token: Any, code: str, message: str) -> None: ...


@dataclass
class Op:
    oid: int
    token: Any
    op: str
    args: dict[str, Any]
    deadline: float
    retried: bool = False


def client_capabilities() -> dict[str, Any]:
    return {
        "general": {"positionEncodings": ["utf-8", "utf-16"]},
        "window": {"workDoneProgress": True, "showMessage": {}},
        "workspace": {
            "applyEdit": True,
            "configuration": True,
            "workspaceFolders": True,
            "didChangeConfiguration": {"dynamicRegistration": True},
            "didChangeWatchedFiles": {"dynamicRegistration": True},
            "symbol": {"dynamicRegistration": False},
            "workspaceEdit": {
                "documentChanges": True,
                "resourceOperations": ["create", "rename", "delete"],
                "failureHandling": "transactional",
            },
            "executeCommand": {"dynamicRegistration": False},
        },
        "textDocument": {
            "synchronization": {"dynamicRegistration": False, "didSave": True},
            "hover": {"contentFormat": ["markdown", "plaintext"]},
            "definition": {"linkSupport": True},
            "typeDefinition": {"linkSupport": True},
            "implementation": {"linkSupport": True},
            "references": {},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
            "codeAction": {
                "codeActionLiteralSupport": {
                    "codeActionKind": {
                        "valueSet": [
                            "",
                            "quickfix",
                            "refactor",
                            "refactor.extract",
                            "refactor.inline",
                            "refactor.rewrite",
                            "source",
                            "source.organizeImports",
                            "source.fixAll",
                        ]  # fmt: skip
                    }
                },
                "isPreferredSupport": True,
                "dataSupport": True,
            },
            "rename": {"prepareSupport": True},
            "publishDiagnostics": {"versionSupport": True, "relatedInformation": False},
            "diagnostic": {"dynamicRegistration": True, "relatedDocumentSupport": True},
        },
    }


class Session:
    def __init__(
        self,
        row: ServerRow,
        root: Path,
        io: SessionIO,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.row, self.root, self.io, self.now = row, root, io, now
        self.rpc = JsonRpcClient()
        self.decoder = FrameDecoder()
        self.caps = Capabilities()
        self.docs = Documents(self.caps, lambda p: row.language_of(p))
        self.state = "starting"  # starting | registering | ready | failed | exited
        self.error_text = ""
        self.started_at = now()
        self.ready_at: float | None = None
        self.progress: dict[Any, str] = {}  # active $/progress token -> title
        self.messages: deque[str] = deque(maxlen=5)  # last showMessage/logMessage errors
        self.published: dict[str, Published] = {}
        self.changed_at: dict[str, float] = {}  # uri -> when we last sent a change/open
        # uri -> (resultId, items, document version the pull was sent for)
        self.pull_cache: dict[str, tuple[str | None, list, int]] = {}
        self.carry: dict[str, tuple[list | None, list]] = {}  # other files changed since a reply
        self.other_pulls: set[int] = set()  # request ids of pulls for not-written files
        self._others_paths: list[Path] = []  # written since the last re-check of importers
        self._others_inflight: list[Path] = []
        self._others_queue: list[str] = []  # importers still to re-check, one at a time
        self._others_gen = 0
        self.ops: dict[int, Op] = {}
        self.queued: list[Op] = []
        self.waits: dict[int, tuple[Op, FreshWait]] = {}
        self._next_oid = 1
        self._armed: float | None = None
        self.warm = not row.warmup_progress  # see ServerRow.warmup_progress
        self._warming = False
        self._warm_token: Any = None
        self.held: list[Op] = []

    # --- lifecycle ------------------------------------------------------------------------
    def start(self, pid: int | None = None) -> None:
        params = {
            "processId": pid if pid is not None else os.getpid(),
            "clientInfo": {"name": "tether", "version": "0.1.0"},
            "rootUri": uri_of(self.root),
            "rootPath": str(self.root),
            "workspaceFolders": self._folders(),
            "capabilities": client_capabilities(),
            "initializationOptions": dict(self.row.init_options) or None,
        }
        self._request("initialize", params, self.now() + self.row.startup_timeout, None,
                      self._on_initialized)  # fmt: skip

    def _folders(self) -> list[dict[str, str]]:
        return [{"uri": uri_of(self.root), "name": self.root.name or str(self.root)}]

    def _on_initialized(self, op: Op | None, resp: Response) -> None:
        if resp.error:
            self._fail_start(f"initialize failed: {resp.error.get('message', resp.error)}")
            return
        self.caps.static = dict((resp.result or {}).get("capabilities") or {})
        self.io.write(self.rpc.notify("initialized", {}))
        if self.row.settings:
            self.io.write(
                self.rpc.notify(
                    "workspace/didChangeConfiguration", {"settings": dict(self.row.settings)}
                )
            )
        if self.row.await_pull_registration and not self._pull_supported():
            self.state = "registering"
            self.io.after(self.row.await_pull_registration, "lsp:registration")
            return
        self._become_ready()

    def _become_ready(self) -> None:
        self.state = "ready"
        self.ready_at = self.now()
        queued, self.queued = self.queued, []
        for op in queued:
            self._dispatch(op)

    def _fail_start(self, why: str) -> None:
        self.state = "failed"
        self.error_text = why
        queued, self.queued = self.queued, []
        for op in queued:
            self._fail(op, ErrorCode.FAILED, f"{self.row.name} did not start: {why}")

    def shutdown_bytes(self) -> bytes:
        """Polite goodbye (the owner kills the process tree after a short grace anyway)."""
        return self.rpc.notify("exit", None)

    def on_exit(self, returncode: int | None) -> list[tuple[Any, str]]:
        """The process died: every outstanding call gets RESOURCE_DIED; returns (token, op)."""
        self.state = "exited"
        gone = [(op.token, op.op) for op in self.ops.values()]
        tail = f" (exit code {returncode})" if returncode is not None else ""
        for op in list(self.ops.values()):
            self._fail(
                op,
                ErrorCode.RESOURCE_DIED,
                f"{self.row.name} for {self.root} died while answering {op.op}{tail}; "
                "it is being restarted - call again",
            )
        self.rpc.drain()
        self.waits.clear()
        return gone

    # --- input ----------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        try:
            msgs = self.decoder.feed(data)
        except FramingError as e:
            self.state = "failed"
            self.error_text = f"corrupt output from {self.row.name}: {e}"
            for op in list(self.ops.values()):
                self._fail(op, ErrorCode.FAILED, self.error_text)
            return
        for msg in msgs:
            ev = self.rpc.receive(msg)
            if isinstance(ev, Response):
                ctx = ev.context
                if ctx is not None:
                    op, cont = ctx
                    if op is None or op.oid in self.ops or op.op == "initialize":
                        cont(op, ev)
            elif isinstance(ev, ServerRequest):
                self._on_server_request(ev)
            elif isinstance(ev, Notification):
                self._on_notification(ev)

    def _on_server_request(self, req: ServerRequest) -> None:
        if req.method == "client/registerCapability" and self.state == "registering":
            self.caps.register(req.params)
            if self._pull_supported():
                self._become_ready()
        if req.method == "workspace/diagnostic/refresh":
            for op, w in list(self.waits.values()):
                if w.pull and not w.complete:
                    self._pull(op, w, list(w.pending))
        self.io.write(
            answer_server_request(
                req,
                caps=self.caps,
                settings=self.row.settings,
                workspace_folders=self._folders(),
                apply_edit=self._apply_edit_from_server,
                on_progress_create=lambda token: None,
            )
        )

    def _on_notification(self, n: Notification) -> None:
        p = n.params or {}
        if n.method == "textDocument/publishDiagnostics":
            uri, version, items = p.get("uri", ""), p.get("version"), p.get("diagnostics") or []
            now = self.now()
            prev = self.published.get(uri)
            self.published[uri] = Published(version, items, now)
            if not any(uri in w.targets for _, w in self.waits.values()) and not any(
                w.before_known for _, w in self.waits.values()
            ):
                self._carry(uri, prev.items if prev else None, items)
            for op, w in list(self.waits.values()):
                if w.on_publish(uri, version, items, now):
                    self.io.after(self.row.push_quiet_window, f"lsp:quiet:{op.oid}")
                self._maybe_finish(op, w)
        elif n.method == "$/progress":
            v = p.get("value") or {}
            kind = v.get("kind")
            token = p.get("token")
            if kind == "begin":
                title = str(v.get("title") or "working")
                self.progress[token] = title
                if not self.warm and any(title.startswith(t) for t in self.row.warmup_progress):
                    self._warm_token = token
            elif kind == "end":
                self.progress.pop(token, None)
                if not self.warm and self._warm_token is not None and token == self._warm_token:
                    self._warmed()
        elif n.method in ("window/showMessage", "window/logMessage"):
            if int(p.get("type") or 4) <= 1:
                self.messages.append(str(p.get("message", ""))[:300])

    def _warmed(self) -> None:
        if self.warm:
            return
        self.warm = True
        held, self.held = self.held, []
        for op in held:
            if op.oid in self.ops:
                self._dispatch(op)

    def on_timer(self, tag: str) -> None:
        if tag.startswith("lsp:others:"):
            if int(tag.rsplit(":", 1)[1]) == self._others_gen and self.state == "ready":
                self._pull_others()
            return
        if tag == "lsp:warm-window":
            if self._warm_token is None:
                self._warmed()  # no initial progress began: nothing to wait for
            return
        if tag == "lsp:warm-cap":
            self._warmed()
            return
        if tag == "lsp:registration":
            if self.state == "registering":
                self._become_ready()  # no pull registration came: diagnostics by publish
            return
        if tag == "lsp:deadline":
            self._armed = None
            now = self.now()
            for p in self.rpc.expired(now):
                self.io.write(self.rpc.notify("$/cancelRequest", {"id": p.id}))
                ctx = p.context
                op = ctx[0] if ctx else None
                if p.method == "initialize":
                    self._fail_start(
                        f"no answer to initialize within {self.row.startup_timeout:.0f} s"
                    )
                elif op is not None and op.oid in self.ops:
                    self._fail(
                        op,
                        ErrorCode.DEADLINE,
                        f"{self.row.name} did not answer {p.method} in time "
                        f"({self._indexing_hint()}); retry, or call lsp status",
                    )
            for op in [o for o in self.ops.values() if o.deadline <= now]:
                why = (
                    f"{self.row.name} is still starting ({self._indexing_hint()})"
                    if op in self.held or op in self.queued
                    else "it did not finish"
                )
                self._fail(op, ErrorCode.DEADLINE, f"{op.op} timed out: {why}; retry shortly")
            self._arm()
        elif tag.startswith(("lsp:quiet:", "lsp:cap:", "lsp:grace:")):
            oid = int(tag.rsplit(":", 1)[1])
            entry = self.waits.get(oid)
            if entry is None:
                return
            op, w = entry
            if tag.startswith("lsp:quiet:"):
                w.on_quiet(self.now(), self.row.push_quiet_window)
                self._maybe_finish(op, w)
            else:  # the hard cap, or the grace for other files after the written ones
                self._finish_wait(op, w)

    def _indexing_hint(self) -> str:
        if self.progress:
            return "it is still indexing: " + ", ".join(sorted(set(self.progress.values())))
        return "it may be busy or stuck"

    # --- calls ----------------------------------------------------------------------------
    def handle(self, op_name: str, args: dict[str, Any], token: Any, deadline: float) -> None:
        op = Op(self._next_oid, token, op_name, dict(args), deadline - REPLY_MARGIN)
        self._next_oid += 1
        self.ops[op.oid] = op
        if op.deadline <= self.now():
            self._fail(op, ErrorCode.DEADLINE, f"{op_name} arrived after its deadline")
        elif self.state in ("starting", "registering") and op_name != "status":
            self.queued.append(op)
            if self._armed is None or op.deadline < self._armed:
                self._arm_at(op.deadline)
        elif self.state in ("failed", "exited") and op_name != "status":
            self._fail(op, ErrorCode.FAILED, f"{self.row.name} is not usable: {self.error_text}")
        else:
            self._dispatch(op)

    def _dispatch(self, op: Op) -> None:
        if not self.warm and op.op != "status":
            self.held.append(op)
            if self._armed is None or op.deadline < self._armed:
                self._arm_at(op.deadline)
            if not self._warming and "path" in op.args:
                self._warming = True
                doc, msgs = self.docs.ensure_open(Path(op.args["path"]))
                for m in msgs:
                    self.io.write(m)
                self.io.after(self.row.warmup_window, "lsp:warm-window")
                self.io.after(self.row.startup_timeout, "lsp:warm-cap")
            elif not self._warming:
                self.io.after(self.row.warmup_window, "lsp:warm-window")
                self._warming = True
            return
        try:
            getattr(self, f"_op_{op.op}", self._op_unknown)(op)
        except (KeyError, TypeError, ValueError) as e:
            self._fail(op, ErrorCode.BAD_REQUEST, f"bad arguments for {op.op}: {e}")

    def _op_unknown(self, op: Op) -> None:
        known = sorted(m[4:] for m in dir(self) if m.startswith("_op_") and m != "_op_unknown")
        self._fail(op, ErrorCode.BAD_REQUEST, f"unknown op {op.op!r}; known: {', '.join(known)}")

    def _done(self, op: Op, payload: dict[str, Any]) -> None:
        if self.ops.pop(op.oid, None) is not None:
            self.io.done(op.token, payload)

    def _fail(self, op: Op, code: str, message: str) -> None:
        if self.ops.pop(op.oid, None) is not None:
            self.waits.pop(op.oid, None)
            if op in self.queued:
                self.queued.remove(op)
            if op in self.held:
                self.held.remove(op)
            self.io.error(op.token, code, message)

    def _request(
        self,
        method: str,
        params: Any,
        deadline: float,
        op: Op | None,
        cont: Callable[[Any, Response], None],
    ) -> int:
        rid, data = self.rpc.request(method, params, deadline=deadline, context=(op, cont))
        self.io.write(data)
        if self._armed is None or deadline < self._armed:
            self._arm_at(deadline)
        return rid

    def _arm_at(self, when: float) -> None:
        self._armed = when
        self.io.after(max(0.0, when - self.now()) + 0.001, "lsp:deadline")

    def _arm(self) -> None:
        nxt = [d for d in [self.rpc.next_deadline()] if d is not None]
        nxt += [o.deadline for o in self.ops.values()]
        if nxt:
            self._arm_at(min(nxt))

    def _open(self, op: Op) -> Document | None:
        path = Path(op.args["path"])
        doc, msgs = self.docs.ensure_open(path)
        for m in msgs:
            self.io.write(m)
        if msgs:
            self.changed_at[uri_of(path)] = self.now()
        if doc is None:
            self._fail(op, ErrorCode.BAD_REQUEST, f"cannot read {path}: no such file")
        return doc

    def _position(self, doc: Document, line0: int, char: int) -> dict[str, int]:
        lines = doc.lines
        text = lines[line0] if 0 <= line0 < len(lines) else ""
        return {"line": line0, "character": to_character(text, char, self.caps.position_encoding)}

    def _supports(self, op: Op, method: str) -> bool:
        if self.caps.supports(method):
            return True
        self._fail(
            op,
            ErrorCode.UNAVAILABLE,
            f"{self.row.name} does not offer {method} (not in its advertised capabilities)",
        )
        return False

    def _response_error(self, op: Op, resp: Response, retry: Callable[[], None]) -> bool:
        if not resp.error:
            return False
        code = resp.error.get("code")
        if code in (CONTENT_MODIFIED, REQUEST_CANCELLED) and not op.retried:
            op.retried = True  # the document changed under the request: one transparent retry
            retry()
            return True
        self._fail(
            op,
            ErrorCode.FAILED,
            f"{self.row.name} answered {resp.method} with an error: "
            f"{resp.error.get('message', '')} (code {code})",
        )
        return True

    # navigation ---------------------------------------------------------------------------
    def _nav(self, op: Op) -> None:
        method = NAV_METHODS[op.op]
        if not self._supports(op, method):
            return
        doc = self._open(op)
        if doc is None:
            return
        pos = self._position(doc, int(op.args["line0"]), int(op.args["char"]))
        params: dict[str, Any] = {"textDocument": {"uri": doc.uri}, "position": pos}
        if op.op == "references":
            params["context"] = {"includeDeclaration": True}
        if op.op == "code_actions":
            end = self._position(doc, int(op.args["line0"]), int(op.args.get("end_char", 0)))
            line0 = int(op.args["line0"])
            params = {
                "textDocument": {"uri": doc.uri},
                "range": {"start": pos, "end": end},
                "context": {"diagnostics": self._raw_diagnostics_on(doc.uri, line0)},
            }
        self._request(method, params, op.deadline, op, self._on_nav)

    _op_definition = _op_type_definition = _op_implementation = _nav
    _op_references = _op_hover = _op_code_actions = _nav

    def _on_nav(self, op: Op, resp: Response) -> None:
        if self._response_error(op, resp, lambda: self._nav(op)):
            return
        r = resp.result
        if op.op == "hover":
            self._done(op, {"hover": hover_text(r)})
        elif op.op == "code_actions":
            self._done(op, {"actions": [self._action_record(a) for a in r or []]})
        else:
            self._done(
                op, {"locations": self._locations(r), "encoding": self.caps.position_encoding}
            )

    def _raw_diagnostics_on(self, uri: str, line0: int) -> list[dict]:
        items = self.pull_cache.get(uri, (None, [], 0))[1] or (
            self.published[uri].items if uri in self.published else []
        )
        out = []
        for d in items:
            r = d.get("range") or {}
            if r.get("start", {}).get("line", -1) <= line0 <= r.get("end", {}).get("line", -1):
                out.append(d)
        return out

    def _locations(self, r: Any) -> list[dict[str, Any]]:
        if r is None:
            return []
        items = r if isinstance(r, list) else [r]
        out = []
        for loc in items:
            if "targetUri" in loc:  # LocationLink
                uri = loc["targetUri"]
                rng = loc.get("targetSelectionRange") or loc.get("targetRange") or {}
            else:
                uri, rng = loc.get("uri", ""), loc.get("range") or {}
            out.append(self._record(uri, rng))
        return out

    def _record(self, uri: str, rng: dict[str, Any]) -> dict[str, Any]:
        """A location as (path, 1-based lines, characters in the negotiated encoding).

        Characters stay in the server's units: converting them to code points needs the
        line's text, which the host reads anyway for the record's `text` (reading every
        referenced file here too doubled the cost of a large `references`)."""
        s, e = rng.get("start") or {}, rng.get("end") or {}
        sl = int(s.get("line", 0))
        return {
            "path": str(path_of(uri)),
            "line": sl + 1,
            "character": int(s.get("character", 0)),
            "end_line": int(e.get("line", sl)) + 1,
            "end_character": int(e.get("character", 0)),
        }

    def _action_record(self, a: dict[str, Any]) -> dict[str, Any]:
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

    # symbols ------------------------------------------------------------------------------
    def _op_document_symbols(self, op: Op) -> None:
        if not self._supports(op, "textDocument/documentSymbol"):
            return
        doc = self._open(op)
        if doc is None:
            return
        self._request(
            "textDocument/documentSymbol",
            {"textDocument": {"uri": doc.uri}},
            op.deadline,
            op,
            self._on_symbols,
        )

    def _op_workspace_symbols(self, op: Op) -> None:
        if not self._supports(op, "workspace/symbol"):
            return
        self._request(
            "workspace/symbol", {"query": str(op.args["query"])}, op.deadline, op, self._on_symbols
        )

    def _on_symbols(self, op: Op, resp: Response) -> None:
        retry = (
            (lambda: self._op_document_symbols(op))
            if op.op == "document_symbols"
            else (lambda: self._op_workspace_symbols(op))
        )
        if self._response_error(op, resp, retry):
            return
        out: list[dict[str, Any]] = []

        def walk(items: list, container: str, uri: str | None) -> None:
            for s in items or []:
                if "location" in s:  # SymbolInformation / WorkspaceSymbol
                    loc = s["location"]
                    rec = self._record(loc.get("uri", ""), loc.get("range") or {})
                    cont = s.get("containerName") or ""
                else:  # DocumentSymbol (hierarchical)
                    rec = self._record(uri or "", s.get("selectionRange") or s.get("range") or {})
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

        doc_uri = uri_of(op.args["path"]) if op.op == "document_symbols" else None
        walk(resp.result or [], "", doc_uri)
        self._done(op, {"symbols": out, "encoding": self.caps.position_encoding})

    # diagnostics --------------------------------------------------------------------------
    def _op_diagnostics(self, op: Op) -> None:
        doc = self._open(op)
        if doc is None:
            return
        self._diagnose(op, [doc], float(op.args.get("cap") or 10.0), others=False)

    def _op_sync(self, op: Op) -> None:
        # a new write makes the re-checks of other files for the previous one stale, and a
        # single-threaded server would answer this write only after them: cancel them
        if self.other_pulls:  # cancelled re-checks are redone after this write
            for rid in list(self.other_pulls):
                self.io.write(self.rpc.cancel(rid))
            self.other_pulls.clear()
            self._others_paths.extend(
                p for p in self._others_inflight if p not in self._others_paths
            )
        self._others_queue = []
        self._others_gen += 1  # a re-check scheduled by the previous write is superseded
        paths = [Path(p) for p in op.args["paths"]]
        docs, msgs = self.docs.sync(paths, {Path(p) for p in op.args.get("created") or []})
        now = self.now()
        for m in msgs:
            self.io.write(m)
        for d in docs:
            self.changed_at[d.uri] = now
        deleted = [str(p) for p in paths if uri_of(p) not in {d.uri for d in docs}]
        op.args["deleted"] = deleted
        self._diagnose(op, docs, float(op.args.get("cap") or DEFAULT_CAP), others=True)

    def _pull_supported(self) -> bool:
        return self.caps.supports("textDocument/diagnostic")

    def _diagnose(self, op: Op, docs: list[Document], cap: float, others: bool) -> None:
        now = self.now()
        w = FreshWait(
            op.oid,
            op.token,
            {d.uri: d.version for d in docs},
            now,
            min(now + cap, op.deadline),
            self._pull_supported(),
        )
        self.waits[op.oid] = (op, w)
        if others and not w.pull:
            w.before = {u: p.items for u, p in self.published.items() if u not in w.targets}
            w.before_known = True
        if w.pull:
            targets = [d.uri for d in docs]
            self._pull(op, w, targets)
        else:
            for d in docs:  # already fresh from an earlier publish?
                pub = self.published.get(d.uri)
                if pub is None:
                    continue
                if pub.version is not None and pub.version >= d.version:
                    w.fresh[d.uri] = pub.items
                elif (
                    pub.version is None
                    and pub.at >= self.changed_at.get(d.uri, 0.0)
                    and now - pub.at >= self.row.push_quiet_window
                ):
                    w.fresh[d.uri] = pub.items
            if op.op == "diagnostics" and self.row.nudge_for_diagnostics:
                for d in docs:
                    if d.uri not in w.fresh:
                        self.io.write(self.docs.touch(d))
                        self.changed_at[d.uri] = now
                        w.targets[d.uri] = d.version
        if not self._maybe_finish(op, w):
            self.io.after(max(0.0, w.cap_at - now), f"lsp:cap:{op.oid}")

    def _dependents(self, paths: list[Path]) -> list[str]:
        """Open documents a write to `paths` may have broken, most recently used first:
        those with an import-like line (import / from / #include / require / use / export
        ... from) naming a written file's module (its stem; the package for __init__)."""
        stems = set()
        for p in paths:
            stems.add(p.parent.name if p.stem == "__init__" else p.stem)
        stems.discard("")
        if not stems:
            return []
        words = "|".join(re.escape(st) for st in sorted(stems))
        pattern = re.compile(
            rf"^\s*(?:from|import|#\s*include|require|use|export)\b.*\b(?:{words})\b", re.M
        )
        written = {uri_of(p) for p in paths}
        return [
            u
            for u in reversed(self.docs.open)
            if u not in written and pattern.search(self.docs.open[u].text)
        ]

    def _schedule_others(self, paths: list[Path]) -> None:
        """After a write was answered: re-check the open files that import what was written,
        once the server has been left alone for `others_delay` (a further write in between
        supersedes this one). Their new diagnostics ride on the next write's answer."""
        self._others_paths.extend(p for p in paths if p not in self._others_paths)
        self._others_gen += 1
        self.io.after(self.row.others_delay, f"lsp:others:{self._others_gen}")

    def _pull_others(self) -> None:
        """Re-check importers one file at a time, each only while no write came in since
        (a single-threaded server does not stop mid-file for a $/cancelRequest, so a batch
        could hold the next write's answer behind several whole-file checks)."""
        if not self._others_queue:
            paths, self._others_paths = self._others_paths, []
            self._others_inflight = paths
            self._others_queue = self._dependents(paths)[:MAX_OTHER_PULLS]
        if not self._others_queue:
            return
        uri = self._others_queue.pop(0)
        gen = self._others_gen
        params: dict[str, Any] = {"textDocument": {"uri": uri}}
        ident = self._pull_identifier()
        if ident:
            params["identifier"] = ident
        prev, before, _v = self.pull_cache.get(uri, (None, None, 0))
        if prev:
            params["previousResultId"] = prev
        version = self._version(uri)

        def cont(_op: Any, resp: Response) -> None:
            self.other_pulls.discard(resp.id)
            if not resp.error:
                items = self._report_items(uri, resp.result or {}, before, version)
                self._carry(uri, before, items)
            if gen == self._others_gen and self.state == "ready":
                self._pull_others()  # next importer, still idle

        rid = self._request("textDocument/diagnostic", params, self.now() + 30.0, None, cont)
        self.other_pulls.add(rid)

    def _pull_identifier(self) -> str | None:
        ident = None
        for m, o in self.caps.dynamic.values():
            if m == "textDocument/diagnostic" and isinstance(o, dict):
                ident = o.get("identifier")
        dp = self.caps.static.get("diagnosticProvider")
        if isinstance(dp, dict) and dp.get("identifier"):
            ident = dp["identifier"]
        return ident

    def _pull(self, op: Op, w: FreshWait, uris: list[str]) -> None:
        ident = self._pull_identifier()
        oid = op.oid
        for uri in uris:
            params: dict[str, Any] = {"textDocument": {"uri": uri}}
            if ident:
                params["identifier"] = ident
            prev, prev_items, _v = self.pull_cache.get(uri, (None, None, 0))
            if prev:
                params["previousResultId"] = prev
            version = self._version(uri)
            target = uri in w.targets
            if not target:
                w.before[uri] = prev_items  # None: never seen, so no judgement possible
            w.outstanding_pulls += 1

            def cont(
                _op: Any,
                resp: Response,
                uri: str = uri,
                target: bool = target,
                sent: Any = prev_items,
                v: int = version,
            ) -> None:
                w.outstanding_pulls -= 1
                self.other_pulls.discard(resp.id)
                live = oid in self.waits
                if resp.error:
                    code = resp.error.get("code")
                    if target and live and code in (CONTENT_MODIFIED, REQUEST_CANCELLED):
                        self._pull(op, w, [uri])  # server-side cancel: pull again
                        return
                    if target:
                        w.fresh[uri] = []  # the server refused; report none rather than hang
                else:
                    r = resp.result or {}
                    items = self._report_items(uri, r, sent, v)
                    if target:
                        w.fresh[uri] = items
                    elif live:
                        w.others[uri] = items
                    else:  # arrived after the call was answered: tell the next write
                        self._carry(uri, w.before.get(uri), items)
                    for rel_uri, rel in (r.get("relatedDocuments") or {}).items():
                        if rel_uri not in w.targets:
                            rel_items = self._report_items(rel_uri, rel, None, -1)
                            if live:
                                w.others[rel_uri] = rel_items
                if live:
                    self._maybe_finish(op, w)

            # the other documents' pulls outlive the call (their answers are carried to the
            # next write), so they are not tied to the op: context op None
            # the request may outlive the cap (the cap answers "pending", the answer is late)
            rid = self._request(
                "textDocument/diagnostic", params, op.deadline, op if target else None, cont
            )
            if not target:
                self.other_pulls.add(rid)

    def _carry(self, uri: str, before: list | None, after: list) -> None:
        """Diagnostics of another file that changed after a write was answered."""
        if uri in self.carry:
            before = self.carry[uri][0]
        if before != after:
            self.carry[uri] = (before, after)
        else:
            self.carry.pop(uri, None)

    def _report_items(self, uri: str, r: dict[str, Any], sent: list | None, version: int) -> list:
        """Items of a pull answer. "unchanged" means: the same as the result whose id we SENT
        (not whatever the cache holds now: a late answer for an older version may have
        landed in between). The cache keeps the newest version's result only."""
        if r.get("kind") == "unchanged":
            return list(sent or [])
        items = r.get("items") or []
        cached = self.pull_cache.get(uri)
        if cached is None or version >= cached[2]:
            self.pull_cache[uri] = (r.get("resultId"), items, version)
        return items

    def _version(self, uri: str) -> int:
        doc = self.docs.open.get(uri)
        return doc.version if doc else 0

    def _maybe_finish(self, op: Op, w: FreshWait) -> bool:
        if op.oid not in self.waits:
            return False
        if w.complete:
            self._finish_wait(op, w)
            return True
        if w.targets_done and not w.grace_armed:
            # the written files are fresh; other files get a short grace, then are carried
            w.grace_armed = True
            self.io.after(self.row.others_grace, f"lsp:grace:{op.oid}")
        return False

    def _finish_wait(self, op: Op, w: FreshWait) -> None:
        self.waits.pop(op.oid, None)
        enc = self.caps.position_encoding
        line = self.docs.line

        def norm(u: str, items: list | None) -> list | None:
            return None if items is None else normalize(path_of(u), items, line, enc)

        files = {str(path_of(u)): norm(u, items) for u, items in w.fresh.items()}
        changed: dict[str, tuple[list | None, list]] = {}
        if op.op == "sync" and w.pull:
            self._schedule_others([path_of(u) for u in w.targets])
        if op.op == "sync":
            changed.update(self.carry)
            self.carry.clear()
        for u, items in w.others.items():
            if u not in w.targets:
                before = changed[u][0] if u in changed else w.before.get(u)
                changed[u] = (before, items)
        others = {
            str(path_of(u)): {"before": norm(u, b), "after": norm(u, a)}
            for u, (b, a) in changed.items()
            if u not in w.targets and a != b
        }
        self._done(
            op,
            {
                "files": files,
                "others": others,
                "pending": [str(path_of(u)) for u in w.pending],
                "deleted": op.args.get("deleted", []),
                "waited": round(self.now() - w.started, 4),
                "mode": "pull" if w.pull else "push",
            },
        )

    # rename / workspace edits ---------------------------------------------------------------
    def _op_rename(self, op: Op) -> None:
        if not self._supports(op, "textDocument/rename"):
            return
        doc = self._open(op)
        if doc is None:
            return
        pos = self._position(doc, int(op.args["line0"]), int(op.args["char"]))
        td = {"uri": doc.uri}
        if self.caps.supports("textDocument/prepareRename") and not op.args.get("_prepared"):

            def on_prepare(op: Op, resp: Response) -> None:
                if self._response_error(op, resp, lambda: self._op_rename(op)):
                    return
                if resp.result is None:
                    self._fail(
                        op,
                        ErrorCode.BAD_REQUEST,
                        f"{self.row.name} says the symbol at line {pos['line'] + 1} cannot be "
                        "renamed (prepareRename returned nothing): point at a name you own",
                    )
                    return
                op.args["_prepared"] = True
                self._op_rename(op)

            self._request(
                "textDocument/prepareRename",
                {"textDocument": td, "position": pos},
                op.deadline,
                op,
                on_prepare,
            )
            return
        self._request(
            "textDocument/rename",
            {"textDocument": td, "position": pos, "newName": str(op.args["new_name"])},
            op.deadline,
            op,
            self._on_rename,
        )

    def _on_rename(self, op: Op, resp: Response) -> None:
        if self._response_error(op, resp, lambda: self._op_rename(op)):
            return
        if not resp.result:
            self._fail(op, ErrorCode.FAILED, f"{self.row.name} returned no edit for the rename")
            return
        try:
            plan = self.apply_edit(resp.result, op.args.get("confine"))
        except workspace_edit.EditError as e:
            self._fail(op, ErrorCode.FAILED, f"rename not applied, nothing was written: {e}")
            return
        self._done(
            op,
            {
                "files": [{"path": str(p), "edits": n} for p, n in sorted(plan.edits.items()) if n],
                "created": [str(p) for p in plan.created],
                "renamed": [[str(a), str(b)] for a, b in plan.renamed],
                "deleted": [str(p) for p in plan.deleted],
            },
        )

    def apply_edit(
        self, edit: dict[str, Any], confine: list[str] | None = None
    ) -> workspace_edit.Plan:
        """Apply a WorkspaceEdit all or nothing and re-sync every touched file.

        `confine`: directories every touched path must be inside (the run's workspace);
        an edit reaching outside is refused whole (DESIGN.md invariant 5).
        """

        def version_of(p: Path) -> int | None:
            d = self.docs.get(p)
            return d.version if d else None

        plan = workspace_edit.plan(edit, self.caps.position_encoding, version_of)
        if confine:
            roots = [Path(c).resolve() for c in confine]
            for p in plan.final:
                rp = p.resolve()
                if not any(rp == r or r in rp.parents for r in roots):
                    raise workspace_edit.EditError(
                        f"the edit would change {p}, outside the workspace"
                    )
        workspace_edit.commit(plan)
        touched = [p for p in plan.touched if p in plan.final]
        _docs, msgs = self.docs.sync(touched, set(plan.created) | {b for _, b in plan.renamed})
        now = self.now()
        for m in msgs:
            self.io.write(m)
        for p in touched:
            self.changed_at[uri_of(p)] = now
        return plan

    def _apply_edit_from_server(self, edit: Any) -> tuple[bool, str]:
        try:
            self.apply_edit(edit)
        except workspace_edit.EditError as e:
            return False, str(e)
        return True, ""

    # status -------------------------------------------------------------------------------
    def _op_status(self, op: Op) -> None:
        self._done(op, self.status())

    def status(self) -> dict[str, Any]:
        state = "starting" if self.state == "registering" else self.state
        if state == "ready" and self.progress:
            state = "indexing"
        return {
            "server": self.row.name,
            "root": str(self.root),
            "state": state,
            "indexing": sorted(set(self.progress.values())),
            "error": self.error_text,
            "uptime": round(self.now() - self.started_at, 3),
            "encoding": self.caps.position_encoding,
            "diagnostics_mode": "pull" if self._pull_supported() else "push",
            "open_documents": len(self.docs.open),
            "pending_requests": len(self.rpc.pending),
            "messages": list(self.messages),
        }


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
