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
from typing import Generic, TypeVar

from tether.json_types import JSONObject, JSONValue
from tether.protocol import encode

# JSON-RPC / LSP error codes we send or recognise.
METHOD_NOT_FOUND = -32601
REQUEST_CANCELLED = -32800
CONTENT_MODIFIED = -32801


C = TypeVar("C")  # the caller's context of a request: opaque to this module


@dataclass
class Pending(Generic[C]):
    id: int
    method: str
    deadline: float
    context: C | None = None  # opaque to this module: the caller's continuation


@dataclass(frozen=True)
class Response(Generic[C]):
    id: int
    method: str
    result: JSONValue
    error: JSONObject | None
    context: C | None


@dataclass(frozen=True)
class Notification:
    method: str
    params: JSONValue


@dataclass(frozen=True)
class ServerRequest:
    id: int | str
    method: str
    params: JSONValue


@dataclass
class JsonRpcClient(Generic[C]):
    next_id: int = 1
    pending: dict[int, Pending[C]] = field(default_factory=dict)
    late_responses: int = 0  # answers that arrived after their caller gave up

    def request(
        self, method: str, params: JSONValue, *, deadline: float, context: C | None = None
    ) -> tuple[int, bytes]:
        rid = self.next_id
        self.next_id += 1
        self.pending[rid] = Pending(rid, method, deadline, context)
        msg: JSONObject = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        return rid, encode(msg)

    @staticmethod
    def notify(method: str, params: JSONValue) -> bytes:
        msg: JSONObject = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        return encode(msg)

    @staticmethod
    def respond(rid: int | str, result: JSONValue) -> bytes:
        return encode({"jsonrpc": "2.0", "id": rid, "result": result})

    @staticmethod
    def respond_error(rid: int | str, code: int, message: str) -> bytes:
        return encode({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    def cancel(self, rid: int) -> bytes:
        """Forget a pending request and tell the server ($/cancelRequest)."""
        self.pending.pop(rid, None)
        return self.notify("$/cancelRequest", {"id": rid})

    def receive(self, msg: JSONValue) -> Response[C] | Notification | ServerRequest | None:
        if not isinstance(msg, dict):
            return None
        method = msg.get("method")
        if isinstance(method, str):  # route on method BEFORE id
            sid = msg.get("id")
            if isinstance(sid, int | str):
                return ServerRequest(sid, method, msg.get("params"))
            return Notification(method, msg.get("params"))
        rid = msg.get("id")
        p = self.pending.pop(rid, None) if isinstance(rid, int) else None
        if p is None:
            self.late_responses += 1
            return None
        error = msg.get("error")
        if error is not None and not isinstance(error, dict):
            error = {"message": str(error)}  # a malformed error is still an error
        return Response(p.id, p.method, msg.get("result"), error, p.context)

    def expired(self, now: float) -> list[Pending[C]]:
        """Pop every pending request whose deadline has passed."""
        gone = [p for p in self.pending.values() if p.deadline <= now]
        for p in gone:
            del self.pending[p.id]
        return gone

    def next_deadline(self) -> float | None:
        return min((p.deadline for p in self.pending.values()), default=None)

    def drain(self) -> list[Pending[C]]:
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

    static: JSONObject = field(default_factory=dict)
    dynamic: dict[str, tuple[str, JSONValue]] = field(default_factory=dict)  # id -> (method, opts)

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

    def offers_command(self, command: str) -> bool:
        """`command` is among those the server's workspace/executeCommand advertises."""
        provider = self.static.get("executeCommandProvider")
        commands = provider.get("commands") if isinstance(provider, dict) else None
        return isinstance(commands, list) and command in commands

    def register(self, params: JSONValue) -> None:
        for r in _objects(params, "registrations"):
            method = r.get("method", "")
            self.dynamic[str(r.get("id"))] = (
                method if isinstance(method, str) else "",
                r.get("registerOptions"),
            )

    def unregister(self, params: JSONValue) -> None:
        # the spec's field name really is misspelled "unregisterations" (LSP 3.17)
        for r in _objects(params, "unregisterations") or _objects(params, "unregistrations"):
            self.dynamic.pop(str(r.get("id")), None)

    @property
    def position_encoding(self) -> str:
        return str(self.static.get("positionEncoding") or "utf-16")

    def save_includes_text(self) -> bool:
        ts = self.static.get("textDocumentSync")
        save = ts.get("save") if isinstance(ts, dict) else None
        return isinstance(save, dict) and bool(save.get("includeText"))


def _objects(params: JSONValue, name: str) -> list[JSONObject]:
    """The objects of the list `params[name]` (none when params or the list is not one)."""
    items = params.get(name) if isinstance(params, dict) else None
    return [r for r in items if isinstance(r, dict)] if isinstance(items, list) else []


def settings_section(settings: Mapping[str, JSONValue], section: str | None) -> JSONValue:
    """`workspace/configuration` answer for one item: a dotted section of our settings."""
    if not section:
        return dict(settings)
    node: Mapping[str, JSONValue] | JSONValue = settings
    for part in section.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return dict(node) if isinstance(node, Mapping) else node


def answer_server_request(
    req: ServerRequest,
    *,
    caps: Capabilities,
    settings: Mapping[str, JSONValue],
    workspace_folders: list[JSONValue],
    apply_edit: Callable[[JSONValue], tuple[bool, str]],
    on_progress_create: Callable[[JSONValue], None] = lambda token: None,
) -> bytes:
    """The one reply to a server->client request (every request gets exactly one)."""
    m, p = req.method, req.params if isinstance(req.params, dict) else {}
    if m == "workspace/configuration":
        sections = [it.get("section") for it in _objects(p, "items")]
        return JsonRpcClient.respond(
            req.id,
            [settings_section(settings, s if isinstance(s, str) else None) for s in sections],
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
        res: JSONObject = {"applied": ok}
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
