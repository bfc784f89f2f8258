"""The first `symbols` query on a fresh server finds the project's own symbols.

basedpyright answers workspace/symbol with [] until it has listed the workspace's files, and
tsserver answers "No Project" until one of its files is open: the session waits for the
former (its "Found N source files" log) and opens one file of the root for the latter.
Each test module gets its own runtime (`lsp_rt`) and each case a fresh copy of its project,
so the server is started by the query itself.
"""

from __future__ import annotations

import itertools

import pytest
from lsp_support import copy_project, lsp_rt, need  # noqa: F401 - fixtures

from tether.lsp.session.timers import Deadline, LoadCap, Registration, WarmWindow
from tether.messages.language_server_ops import WorkspaceSymbols

pytestmark = pytest.mark.slow
_ids = itertools.count()

FIRST = [
    pytest.param("python", "basedpyright", "Circle", "shapes/base.py:22: class Circle", marks=need("basedpyright-langserver")),
    pytest.param("typescript", "typescript-language-server", "Circle", "src/shapes.ts:13: class Circle", marks=need("typescript-language-server")),
]  # fmt: skip


@pytest.mark.parametrize("project, server, query, expected", FIRST)
def test_first_symbols_query_finds_the_project_symbol(
    lsp_rt,  # noqa: F811 - the fixture
    tmp_path,
    project,
    server,
    query,
    expected,
):
    root = copy_project(project, tmp_path)
    run = lsp_rt.open_run(f"first-{server}-{next(_ids)}", workdir=str(root))
    try:
        r = run.call("lsp", {"action": "symbols", "query": query})
        assert not r.is_error, r.text
        assert expected in r.text, r.text
        assert "No Project" not in r.text and "none found" not in r.text, r.text
    finally:
        run.close()


def test_sample_file_is_shallowest_then_by_name_and_skips_vendored(tmp_path):
    from tether.lsp.servers import BY_NAME, sample_file

    row = BY_NAME["typescript-language-server"]
    (tmp_path / "node_modules" / "x").mkdir(parents=True)
    (tmp_path / "node_modules" / "a.ts").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "a.ts").write_text("")
    (tmp_path / "types.d.ts").write_text("")
    (tmp_path / "web" / "deep").mkdir(parents=True)
    (tmp_path / "web" / "deep" / "a.ts").write_text("")
    (tmp_path / "web" / "z.ts").write_text("")
    (tmp_path / "web" / "b.ts").write_text("")
    assert sample_file(row, tmp_path) == tmp_path / "web" / "b.ts"
    assert sample_file(BY_NAME["gopls"], tmp_path) is None
    assert sample_file(row, tmp_path, limit=3) is None  # bounded walk


class _IO:
    """A SessionIO that records: what the session wrote, the timers it asked for, results."""

    def __init__(self) -> None:
        from tether.protocol import FrameDecoder

        self.sent: list[dict] = []
        self.timers: list[object] = []
        self.results: dict = {}
        self._dec = FrameDecoder()

    def write(self, data: bytes) -> None:
        self.sent += self._dec.feed(data)

    def after(self, seconds: float, tag: object) -> None:
        self.timers.append(tag)

    def done(self, token, payload) -> None:
        self.results[token] = payload

    def error(self, token, code, message) -> None:
        self.results[token] = (code, message)


def _ready_session(tmp_path, server: str):
    from tether.lsp.servers import BY_NAME
    from tether.lsp.session import Session
    from tether.protocol import encode

    clock = [100.0]
    io = _IO()
    s = Session(BY_NAME[server], tmp_path, io, now=lambda: clock[0])
    s.start(1)
    caps = {"workspaceSymbolProvider": True}
    s.feed(encode({"jsonrpc": "2.0", "id": io.sent[0]["id"], "result": {"capabilities": caps}}))
    if s.state == "registering":  # basedpyright: no pull registration comes here
        s.on_timer(Registration())
    assert s.state == "ready"
    return s, io, clock, encode


def test_workspace_symbols_waits_for_the_listing_log_then_asks(tmp_path):
    s, io, clock, encode = _ready_session(tmp_path, "basedpyright")
    s.handle(WorkspaceSymbols("Stock"), "t", clock[0] + 30)
    assert not [m for m in io.sent if m.get("method") == "workspace/symbol"]
    log = {"type": 3, "message": "Found 4 source files"}
    s.feed(encode({"jsonrpc": "2.0", "method": "window/logMessage", "params": log}))
    assert [m for m in io.sent if m.get("method") == "workspace/symbol"]


def test_workspace_symbols_waiting_for_the_listing_fails_at_its_deadline(tmp_path):
    s, io, clock, _ = _ready_session(tmp_path, "basedpyright")
    s.handle(WorkspaceSymbols("Stock"), "t", clock[0] + 1)
    clock[0] += 2
    s.on_timer(Deadline())
    code, message = io.results["t"]
    assert code == "deadline" and "has not finished listing the workspace's files" in message


def test_workspace_symbols_asks_anyway_when_the_listing_log_never_comes(tmp_path):
    s, io, clock, _ = _ready_session(tmp_path, "basedpyright")
    s.handle(WorkspaceSymbols("Stock"), "t", clock[0] + 30)
    assert LoadCap() in io.timers
    s.on_timer(LoadCap())
    assert [m for m in io.sent if m.get("method") == "workspace/symbol"]


def test_workspace_symbols_opens_one_root_file_first_for_tsserver(tmp_path):
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "cart.ts").write_text("export class Cart {}\n")
    s, io, clock, _ = _ready_session(tmp_path, "typescript-language-server")
    s.handle(WorkspaceSymbols("Cart"), "t", clock[0] + 30)
    opened = [m for m in io.sent if m.get("method") == "textDocument/didOpen"]
    assert [m["params"]["textDocument"]["uri"] for m in opened] == [
        (tmp_path / "web" / "cart.ts").as_uri()
    ]
    s.on_timer(WarmWindow())  # no warm-up progress began: the search goes out
    assert [m for m in io.sent if m.get("method") == "workspace/symbol"]
