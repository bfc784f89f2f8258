"""JSON-RPC 2.0 client state for one language server: ids, pending requests, routing.

Sans-io like `tether.protocol`: methods return the bytes to write and the events decoded
from what was read; nothing here touches a pipe or a clock of its own (callers pass `now`).

Routing rule (DESIGN.md "Protocol lessons"): a message with a `method` is a request or a
notification FROM the server - even when it also carries an `id`, which may collide with one
of our own pending ids (the id spaces of the two directions are independent). Only a message
without `method` is a response to us, matched by `id`. A response with an unknown id is a
late answer to a request whose deadline already passed; it is dropped.

The second half answers the server->client requests every server here sends
(`workspace/configuration`, `window/workDoneProgress/create`, `client/registerCapability`,
`client/unregisterCapability`, `workspace/applyEdit`, `window/showMessageRequest`,
`workspace/workspaceFolders`) and keeps the capability view (static + dynamically
registered) used to never send a request the server did not advertise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tether.protocol import encode

# JSON-RPC / LSP error codes we send or recognise.
METHOD_NOT_FOUND = -32601
REQUEST_CANCELLED = -32800
CONTENT_MODIFIED = -32801


@dataclass
class Pending:
    id: int
    method: str
    deadline: float
    context: Any = None  # opaque to this module: the caller's continuation


@dataclass(frozen=True)
class Response:
    id: int
    method: str
    result: Any
    error: Mapping[str, Any] | None
    context: Any


@dataclass(frozen=True)
class Notification:
    method: str
    params: Any


@dataclass(frozen=True)
class ServerRequest:
    id: int | str
    method: str
    params: Any


Event = Response | Notification | ServerRequest


@dataclass
class JsonRpcClient:
    next_id: int = 1
    pending: dict[int, Pending] = field(default_factory=dict)
    late_responses: int = 0  # answers that arrived after their caller gave up

    def request(
        self, method: str, params: Any, *, deadline: float, context: Any = None
    ) -> tuple[int, bytes]:
        rid = self.next_id
        self.next_id += 1
        self.pending[rid] = Pending(rid, method, deadline, context)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        return rid, encode(msg)

    @staticmethod
    def notify(method: str, params: Any) -> bytes:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        return encode(msg)

    @staticmethod
    def respond(rid: int | str, result: Any) -> bytes:
        return encode({"jsonrpc": "2.0", "id": rid, "result": result})

    @staticmethod
    def respond_error(rid: int | str, code: int, message: str) -> bytes:
        return encode({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    def cancel(self, rid: int) -> bytes:
        """Forget a pending request and tell the server ($/cancelRequest)."""
        self.pending.pop(rid, None)
        return self.notify("$/cancelRequest", {"id": rid})

    def receive(self, msg: Any) -> Event | None:
        if not isinstance(msg, dict):
            return None
        method = msg.get("method")
        if isinstance(method, str):  # route on method BEFORE id
            if "id" in msg and msg["id"] is not None:
                return ServerRequest(msg["id"], method, msg.get("params"))
            return Notification(method, msg.get("params"))
        rid = msg.get("id")
        p = self.pending.pop(rid, None) if isinstance(rid, int) else None
        if p is None:
            self.late_responses += 1
            return None
        return Response(p.id, p.method, msg.get("result"), msg.get("error"), p.context)

    def expired(self, now: float) -> list[Pending]:
        """Pop every pending request whose deadline has passed."""
        gone = [p for p in self.pending.values() if p.deadline <= now]
        for p in gone:
            del self.pending[p.id]
        return gone

    def next_deadline(self) -> float | None:
        return min((p.deadline for p in self.pending.values()), default=None)

    def drain(self) -> list[Pending]:
        """Pop every pending request (the server died)."""
        gone = list(self.pending.values())
        self.pending.clear()
        return gone


# --- capabilities ------------------------------------------------------------------------

# request method -> the server capability that advertises it (LSP 3.17 ServerCapabilities)
CAPABILITY_OF: dict[str, str] = {
    "textDocument/definition": "definitionProvider",
    "textDocument/typeDefinition": "typeDefinitionProvider",
    "textDocument/implementation": "implementationProvider",
    "textDocument/references": "referencesProvider",
    "textDocument/hover": "hoverProvider",
    "textDocument/documentSymbol": "documentSymbolProvider",
    "workspace/symbol": "workspaceSymbolProvider",
    "textDocument/codeAction": "codeActionProvider",
    "textDocument/rename": "renameProvider",
    "textDocument/diagnostic": "diagnosticProvider",
    "workspace/diagnostic": "diagnosticProvider",
    "workspace/executeCommand": "executeCommandProvider",
    # one provider covers a hierarchy's prepare request and its follow-ups (LSP 3.17)
    "textDocument/prepareCallHierarchy": "callHierarchyProvider",
    "callHierarchy/incomingCalls": "callHierarchyProvider",
    "callHierarchy/outgoingCalls": "callHierarchyProvider",
    "textDocument/prepareTypeHierarchy": "typeHierarchyProvider",
    "typeHierarchy/supertypes": "typeHierarchyProvider",
    "typeHierarchy/subtypes": "typeHierarchyProvider",
}

# a follow-up request is registered dynamically under the method that starts it
REGISTERED_AS: dict[str, str] = {
    "callHierarchy/incomingCalls": "textDocument/prepareCallHierarchy",
    "callHierarchy/outgoingCalls": "textDocument/prepareCallHierarchy",
    "typeHierarchy/supertypes": "textDocument/prepareTypeHierarchy",
    "typeHierarchy/subtypes": "textDocument/prepareTypeHierarchy",
}


@dataclass
class Capabilities:
    """The server's static capabilities plus what it registered dynamically."""

    static: dict[str, Any] = field(default_factory=dict)
    dynamic: dict[str, tuple[str, Any]] = field(default_factory=dict)  # reg id -> (method, opts)

    def supports(self, method: str) -> bool:
        if method == "textDocument/prepareRename":
            rp = self.static.get("renameProvider")
            return (
                isinstance(rp, dict)
                and bool(rp.get("prepareProvider"))
                or any(
                    m == "textDocument/rename"
                    and isinstance(o, dict)
                    and bool(o.get("prepareProvider"))
                    for m, o in self.dynamic.values()
                )
            )
        if method == "workspace/diagnostic":
            dp = self.static.get("diagnosticProvider")
            return isinstance(dp, dict) and bool(dp.get("workspaceDiagnostics"))
        cap = CAPABILITY_OF.get(method)
        if cap is not None and self.static.get(cap):
            return True
        registered = REGISTERED_AS.get(method, method)
        return any(m == registered for m, _ in self.dynamic.values())

    def register(self, params: Any) -> None:
        for r in (params or {}).get("registrations", []):
            self.dynamic[str(r.get("id"))] = (r.get("method", ""), r.get("registerOptions"))

    def unregister(self, params: Any) -> None:
        # the spec's field name really is misspelled "unregisterations" (LSP 3.17)
        for r in (params or {}).get("unregisterations", []) or (params or {}).get(
            "unregistrations", []
        ):
            self.dynamic.pop(str(r.get("id")), None)

    @property
    def position_encoding(self) -> str:
        return str(self.static.get("positionEncoding") or "utf-16")

    def save_includes_text(self) -> bool:
        ts = self.static.get("textDocumentSync")
        return (
            isinstance(ts, dict)
            and isinstance(ts.get("save"), dict)
            and bool(ts["save"].get("includeText"))
        )


