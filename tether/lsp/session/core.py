"""The session's engine: lifecycle, the table of calls, deadlines, and the server's input.

Everything here is about getting a call to the server and an answer (or a typed error) back
before its deadline, whatever the server is doing: `initialize` and readiness (including a
late pull registration, a warm-up on a first file - for a workspace search, one file of
the root - and, for a workspace search, the server having listed the workspace), the op
table (`ops`, and the calls `queued` before ready, `held` before warm, `awaiting_load`
before the workspace is listed), one timer re-armed for the earliest deadline, and the
server's requests and notifications. A server's own `workspace/applyEdit` is applied only
while a write-tier call is served, and only inside the root and that call's workspace
(`_apply_edit_from_server`): this actor is shared by every run on its root. A call is one
op of `tether.messages.language_server_ops`; the subclasses implement them
(`freshness.DiagnosingSession`, `queries.Session`), and `Session.serve` dispatches them
with one `match`. The session's timers are tags of its own (`Deadline`, `WarmWindow`, ...).
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tether.lsp import workspace_edit
from tether.lsp.diagnostics import FreshWait
from tether.lsp.documents import Document, Documents, uri_of
from tether.lsp.jsonrpc import (
    CONTENT_MODIFIED,
    REQUEST_CANCELLED,
    Capabilities,
    JsonRpcClient,
    Notification,
    Response,
    ServerRequest,
    answer_server_request,
)
from tether.lsp.limits import LspLimits
from tether.lsp.positions import to_character
from tether.lsp.servers import ServerRow, sample_file
from tether.lsp.session.budgets import Canceller, RequestWatch
from tether.lsp.session.capabilities import client_capabilities
from tether.messages.calls import ErrorCode
from tether.messages.language_server_ops import (
    Diagnostics,
    DocumentSymbols,
    Hierarchy,
    LanguageServerOp,
    Navigate,
    Rename,
    Status,
    WorkspaceSymbols,
)
from tether.messages.ops import op_name
from tether.protocol import FrameDecoder, FramingError

REPLY_MARGIN = 0.05  # s: settle a call this long before its deadline so the reply arrives


# --- timer tags (SessionIO.after hands them back to on_timer) -----------------------------
@dataclass(frozen=True)
class Deadline:
    """The earliest deadline of a request or a call has come."""


@dataclass(frozen=True)
class Registration:
    """No pull-diagnostics registration came in time: diagnostics come by publish."""


@dataclass(frozen=True)
class WarmWindow:
    """No warm-up progress began within the row's window: nothing to wait for."""


@dataclass(frozen=True)
class WarmCap:
    """The warm-up took as long as it may: go on."""


@dataclass(frozen=True)
class LoadCap:
    """The server never said it listed the workspace: ask it anyway."""


@dataclass(frozen=True)
class Stall:
    """Time to see whether the server still answers anyone (`budgets.RequestWatch`)."""


def _inside_both(a: list[Path], b: list[Path]) -> list[Path]:
    """The directories inside some directory of `a` and some of `b` (of two nested trees,
    the deeper one), symlinks and `..` resolved."""
    out = []
    for x in (Path(os.path.realpath(d)) for d in a):
        for y in (Path(os.path.realpath(d)) for d in b):
            if x == y or y in x.parents:
                out.append(x)
            elif x in y.parents:
                out.append(y)
    return out


class SessionIO(Protocol):
    def write(self, data: bytes) -> None: ...
    def after(self, seconds: float, tag: Any) -> None: ...
    def done(self, token: Any, payload: dict[str, Any]) -> None: ...
    def error(self, token: Any, code: str, message: str) -> None: ...


@dataclass
class Op:
    """One call being served: its op (`request`) and what serving it has learnt."""

    oid: int
    token: Any
    request: LanguageServerOp
    deadline: float
    retried: bool = False
    server_s: float = 0.0  # time its requests spent with the server (write to parsed answer)
    server_edits: list[str] = field(default_factory=list)  # files the server changed meanwhile
    prepared: bool = False  # a rename: prepareRename said yes
    epoch: int = 0  # a rename: the edit_epoch the server computed it against
    deleted: list[str] = field(default_factory=list)  # a sync: written paths that are gone
    skipped: dict[str, str] = field(default_factory=dict)  # a sync: files refused, and why

    @property
    def op(self) -> str:
        """The op's name, for messages (a navigation: its action; a hierarchy: its action
        and direction)."""
        req = self.request
        if isinstance(req, Hierarchy):
            return f"{req.action} {req.direction}"
        return req.action if isinstance(req, Navigate) else op_name(req)


