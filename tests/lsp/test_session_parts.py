"""The session's parts, each alone, sans-io: the call table, the wire (requests, deadlines),
the readiness gates, the open texts, the workspace edits, and the typed replies on the wire.

A fake io records what a part wrote and the timers it asked for; the clock is a list."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tether.lsp.documents import Documents, uri_of
from tether.lsp.jsonrpc import Capabilities
from tether.lsp.limits import LspLimits
from tether.lsp.servers import BY_NAME
from tether.lsp.session.edits import Edits, inside_both
from tether.lsp.session.link import ServerLink
from tether.lsp.session.readiness import Readiness
from tether.lsp.session.table import REPLY_MARGIN, OpTable
from tether.lsp.session.texts import Texts
from tether.lsp.session.timers import Deadline, LoadCap, WarmCap, WarmWindow
from tether.messages.calls import Reply
from tether.messages.codec import decode, encode
from tether.messages.language_server_ops import (
    CodeActionsReply,
    Diagnostics,
    DiagnosticsReply,
    DocumentSymbols,
    Hierarchy,
    HierarchyReply,
    HoverReply,
    LocationsReply,
    Navigate,
    Reload,
    Rename,
    RenameReply,
    Status,
    StatusReply,
    SymbolsReply,
    Sync,
    WorkspaceSymbols,
    read_reply,
    reply_payload,
)
from tether.messages.ops import OpError
from tether.protocol import FrameDecoder
from tether.protocol import encode as frame


class IO:
    def __init__(self) -> None:
        self.dec = FrameDecoder()
        self.sent: list[dict[str, Any]] = []
        self.timers: list[tuple[float, object]] = []
        self.results: dict[Any, tuple[bool, Any]] = {}

    def write(self, data: bytes) -> None:
        self.sent += self.dec.feed(data)

    def after(self, seconds: float, tag: object) -> None:
        self.timers.append((seconds, tag))

    def done(self, token: Any, reply: Any) -> None:
        self.results[token] = (True, reply)

    def error(self, token: Any, code: str, message: str) -> None:
        self.results[token] = (False, (code, message))


# --- the table -----------------------------------------------------------------------------
def test_a_call_settles_once_and_leaves_every_list_it_was_in():
    io = IO()
    table = OpTable(io)
    held: list[Any] = []
    table.on_settle(lambda op: held.remove(op) if op in held else None)
    op = table.add(Status(), "t", 10.0)
    held.append(op)
    assert op.deadline == 10.0 - REPLY_MARGIN and table.live(op)
    table.fail(op, "deadline", "late")
    table.done(op, HoverReply("too late"))  # a late answer after the failure: dropped
    assert io.results == {"t": (False, ("deadline", "late"))} and held == [] and not table.ops


@pytest.mark.parametrize(("server_s", "server_ms"), [(0.0, None), (0.0123456, 12.346)])
def test_an_answer_carries_the_servers_share_when_it_was_asked(server_s, server_ms):
    io = IO()
    table = OpTable(io)
    op = table.add(Navigate("hover", "/a.py", 0, 0), "t", 10.0)
    op.server_s = server_s
    table.done(op, HoverReply("x: int"))
    assert io.results["t"] == (True, HoverReply("x: int", server_ms))


# --- the wire --------------------------------------------------------------------------------
def link_at(clock: list[float]) -> tuple[ServerLink, OpTable, IO]:
    io = IO()
    table = OpTable(io)
    return ServerLink(io, lambda: clock[0], LspLimits(request_budget=5.0), table), table, io


def test_a_request_arms_the_deadline_at_its_budget_and_expires_past_it():
    clock = [100.0]
    link, table, io = link_at(clock)
    op = table.add(Status(), "t", 200.0)
    rid = link.request("textDocument/hover", {}, op.deadline, op, lambda r: None)
    assert io.sent[-1]["id"] == rid and [t for _, t in io.timers if isinstance(t, Deadline)]
    assert link.expire(104.0) == []
    clock[0] = 105.5
    (abandoned,) = link.expire(105.5)
    assert abandoned[0].id == rid and abandoned[1] is op
    assert io.sent[-1] == {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rid}}


def test_an_answer_runs_its_continuation_only_while_its_call_is_live():
    clock = [100.0]
    link, table, _io = link_at(clock)
    seen: list[Any] = []
    live, gone = table.add(Status(), "a", 200.0), table.add(Status(), "b", 200.0)
    r1 = link.request("m", {}, 200.0, live, lambda r: seen.append((live.token, r.result)))
    r2 = link.request("m", {}, 200.0, gone, lambda r: seen.append((gone.token, r.result)))
    table.fail(gone, "cancelled", "gone")
    clock[0] = 100.25
    for rid in (r1, r2):
        link.receive(frame({"jsonrpc": "2.0", "id": rid, "result": rid}))
    assert seen == [("a", r1)] and live.server_s == pytest.approx(0.25)


def test_the_servers_own_requests_and_notifications_come_back_in_order():
    link, _table, _io = link_at([100.0])
    data = frame({"jsonrpc": "2.0", "method": "$/progress", "params": {}}) + frame(
        {"jsonrpc": "2.0", "id": 7, "method": "workspace/configuration", "params": {}}
    )
    assert [e.method for e in link.receive(data)] == ["$/progress", "workspace/configuration"]


# --- readiness -------------------------------------------------------------------------------
def readiness(tmp_path: Path, server: str = "basedpyright") -> tuple[Readiness, OpTable, IO]:
    io = IO()
    row = BY_NAME[server]
    texts = Texts(Documents(Capabilities(), row.language_of), io, lambda: 100.0)
    armed: list[float] = []
    return Readiness(row, tmp_path, texts, io.after, armed.append), OpTable(io), io


def test_calls_queued_before_the_start_go_on_when_ready(tmp_path):
    ready, table, _io = readiness(tmp_path)
    op = table.add(Status(), "t", 10.0)
    ready.queue(op)
    assert ready.starting and ready.waiting(op)
    assert ready.ready() == [op] and ready.state == "ready" and not ready.waiting(op)


def test_a_warm_up_opens_the_calls_file_and_its_window_releases_the_held(tmp_path):
    (tmp_path / "a.ts").write_text("let x = 1\n")
    ready, table, io = readiness(tmp_path, "typescript-language-server")  # warms up
    assert not ready.warm
    op = table.add(Diagnostics(str(tmp_path / "a.ts")), "t", 10.0)
    ready.hold(op)
    assert [m["method"] for m in io.sent] == ["textDocument/didOpen"]
    assert {type(t) for _, t in io.timers} == {WarmWindow, WarmCap}
    assert ready.on_timer(WarmWindow()) == [op] and ready.warm


def test_the_warm_up_waits_for_its_progress_to_end(tmp_path):
    ready, table, _io = readiness(tmp_path, "typescript-language-server")
    op = table.add(WorkspaceSymbols("Cart"), "t", 10.0)
    ready.hold(op)
    title = "Initializing JS/TS language features"
    assert ready.on_progress({"token": 1, "value": {"kind": "begin", "title": title}}) == []
    assert ready.on_timer(WarmWindow()) == []  # a warm-up began: the window does not end it
    assert ready.hint() == f"it is still indexing: {title}"
    assert ready.on_progress({"token": 1, "value": {"kind": "end"}}) == [op]


def test_a_workspace_search_waits_for_the_listing_log_or_its_cap(tmp_path):
    ready, table, io = readiness(tmp_path)  # basedpyright logs "Found N source files"
    a, b = table.add(WorkspaceSymbols("X"), "a", 10.0), table.add(WorkspaceSymbols("Y"), "b", 10.0)
    assert ready.await_load(a) and ready.await_load(b)
    assert [t for _, t in io.timers] == [LoadCap()]  # one cap for all
    assert ready.hint() == "it has not finished listing the workspace's files"
    assert ready.on_log("unrelated") == []
    assert ready.on_log("Found 4 source files") == [a, b] and not ready.await_load(a)
    assert ready.on_timer(LoadCap()) == []


# --- texts -----------------------------------------------------------------------------------
def test_opening_a_missing_file_says_why_and_an_open_one_counts_as_changed(tmp_path):
    io = IO()
    texts = Texts(Documents(Capabilities(), BY_NAME["basedpyright"].language_of), io, lambda: 5.0)
    why = texts.open(tmp_path / "gone.py")
    assert isinstance(why, str) and "gone.py" in why
    (tmp_path / "a.py").write_text("x = 1\n")
    doc = texts.open(tmp_path / "a.py")
    assert not isinstance(doc, str) and texts.changed_at == {uri_of(tmp_path / "a.py"): 5.0}
    assert texts.version(doc.uri) == doc.version and texts.version("file:///nope") == 0


# --- edits -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "inside"),
    [
        (["/w"], ["/w"], ["/w"]),
        (["/w"], ["/w/sub"], ["/w/sub"]),
        (["/w/sub"], ["/w"], ["/w/sub"]),
        (["/w"], ["/elsewhere"], []),
    ],
)
def test_the_directories_inside_both(a, b, inside):
    assert inside_both([Path(p) for p in a], [Path(p) for p in b]) == [Path(p) for p in inside]


def test_a_servers_edit_without_a_write_tier_call_is_refused_and_noted(tmp_path):
    io = IO()
    caps = Capabilities()
    texts = Texts(Documents(caps, BY_NAME["basedpyright"].language_of), io, lambda: 1.0)
    table = OpTable(io)
    ready, _t, _io = readiness(tmp_path)
    notes: Any = __import__("collections").deque(maxlen=5)
    edits = Edits(tmp_path, caps, texts, table, ready, notes)
    table.add(Rename(str(tmp_path / "a.py"), 0, 0, "y"), "not write tier", 10.0)
    applied, why = edits.from_server({"changes": {}})
    assert not applied and "none is in progress" in why and list(notes)[0].endswith(why)
    assert edits.stale([tmp_path / "a.py"], since=0) == []


# --- typed replies ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("op", "reply"),
    [
        (Navigate("hover", "/a", 0, 0), HoverReply),
        (Navigate("code_actions", "/a", 0, 0), CodeActionsReply),
        (Navigate("references", "/a", 0, 0), LocationsReply),
        (Navigate("definition", "/a", 0, 0), LocationsReply),
        (Hierarchy("incoming", "/a", 0, 0), HierarchyReply),
        (DocumentSymbols("/a"), SymbolsReply),
        (WorkspaceSymbols("q"), SymbolsReply),
        (Diagnostics("/a"), DiagnosticsReply),
        (Sync(["/a"]), DiagnosticsReply),
        (Rename("/a", 0, 0, "b"), RenameReply),
        (Status(), StatusReply),
        (Reload(), StatusReply),
    ],
)
def test_each_op_declares_its_reply(op, reply):
    assert op.reply is reply


STATUS = StatusReply("basedpyright", "/w", "ready", [], "", 1.5, "utf-16", "pull", 1, 0, 0, [])


@pytest.mark.parametrize(
    "reply",
    [
        HoverReply("x: int", 1.25),
        HoverReply(""),
        LocationsReply([{"path": "/a", "line": 1, "character": 0}], 3, "utf-16"),
        CodeActionsReply([{"title": "fix"}]),
        HierarchyReply([{"path": "/a", "sites": [{"line": 2}]}], 1, [{"path": "/a"}], "utf-8"),
        SymbolsReply([{"name": "f", "kind": "function"}], "utf-16", 0.5),
        DiagnosticsReply(
            {"/a": [{"line": 1}]}, {"/b": {"before": None, "after": []}}, [], [], {}, 0.1, "push"
        ),  # fmt: skip
        RenameReply([{"path": "/a", "edits": 2}], [], [["/a", "/b"]], [], ["/c"]),
        replace(STATUS, pid=42, reloaded=True),
    ],
)
def test_a_reply_crosses_the_wire_and_comes_back_as_itself(reply):
    wire = decode(encode(Reply("c1", True, reply_payload(reply))))
    assert read_reply(type(reply), wire.payload) == reply


def test_a_writes_reply_lists_the_other_files_that_changed():
    others = {"/b": {"before": None, "after": [{"line": 1}]}, "/c": {"before": [], "after": None}}
    reply = DiagnosticsReply({}, others, [], [], {}, 0.0, "pull")
    assert reply.changed() == [("/b", None, [{"line": 1}]), ("/c", [], [])]


def test_server_ms_crosses_only_when_the_server_was_asked():
    assert reply_payload(HoverReply("x")) == {"hover": "x", "notes": []}
    assert reply_payload(HoverReply("x", 2.0)) == {"hover": "x", "server_ms": 2.0, "notes": []}


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({}, "needs 'hover'"),
        ({"hover": 3}, "hover must be str"),
        ({"hover": "x", "extra": 1}, "takes no argument 'extra'"),
    ],
)
def test_a_reply_that_does_not_fit_its_type_is_refused_saying_why(payload, says):
    with pytest.raises(OpError, match=says):
        read_reply(HoverReply, payload)