def settings_section(settings: Mapping[str, Any], section: str | None) -> Any:
    """`workspace/configuration` answer for one item: a dotted section of our settings."""
    if not section:
        return dict(settings)
    node: Any = settings
    for part in section.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def answer_server_request(
    req: ServerRequest,
    *,
    caps: Capabilities,
    settings: Mapping[str, Any],
    workspace_folders: list[dict[str, str]],
    apply_edit: Callable[[Any], tuple[bool, str]],
    on_progress_create: Callable[[Any], None] = lambda token: None,
) -> bytes:
    """The one reply to a server->client request (every request gets exactly one)."""
    m, p = req.method, req.params or {}
    if m == "workspace/configuration":
        return JsonRpcClient.respond(
            req.id, [settings_section(settings, it.get("section")) for it in p.get("items", [])]
        )
    if m == "window/workDoneProgress/create":
        on_progress_create(p.get("token"))
        return JsonRpcClient.respond(req.id, None)
    if m == "client/registerCapability":
        caps.register(p)
        return JsonRpcClient.respond(req.id, None)
    if m == "client/unregisterCapability":
        caps.unregister(p)
        return JsonRpcClient.respond(req.id, None)
    if m == "workspace/applyEdit":
        ok, why = apply_edit(p.get("edit") or {})
        res: dict[str, Any] = {"applied": ok}
        if not ok:
            res["failureReason"] = why
        return JsonRpcClient.respond(req.id, res)
    if m == "workspace/workspaceFolders":
        return JsonRpcClient.respond(req.id, workspace_folders)
    if m == "window/showMessageRequest":
        return JsonRpcClient.respond(req.id, None)  # no human here to pick an action
    if m in (
        "workspace/semanticTokens/refresh",
        "workspace/inlayHint/refresh",
        "workspace/codeLens/refresh",
        "workspace/diagnostic/refresh",
        "workspace/inlineValue/refresh",
        "window/showDocument",
    ):
        return JsonRpcClient.respond(req.id, None if "refresh" in m else {"success": False})
    return JsonRpcClient.respond_error(req.id, METHOD_NOT_FOUND, f"client does not handle {m}")