class SessionCore:
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
        self.rpc = JsonRpcClient()
        self.decoder = FrameDecoder()
        self.caps = Capabilities()
        self.docs = Documents(self.caps, lambda p: row.language_of(p), self.limits.max_file_bytes)
        self.watch = RequestWatch(self.limits, now(), canceller)  # budgets, stalls
        self._stall_armed = False
        self.state = "starting"  # starting | registering | ready | failed | exited
        self.error_text = ""
        self.started_at = now()
        self.progress: dict[Any, str] = {}  # active $/progress token -> title
        self.messages: deque[str] = deque(maxlen=5)  # last showMessage/logMessage errors
        self.changed_at: dict[str, float] = {}  # uri -> when we last sent a change/open
        self.edit_epoch = 0  # WorkspaceEdits this session wrote; edited_at: path -> epoch
        self.edited_at: dict[Path, int] = {}
        self.unimplemented: set[str] = set()  # advertised, but answered "method not found"
        self.ops: dict[int, Op] = {}
        self.queued: list[Op] = []
        self.waits: dict[int, tuple[Op, FreshWait]] = {}  # calls waiting for diagnostics
        self._next_oid = 1
        self._armed: float | None = None
        self.warm = not row.warmup_progress  # see ServerRow.warmup_progress
        self._warming = False
        self._warm_token: Any = None
        self.held: list[Op] = []
        # workspace/symbol waits for the server to have listed the workspace (see
        # ServerRow.workspace_loaded_log); the calls waiting for that
        self._loaded_re = re.compile(row.workspace_loaded_log) if row.workspace_loaded_log else None
        self.workspace_loaded = self._loaded_re is None
        self.awaiting_load: list[Op] = []
        self._load_capped = False

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
            self.io.after(self.row.await_pull_registration, Registration())
            return
        self._become_ready()

    def _become_ready(self) -> None:
        self.state = "ready"
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
            if isinstance(msg, dict) and "method" not in msg:
                self.watch.answered(msg.get("id"), self.now())
            ev = self.rpc.receive(msg)
            if isinstance(ev, Response):
                ctx = ev.context
                if ctx is not None:
                    op, cont, sent = ctx
                    if op is not None:
                        op.server_s += self.now() - sent
                    if op is None or op.oid in self.ops:
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
        if n.method == "$/progress":
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
            if self._loaded_re is not None and not self.workspace_loaded:
                if self._loaded_re.search(str(p.get("message", ""))):
                    self._workspace_loaded()

    def _workspace_loaded(self) -> None:
        self.workspace_loaded = True
        waiting, self.awaiting_load = self.awaiting_load, []
        self._dispatch_held(waiting)

    def _await_load(self, op: Op) -> bool:
        """Hold `op` until the server has listed the workspace (False: it has)."""
        if self.workspace_loaded:
            return False
        if not self._load_capped:  # a server that never logs it is asked anyway, later
            self._load_capped = True
            self.io.after(self.row.startup_timeout, LoadCap())
        if op not in self.awaiting_load:
            self.awaiting_load.append(op)
            if self._armed is None or op.deadline < self._armed:
                self._arm_at(op.deadline)
        return True

    def _warm_path(self, op: Op) -> str | None:
        """The file whose opening warms the server up for `op`: its own, or for a workspace
        search on a server that needs an open document, one file of the root."""
        match op.request:
            case Navigate(path=path) | DocumentSymbols(path=path) | Diagnostics(path=path):
                return path
            case Rename(path=path) | Hierarchy(path=path):
                return path
            case WorkspaceSymbols() if self.row.symbols_need_open and not self.docs.open:
                sample = sample_file(self.row, self.root)
                return str(sample) if sample else None
        return None

    def _warmed(self) -> None:
        if self.warm:
            return
        self.warm = True
        held, self.held = self.held, []
        self._dispatch_held(held)

    def _dispatch_held(self, held: list[Op]) -> None:
        """Go on with ops that were held back, except those settled meanwhile."""
        for op in held:
            if op.oid in self.ops:
                self._dispatch(op)

    def on_timer(self, tag: Any) -> None:
        match tag:
            case WarmWindow() if self._warm_token is None:
                self._warmed()  # no initial progress began: nothing to wait for
            case WarmCap():
                self._warmed()
            case LoadCap() if not self.workspace_loaded:
                self._workspace_loaded()
            case Registration() if self.state == "registering":
                self._become_ready()  # no pull registration came: diagnostics by publish
            case Stall():
                self._stall_armed = False
                again = self._check_stall()
                if again is not None:
                    self._arm_stall(again)
            case Deadline():
                self._deadline()

    def _deadline(self) -> None:
        self._armed = None
        # a server stuck for everyone is restarted, not blamed on one request's budget
        # (its timer and this one may come due together)
        self._check_stall()
        if self.state == "failed":
            return
        now = self.now()
        expired = self.rpc.expired(now)
        if expired:
            self._renew_budgets(now)
        for p in expired:
            ctx = p.context
            op, sent = (ctx[0], ctx[2]) if ctx else (None, now)
            self.io.write(self.watch.abandon(p.id, p.method, sent))
            if p.method == "initialize":
                self._fail_start(f"no answer to initialize within {self.row.startup_timeout:.0f} s")
            elif op is not None and op.oid in self.ops:
                self._fail(op, ErrorCode.DEADLINE, self._late_text(p.method, op))
        for op in [o for o in self.ops.values() if o.deadline <= now]:
            why = (
                f"{self.row.name} is still starting ({self._indexing_hint()})"
                if op in self.held or op in self.queued or op in self.awaiting_load
                else "it did not finish"
            )
            self._fail(op, ErrorCode.DEADLINE, f"{op.op} timed out: {why}; retry shortly")
        self._arm()

    def _late_text(self, method: str, op: Op) -> str:
        if op.deadline > self.now():  # its budget ran out before the call's own deadline
            return (
                f"{self.row.name} did not answer {method} within "
                f"{self.limits.request_budget:g} s, the budget of "
                f"one request on a server every conversation on {self.root} shares "
                f"({self._indexing_hint()}); it was cancelled so the others are not held up. "
                "Retry once, ask about a smaller file or a narrower query, or call lsp status"
            )
        return (
            f"{self.row.name} did not answer {method} in time ({self._indexing_hint()}); "
            "it was cancelled. Retry, or call lsp status"
        )

    def _renew_budgets(self, now: float) -> None:
        """Requests were just abandoned: those still pending were queued behind them in a
        server that answers in order, so their budgets count from now (never past their
        call's deadline) - one slow request must not use up everyone's budget."""
        for p in self.rpc.pending.values():
            op = p.context[0] if p.context else None
            cap = op.deadline if op is not None else p.deadline
            p.deadline = max(p.deadline, self.watch.deadline(p.method, now, cap))

    def cancel(self, token: Any, reason: str) -> None:
        """The caller of `token`'s call gave up (tether.call_scope): cancel its requests at
        the server (`$/cancelRequest`, and the cancellation file where the server polls one)
        so the shared server is free for the others, and drop the call."""
        for op in [o for o in self.ops.values() if o.token is token]:
            for rid, p in list(self.rpc.pending.items()):
                if p.context and p.context[0] is op:
                    self._cancel(rid)
            self._fail(op, ErrorCode.CANCELLED, f"{op.op} was cancelled: {reason}")

    def _cancel(self, rid: int) -> None:
        """Abandon one of our requests (it is no longer wanted) and tell the server."""
        p = self.rpc.pending.pop(rid, None)
        if p is not None:
            sent = p.context[2] if p.context else self.now()
            self.io.write(self.watch.abandon(rid, p.method, sent))

    def _check_stall(self) -> float | None:
        """Declare the server stuck if it is; else when to look again (None: nothing
        waits, or it was declared stuck)."""
        if self.state in ("failed", "exited"):
            return None
        waiting = [(p.context[2], p.method) for p in self.rpc.pending.values() if p.context]
        why, again = self.watch.check(waiting, self.now())
        if why:
            self._stalled(why)
        return again

    def _arm_stall(self, at: float) -> None:
        if not self._stall_armed:
            self._stall_armed = True
            self.io.after(max(0.0, at - self.now()) + 0.01, Stall())

    def _stalled(self, why: str) -> None:
        """The server answers nobody: fail every call (retried once on the restarted
        server when idempotent) and end the session, which the owner restarts."""
        self.state = "failed"
        self.error_text = why
        for op in list(self.ops.values()):
            self._fail(
                op,
                ErrorCode.RESOURCE_DIED,
                f"{self.row.name} for {self.root}: {why}; it is being restarted - call again",
            )
        self.rpc.drain()
        self.waits.clear()

    def _indexing_hint(self) -> str:
        if not self.workspace_loaded:
            return "it has not finished listing the workspace's files"
        if self.progress:
            return "it is still indexing: " + ", ".join(sorted(set(self.progress.values())))
        return "it may be busy or stuck"

    # --- calls ----------------------------------------------------------------------------
    def handle(self, request: LanguageServerOp, token: Any, deadline: float) -> None:
        """Serve one call (`request`, settled through io with `token`) before `deadline`."""
        op = Op(self._next_oid, token, request, deadline - REPLY_MARGIN)
        self._next_oid += 1
        self.ops[op.oid] = op
        status = isinstance(request, Status)  # answered in any state
        if op.deadline <= self.now():
            self._fail(op, ErrorCode.DEADLINE, f"{op.op} arrived after its deadline")
        elif self.state in ("starting", "registering") and not status:
            self.queued.append(op)
            if self._armed is None or op.deadline < self._armed:
                self._arm_at(op.deadline)
        elif self.state in ("failed", "exited") and not status:
            self._fail(op, ErrorCode.FAILED, f"{self.row.name} is not usable: {self.error_text}")
        else:
            self._dispatch(op)

    def _dispatch(self, op: Op) -> None:
        if not self.warm and not isinstance(op.request, Status):
            self.held.append(op)
            if self._armed is None or op.deadline < self._armed:
                self._arm_at(op.deadline)
            warm_path = None if self._warming else self._warm_path(op)
            if warm_path is not None:
                self._warming = True
                doc, msgs = self.docs.ensure_open(Path(warm_path))
                for m in msgs:
                    self.io.write(m)
                self.io.after(self.row.warmup_window, WarmWindow())
                self.io.after(self.row.startup_timeout, WarmCap())
            elif not self._warming:
                self.io.after(self.row.warmup_window, WarmWindow())
                self._warming = True
            return
        try:
            self.serve(op)
        except (KeyError, TypeError, ValueError) as e:
            self._fail(op, ErrorCode.BAD_REQUEST, f"bad arguments for {op.op}: {e}")

    def serve(self, op: Op) -> None:
        """Send `op` on its way (the session is ready and warm): `queries.Session`."""
        raise NotImplementedError

    def _done(self, op: Op, payload: dict[str, Any]) -> None:
        if self.ops.pop(op.oid, None) is not None:
            if op.server_s:  # how much of the call was the server's own time
                payload = {**payload, "server_ms": round(op.server_s * 1e3, 3)}
            self.io.done(op.token, payload)

    def _fail(self, op: Op, code: str, message: str) -> None:
        if self.ops.pop(op.oid, None) is not None:
            self.waits.pop(op.oid, None)
            if op in self.queued:
                self.queued.remove(op)
            if op in self.held:
                self.held.remove(op)
            if op in self.awaiting_load:
                self.awaiting_load.remove(op)
            self.io.error(op.token, code, message)

    def _request(
        self,
        method: str,
        params: Any,
        deadline: float,
        op: Op | None,
        cont: Callable[[Any, Response], None],
    ) -> int:
        sent = self.now()
        deadline = self.watch.deadline(method, sent, deadline)
        rid, data = self.rpc.request(method, params, deadline=deadline, context=(op, cont, sent))
        self.io.write(data)
        if self._armed is None or deadline < self._armed:
            self._arm_at(deadline)
        self._arm_stall(sent + self.limits.stall_timeout)
        return rid

    def _arm_at(self, when: float) -> None:
        self._armed = when
        self.io.after(max(0.0, when - self.now()) + 0.001, Deadline())

    def _arm(self) -> None:
        nxt = [d for d in [self.rpc.next_deadline()] if d is not None]
        nxt += [o.deadline for o in self.ops.values()]
        if nxt:
            self._arm_at(min(nxt))

    def _open(self, op: Op, file: str) -> Document | None:
        """`file` open in the server (the op fails, saying why, if it cannot be read)."""
        path = Path(file)
        doc, msgs = self.docs.ensure_open(path)
        for m in msgs:
            self.io.write(m)
        if msgs:
            self.changed_at[uri_of(path)] = self.now()
        if doc is None:
            why = self.docs.problem(path) or f"cannot read {path}: no such file"
            self._fail(op, ErrorCode.BAD_REQUEST, why)
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

    def _pull_supported(self) -> bool:
        return self.caps.supports("textDocument/diagnostic")

    # documents changed by the server or a rename --------------------------------------------
    def apply_edit(
        self, edit: dict[str, Any], confine: list[str] | None = None
    ) -> workspace_edit.Plan:
        """Apply a WorkspaceEdit all or nothing and re-sync every touched file.

        `confine`: directories every touched path must be inside (the run's workspace;
        the server's root when None); an edit reaching outside, after resolving symlinks and
        `..`, is refused whole (DESIGN.md invariant 5).
        """
        return self._apply_within(edit, [Path(c) for c in confine] if confine else [self.root])

    def _apply_within(self, edit: dict[str, Any], within: list[Path]) -> workspace_edit.Plan:
        def version_of(p: Path) -> int | None:
            d = self.docs.get(p)
            return d.version if d else None

        workspace_edit.confine(edit, within)
        plan = workspace_edit.plan(edit, self.caps.position_encoding, version_of)
        workspace_edit.commit(plan, within)
        self.edit_epoch += 1
        for p in plan.final:
            self.edited_at[p] = self.edit_epoch
        touched = [p for p in plan.touched if p in plan.final]
        _docs, msgs = self.docs.sync(touched, set(plan.created) | {b for _, b in plan.renamed})
        now = self.now()
        for m in msgs:
            self.io.write(m)
        for p in touched:
            self.changed_at[uri_of(p)] = now
        return plan

    def _apply_edit_from_server(self, edit: Any) -> tuple[bool, str]:
        """A server-initiated `workspace/applyEdit`. This actor is shared by every run on its
        root, so an edit is applied only while a call a run made at write tier is being
        served (a `Rename` with `write_tier`, sent by lsp_rename alone), and only inside the
        server's root and the workspace of every such call; otherwise it is refused whole
        and the server told why (`applied: false`)."""
        waiting = {o.oid for o in (*self.queued, *self.held, *self.awaiting_load)}
        writers = [
            (o, o.request)
            for o in self.ops.values()
            if isinstance(o.request, Rename) and o.request.write_tier and o.oid not in waiting
        ]
        if not writers:
            return self._refused(
                "tether applies a server's edits only during a write-tier call of a run "
                "(lsp_rename), and none is in progress; nothing was written",
            )
        within = [Path(os.path.realpath(self.root))]
        for _, rename in writers:
            within = _inside_both(within, [Path(c) for c in rename.confine] or [self.root])
        if not within:
            return self._refused(
                f"the workspace of the write-tier call is outside {self.root}; nothing was written"
            )
        if not isinstance(edit, dict):
            return self._refused(f"the edit is not a WorkspaceEdit object: {edit!r:.80}")
        try:
            plan = self._apply_within(edit, within)
        except workspace_edit.EditError as e:
            return self._refused(f"{e}; nothing was written")
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            return self._refused(f"malformed WorkspaceEdit ({type(e).__name__}: {e})")
        for o, _ in writers:  # their answers say what the server changed on their watch
            o.server_edits += [str(p) for p in plan.final]
        return True, ""

    def _refused(self, why: str) -> tuple[bool, str]:
        self.messages.append(f"refused a workspace/applyEdit from the server: {why}"[:300])
        return False, why

    # status -------------------------------------------------------------------------------
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
            "cancelled_requests": self.watch.cancelled,
            "messages": list(self.messages),
        }
