"""`Session`: one client session with one language server process, held together from its
parts (sans-io: see the package docstring).

The session owns only the lifecycle (`initialize`, the server's death, a stall) and the
routing: the server's input to the part it concerns, a call through the gates of
`readiness` to the part that serves its op (one `match`), each timer tag to its part.
Each part owns its state:

- `table` (`OpTable`): the calls in progress, settled once through the io port;
- `link` (`ServerLink`): our requests and their continuations, the deadline and stall timers;
- `readiness`: started, warm, the workspace listed - and the calls waiting for each;
- `texts`: the open documents; `edits`: applied workspace edits (a rename's, the server's);
- `freshness`: diagnostics, and the calls waiting for fresh ones;
- `queries` (navigation, symbols, rename) and `hierarchy` (call and type hierarchy).

A server's own `workspace/applyEdit` is applied only while a write-tier call is served, and
only inside the root and that call's workspace (`edits.Edits.from_server`): this actor is
shared by every run on its root.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from tether.json_types import JSONObject, JSONValue
from tether.lsp import workspace_edit
from tether.lsp.cancellation import BY_FILE, MESSAGE_ONLY
from tether.lsp.documents import Documents, uri_of
from tether.lsp.jsonrpc import (
    Capabilities,
    Notification,
    ServerRequest,
    answer_server_request,
)
from tether.lsp.limits import LspLimits
from tether.lsp.narrow import obj, whole
from tether.lsp.servers import ServerRow
from tether.lsp.session.budgets import Canceller
from tether.lsp.session.capabilities import client_capabilities
from tether.lsp.session.edits import Edits
from tether.lsp.session.freshness import Freshness
from tether.lsp.session.hierarchy import Hierarchies
from tether.lsp.session.link import Answer, ServerLink
from tether.lsp.session.queries import Queries
from tether.lsp.session.readiness import Readiness
from tether.lsp.session.serving import Serving
from tether.lsp.session.table import Op, OpTable, SessionIO
from tether.lsp.session.texts import Texts
from tether.lsp.session.timers import (
    Cap,
    Deadline,
    Grace,
    LoadCap,
    Quiet,
    Registration,
    SessionTimer,
    Stall,
    WarmCap,
    WarmWindow,
)
from tether.messages.calls import Call, ErrorCode
from tether.messages.language_server_ops import (
    Diagnostics,
    DocumentSymbols,
    Hierarchy,
    LanguageServerOp,
    Navigate,
    Rename,
    Status,
    StatusReply,
    Sync,
    WorkspaceSymbols,
)
from tether.protocol import FramingError


class Session:
    def __init__(
        self,
        row: ServerRow,
        root: Path,
        io: SessionIO,
        now: Callable[[], float] = time.monotonic,
        limits: LspLimits | None = None,
        canceller: Canceller | None = None,
    ) -> None:
        self.row, self.root, self.io, self.now = row, root, io, now
        self.limits = limits or LspLimits()
        self.started_at = now()
        self.messages: deque[str] = deque(maxlen=5)  # last showMessage/logMessage errors
        self._broken_re = re.compile(row.broken_log) if row.broken_log else None
        self.caps = Capabilities()
        docs = Documents(self.caps, lambda p: row.language_of(p), self.limits.max_file_bytes, root)
        self.table = OpTable(io)
        self.link = ServerLink(io, now, self.limits, self.table, canceller)
        self.texts = Texts(docs, io, now)
        self.readiness = Readiness(row, root, self.texts, io.after, self.link.arm_before)
        self.edits = Edits(root, self.caps, self.texts, self.table, self.readiness, self.messages)
        serving = Serving(row, self.caps, self.texts, self.link, self.table)
        self.freshness = Freshness(serving, io.after, now)
        self.hierarchy = Hierarchies(serving)
        self.queries = Queries(serving, root, self.readiness, self.freshness, self.edits)
        self.table.on_settle(self.readiness.forget)
        self.table.on_settle(self.freshness.forget)

    # --- what the owner reads -------------------------------------------------------------
    @property
    def state(self) -> str:
        """starting | registering | ready | failed | exited"""
        return self.readiness.state

    @property
    def error_text(self) -> str:
        return self.readiness.error_text

    @property
    def ops(self) -> dict[int, Op]:
        return self.table.ops

    @property
    def docs(self) -> Documents:
        return self.texts.docs

    # --- lifecycle ------------------------------------------------------------------------
    def start(self, pid: int | None = None) -> None:
        params: JSONObject = {
            "processId": pid if pid is not None else os.getpid(),
            "clientInfo": {"name": "tether", "version": "0.1.0"},
            "rootUri": uri_of(self.root),
            "rootPath": str(self.root),
            "workspaceFolders": self._folders(),
            "capabilities": client_capabilities(),
            "initializationOptions": dict(self.row.init_options) or None,
        }
        deadline = self.now() + self.row.startup_timeout
        self.link.request("initialize", params, deadline, None, self._on_initialized)

    def _folders(self) -> list[JSONValue]:
        return [{"uri": uri_of(self.root), "name": self.root.name or str(self.root)}]

    def _on_initialized(self, resp: Answer) -> None:
        if resp.error:
            self._fail_start(f"initialize failed: {resp.error.get('message', resp.error)}")
            return
        self.caps.static = dict(obj(obj(resp.result).get("capabilities")))
        self.link.notify("initialized", {})
        if self.row.settings:
            self.link.notify(
                "workspace/didChangeConfiguration", {"settings": dict(self.row.settings)}
            )
        if self.row.await_pull_registration and not self._pull_supported():
            self.readiness.registering()
            return
        self._go_on(self.readiness.ready())

    def _fail_start(self, why: str) -> None:
        for op in self.readiness.failed(why):
            self.table.fail(op, ErrorCode.FAILED, f"{self.row.name} did not start: {why}")

    def shutdown_bytes(self) -> bytes:
        """Polite goodbye (the owner kills the process tree after a short grace anyway)."""
        return self.link.rpc.notify("exit", None)

    def on_exit(self, returncode: int | None) -> list[tuple[Call, str]]:
        """The process died: every outstanding call gets RESOURCE_DIED; returns (token, op)."""
        self.readiness.state = "exited"
        gone = [(op.token, op.op) for op in self.table.ops.values()]
        tail = f" (exit code {returncode})" if returncode is not None else ""
        self.table.fail_all(
            ErrorCode.RESOURCE_DIED,
            lambda op: (
                f"{self.row.name} for {self.root} died while answering {op.op}{tail}; "
                "it is being restarted - call again"
            ),
        )
        self.link.drain()
        self.freshness.clear()
        return gone

    def _stalled(self, why: str) -> None:
        """The server answers nobody: fail every call (retried once on the restarted
        server when idempotent) and end the session, which the owner restarts."""
        self.readiness.failed(why)
        self.table.fail_all(
            ErrorCode.RESOURCE_DIED,
            lambda op: (
                f"{self.row.name} for {self.root}: {why}; it is being restarted - call again"
            ),
        )
        self.link.drain()
        self.freshness.clear()

    def _broken(self, why: str) -> None:
        """The server said it can answer no more (`ServerRow.broken_log`): as a stall,
        or a failed start while it was starting."""
        if self.state == "ready":
            self._stalled(why)
        elif self.state in ("starting", "registering"):
            self._fail_start(why)

    # --- input ----------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        try:
            events = self.link.receive(data)
        except FramingError as e:
            why = f"corrupt output from {self.row.name}: {e}"
            self.readiness.failed(why)
            self.table.fail_all(ErrorCode.FAILED, lambda op: why)
            return
        for ev in events:
            if isinstance(ev, ServerRequest):
                self._on_server_request(ev)
            else:
                self._on_notification(ev)

    def _on_server_request(self, req: ServerRequest) -> None:
        if req.method == "workspace/diagnostic/refresh":
            self.freshness.on_refresh()
        if req.method == "client/registerCapability" and self.state == "registering":
            self.caps.register(req.params)
            if self._pull_supported():
                self._go_on(self.readiness.ready())
        self.io.write(
            answer_server_request(
                req,
                caps=self.caps,
                settings=self.row.settings,
                workspace_folders=self._folders(),
                apply_edit=self.edits.from_server,
                on_progress_create=lambda token: None,
            )
        )

    def _on_notification(self, n: Notification) -> None:
        p = obj(n.params)
        if n.method == "textDocument/publishDiagnostics":
            self.freshness.on_publish(p)
        elif n.method == "$/progress":
            self._go_on(self.readiness.on_progress(p))
        elif n.method in ("window/showMessage", "window/logMessage"):
            message = str(p.get("message", ""))
            if (whole(p.get("type")) or 4) <= 1:
                self.messages.append(message[:300])
            if self._broken_re is not None and self._broken_re.search(message):
                self._broken(f"it can answer no more, as it said: {message[:300]}")
                return
            self._go_on(self.readiness.on_log(message))

    def on_timer(self, tag: SessionTimer) -> None:
        match tag:
            case Quiet() | Cap() | Grace():
                self.freshness.on_timer(tag)
            case Registration() | WarmWindow() | WarmCap() | LoadCap():
                self._go_on(self.readiness.on_timer(tag))
            case Stall():
                self.link.on_stall_timer()
                again = self._check_stall()
                if again is not None:
                    self.link.arm_stall(again)
            case Deadline():
                self._deadline()

    # --- deadlines and stalls -------------------------------------------------------------
    def _check_stall(self) -> float | None:
        """Declare the server stuck if it is; else when to look again (None: nothing
        waits, or it was declared stuck)."""
        if self.readiness.unusable:
            return None
        why, again = self.link.stalled()
        if why:
            self._stalled(why)
        return again

    def _deadline(self) -> None:
        self.link.fired()
        # a server stuck for everyone is restarted, not blamed on one request's budget
        # (its timer and this one may come due together)
        self._check_stall()
        if self.state == "failed":
            return
        now = self.now()
        for p, op in self.link.expire(now):
            if p.method == "initialize":
                self._fail_start(f"no answer to initialize within {self.row.startup_timeout:.0f} s")
            elif op is not None and self.table.live(op):
                self.table.fail(op, ErrorCode.DEADLINE, self._late_text(p.method, op))
        for op in self.table.due(now):
            why = (
                f"{self.row.name} is still starting ({self.readiness.hint()})"
                if self.readiness.waiting(op)
                else "it did not finish"
            )
            self.table.fail(op, ErrorCode.DEADLINE, f"{op.op} timed out: {why}; retry shortly")
        self.link.rearm()

    def _late_text(self, method: str, op: Op) -> str:
        hint = self.readiness.hint()
        if op.deadline > self.now():  # its budget ran out before the call's own deadline
            return (
                f"{self.row.name} did not answer {method} within "
                f"{self.limits.request_budget:g} s, the budget of "
                f"one request on a server every conversation on {self.root} shares "
                f"({hint}); it was cancelled so the others are not held up. "
                "Retry once, ask about a smaller file or a narrower query, or call lsp status"
            )
        return (
            f"{self.row.name} did not answer {method} in time ({hint}); "
            "it was cancelled. Retry, or call lsp status"
        )

    # --- calls ----------------------------------------------------------------------------
    def handle(self, request: LanguageServerOp, token: Call, deadline: float) -> None:
        """Serve one call (`request`, settled through io with `token`) before `deadline`."""
        op = self.table.add(request, token, deadline)
        status = isinstance(request, Status)  # answered in any state
        if op.deadline <= self.now():
            self.table.fail(op, ErrorCode.DEADLINE, f"{op.op} arrived after its deadline")
        elif self.readiness.starting and not status:
            self.readiness.queue(op)
        elif self.readiness.unusable and not status:
            self.table.fail(
                op, ErrorCode.FAILED, f"{self.row.name} is not usable: {self.error_text}"
            )
        else:
            self._dispatch(op)

    def cancel(self, token: Call, reason: str) -> None:
        """The caller of `token`'s call gave up (tether.call_scope): cancel its requests at
        the server (`$/cancelRequest`, and the cancellation file where the server polls one)
        so the shared server is free for the others, and drop the call."""
        for op in self.table.of_token(token):
            self.link.cancel_op(op)
            self.table.fail(op, ErrorCode.CANCELLED, f"{op.op} was cancelled: {reason}")

    def _go_on(self, released: list[Op]) -> None:
        """Serve the calls a gate let through, except those settled meanwhile."""
        for op in released:
            if self.table.live(op):
                self._dispatch(op)

    def _dispatch(self, op: Op) -> None:
        if not self.readiness.warm and not isinstance(op.request, Status):
            self.readiness.hold(op)
            return
        try:
            self._serve(op)
        except (KeyError, TypeError, ValueError) as e:
            self.table.fail(op, ErrorCode.BAD_REQUEST, f"bad arguments for {op.op}: {e}")

    def _serve(self, op: Op) -> None:
        """Send `op` on its way (the session is ready and warm)."""
        match op.request:
            case Navigate() as nav:
                self.queries.nav(op, nav)
            case Hierarchy() as h:
                self.hierarchy.serve(op, h)
            case DocumentSymbols() as ds:
                self.queries.document_symbols(op, ds)
            case WorkspaceSymbols() as ws:
                self.queries.workspace_symbols(op, ws)
            case Diagnostics() as diag:
                self.freshness.diagnostics(op, diag)
            case Sync() as sync:
                self.freshness.sync(op, sync)
            case Rename() as rename:
                self.queries.rename(op, rename)
            case Status():
                self.table.done(op, self.status())
            case _:
                self.table.fail(
                    op, ErrorCode.BAD_REQUEST, f"{self.row.name} does not serve {op.op}"
                )

    def _pull_supported(self) -> bool:
        return self.caps.supports("textDocument/diagnostic")

    def apply_edit(self, edit: JSONObject, confine: list[str] | None = None) -> workspace_edit.Plan:
        """Apply a WorkspaceEdit all or nothing (`edits.Edits.apply`)."""
        return self.edits.apply(edit, confine)

    # status -------------------------------------------------------------------------------
    def status(self) -> StatusReply:
        ready = self.readiness
        state = "starting" if ready.state == "registering" else ready.state
        if state == "ready" and ready.progress:
            state = "indexing"
        return StatusReply(
            server=self.row.name,
            root=str(self.root),
            state=state,
            indexing=sorted(set(ready.progress.values())),
            error=ready.error_text,
            uptime=round(self.now() - self.started_at, 3),
            encoding=self.caps.position_encoding,
            diagnostics_mode="pull" if self._pull_supported() else "push",
            open_documents=len(self.texts.docs.open),
            pending_requests=len(self.link.rpc.pending),
            cancelled_requests=self.link.watch.cancelled,
            messages=list(self.messages),
            cancellation=BY_FILE if self.link.watch.canceller is not None else MESSAGE_ONLY,
        )
