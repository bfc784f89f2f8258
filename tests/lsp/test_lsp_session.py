"""The session state machine, sans-io: a scripted server, a fake clock, recorded writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tether.lsp.servers import BY_NAME
from tether.lsp.session import Session
from tether.protocol import FrameDecoder, encode


class FakeIO:
    def __init__(self) -> None:
        self.dec = FrameDecoder()
        self.sent: list[dict[str, Any]] = []
        self.timers: list[tuple[float, str]] = []
        self.results: dict[Any, tuple[bool, Any]] = {}
        self.t = 100.0

    def write(self, data: bytes) -> None:
        self.sent += self.dec.feed(data)

    def after(self, seconds: float, tag: str) -> None:
        self.timers.append((self.t + seconds, tag))

    def done(self, token: Any, payload: dict) -> None:
        self.results[token] = (True, payload)

    def error(self, token: Any, code: str, message: str) -> None:
        self.results[token] = (False, (code, message))

    def requests(self, method: str) -> list[dict]:
        return [m for m in self.sent if m.get("method") == method and "id" in m]

    def notes(self, method: str) -> list[dict]:
        return [m for m in self.sent if m.get("method") == method and "id" not in m]


def run_timers(io: FakeIO, s: Session, until: float) -> None:
    io.t = until
    due = sorted(t for t in io.timers if t[0] <= until)
    io.timers = [t for t in io.timers if t[0] > until]
    for _, tag in due:
        s.on_timer(tag)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("import a\n")
    return tmp_path


def start(project: Path, caps: dict, server: str = "basedpyright") -> tuple[Session, FakeIO]:
    io = FakeIO()
    s = Session(BY_NAME[server], project, io, now=lambda: io.t)
    s.start(1)
    init = io.requests("initialize")[0]
    s.feed(encode({"jsonrpc": "2.0", "id": init["id"], "result": {"capabilities": caps}}))
    return s, io


PULL_REG = {"registrations": [{"id": "d1", "method": "textDocument/diagnostic", "registerOptions": {"identifier": "basedpyright"}}]}  # fmt: skip


def answer(s: Session, req: dict, result: Any) -> None:
    s.feed(encode({"jsonrpc": "2.0", "id": req["id"], "result": result}))


def test_initialize_then_initialized_and_settings(project):
    s, io = start(project, {"hoverProvider": True})
    assert io.notes("initialized") and io.notes("workspace/didChangeConfiguration")
    assert s.state == "registering"  # basedpyright: waits for its pull registration


def test_queries_wait_for_the_pull_registration(project):
    s, io = start(project, {"hoverProvider": True, "textDocumentSync": 1})
    s.handle("diagnostics", {"path": str(project / "a.py")}, "t1", io.t + 10)
    assert not io.requests("textDocument/diagnostic")
    s.feed(
        encode(
            {"jsonrpc": "2.0", "id": 99, "method": "client/registerCapability", "params": PULL_REG}
        )
    )
    assert s.state == "ready"
    assert json.loads(json.dumps(io.sent[-1])) != {}  # answered the registration
    pull = io.requests("textDocument/diagnostic")[0]
    assert pull["params"]["identifier"] == "basedpyright"
    answer(s, pull, {"kind": "full", "resultId": "r1", "items": []})
    assert io.results["t1"][0] and io.results["t1"][1]["mode"] == "pull"


def test_no_registration_falls_back_to_push_after_the_window(project):
    s, io = start(project, {"hoverProvider": True})
    run_timers(io, s, io.t + 6)
    assert s.state == "ready" and s.status()["diagnostics_mode"] == "push"


def ready_pull(project):
    s, io = start(project, {"hoverProvider": True, "textDocumentSync": 1})
    s.feed(
        encode(
            {"jsonrpc": "2.0", "id": 99, "method": "client/registerCapability", "params": PULL_REG}
        )
    )
    return s, io


def test_unchanged_means_the_result_we_sent_not_a_late_one(project):
    s, io = ready_pull(project)
    a = project / "a.py"
    s.handle("diagnostics", {"path": str(a)}, "t0", io.t + 10)
    answer(
        s,
        io.requests("textDocument/diagnostic")[-1],
        {"kind": "full", "resultId": "r1", "items": []},
    )
    a.write_text("x: int = 'bad'\n")
    s.handle("sync", {"paths": [str(a)], "cap": 2.5}, "t1", io.t + 10)
    late = io.requests("textDocument/diagnostic")[-1]
    assert late["params"]["previousResultId"] == "r1"
    run_timers(io, s, io.t + 2.6)  # the cap passes: pending, never stale
    assert io.results["t1"][1]["pending"] == [str(a)]
    a.write_text("x = 1\n")
    s.handle("sync", {"paths": [str(a)], "cap": 2.5}, "t2", io.t + 10)
    fresh = io.requests("textDocument/diagnostic")[-1]
    bad = {"range": {"start": {"line": 0, "character": 9}, "end": {"line": 0, "character": 14}}, "message": "bad", "severity": 1}  # fmt: skip
    answer(s, late, {"kind": "full", "resultId": "r2", "items": [bad]})  # late, older version
    answer(s, fresh, {"kind": "unchanged", "resultId": "r1"})
    assert io.results["t2"][1]["files"][str(a)] == []


def test_a_write_pulls_its_open_importers_in_the_same_answer(project):
    s, io = ready_pull(project)
    a, b = project / "a.py", project / "b.py"
    s.handle("diagnostics", {"path": str(b)}, "t0", io.t + 10)  # b.py (imports a) is open
    answer(s, io.requests("textDocument/diagnostic")[-1], {"kind": "full", "resultId": "rb", "items": []})  # fmt: skip
    s.handle("sync", {"paths": [str(a)], "created": [str(a)]}, "t1", io.t + 10)
    assert io.notes("workspace/didChangeWatchedFiles")[-1]["params"]["changes"][0]["type"] == 1
    mine, importer = io.requests("textDocument/diagnostic")[-2:]
    assert [mine["params"]["textDocument"]["uri"], importer["params"]["textDocument"]["uri"]] == [
        a.as_uri(),
        b.as_uri(),
    ]  # the written file first, then the open file importing it
    answer(s, mine, {"kind": "full", "resultId": "ra", "items": []})
    assert "t1" not in io.results  # the importer is still being checked: it gets its grace
    broken = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 8}}, "message": "broken", "severity": 1}  # fmt: skip
    answer(s, importer, {"kind": "full", "resultId": "rb2", "items": [broken]})
    others = io.results["t1"][1]["others"]
    assert [d["message"] for d in others[str(b)]["after"]] == ["broken"], others


def test_a_new_write_cancels_stale_importer_checks_and_redoes_them(project):
    s, io = ready_pull(project)
    a, b = project / "a.py", project / "b.py"
    s.handle("diagnostics", {"path": str(b)}, "t0", io.t + 10)
    answer(s, io.requests("textDocument/diagnostic")[-1], {"kind": "full", "resultId": "rb", "items": []})  # fmt: skip
    s.handle("sync", {"paths": [str(a)]}, "t1", io.t + 10)
    mine, importer = io.requests("textDocument/diagnostic")[-2:]
    answer(s, mine, {"kind": "full", "resultId": "ra", "items": []})
    run_timers(io, s, io.t + 1.1)  # the grace passes: answered without the importer
    assert io.results["t1"][1]["others"] == {}
    d = project / "d.py"
    d.write_text("n = 1\n")
    s.handle("sync", {"paths": [str(d)], "created": [str(d)]}, "t2", io.t + 10)  # unrelated
    assert io.notes("$/cancelRequest")[-1]["params"]["id"] == importer["id"]  # stale: cancelled
    pulled = [r["params"]["textDocument"]["uri"] for r in io.requests("textDocument/diagnostic")]
    assert pulled[-2:] == [d.as_uri(), b.as_uri()]  # a's importer is checked again, with d


def test_push_versioned_publish_is_fresh_and_stale_one_is_not(project):
    s, io = start(project, {"hoverProvider": True, "textDocumentSync": 1}, server="gopls")
    (project / "go.mod").write_text("module x\n")
    f = project / "a.go"
    f.write_text("package a\n")
    s.handle("diagnostics", {"path": str(f)}, "t1", io.t + 10)
    s.feed(
        encode(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/publishDiagnostics",
                "params": {"uri": f.as_uri(), "version": 0, "diagnostics": [{"message": "old"}]},
            }
        )
    )
    assert "t1" not in io.results
    s.feed(
        encode(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/publishDiagnostics",
                "params": {"uri": f.as_uri(), "version": 1, "diagnostics": []},
            }
        )
    )
    assert io.results["t1"][1]["files"] == {str(f): []}


def test_server_request_with_our_id_is_answered_not_taken_for_a_response(project):
    s, io = ready_pull(project)
    s.handle("hover", {"path": str(project / "a.py"), "line0": 0, "char": 0}, "h", io.t + 10)
    hover = io.requests("textDocument/hover")[-1]
    s.feed(
        encode(
            {
                "jsonrpc": "2.0",
                "id": hover["id"],
                "method": "workspace/configuration",
                "params": {"items": [{"section": "basedpyright.analysis"}]},
            }
        )
    )
    assert "h" not in io.results
    assert io.sent[-1]["result"][0]["typeCheckingMode"] == "standard"
    answer(s, hover, {"contents": {"kind": "markdown", "value": "x: int"}})
    assert io.results["h"] == (True, {"hover": "x: int"})


def test_unadvertised_request_is_never_sent(project):
    s, io = ready_pull(project)
    s.handle("references", {"path": str(project / "a.py"), "line0": 0, "char": 0}, "r", io.t + 10)
    assert not io.requests("textDocument/references")
    assert io.results["r"] == (
        False,
        (
            "unavailable",
            "basedpyright does not offer textDocument/references (not in its advertised capabilities)",
        ),
    )


def test_deadline_is_a_clear_error(project):
    s, io = ready_pull(project)
    s.handle("hover", {"path": str(project / "a.py"), "line0": 0, "char": 0}, "h", io.t + 2)
    run_timers(io, s, io.t + 2)
    ok, (code, msg) = io.results["h"]
    assert not ok and code == "deadline" and "did not answer textDocument/hover in time" in msg
    assert io.notes("$/cancelRequest")


def test_exit_fails_everything_in_flight(project):
    s, io = ready_pull(project)
    s.handle("hover", {"path": str(project / "a.py"), "line0": 0, "char": 0}, "h", io.t + 10)
    s.on_exit(-9)
    assert io.results["h"][1][0] == "resource_died" and "exit code -9" in io.results["h"][1][1]


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("basedpyright-langserver") is None, reason="not installed: basedpyright-langserver"
)
def test_plain_harness_drives_a_real_server(tmp_path):
    """The same Session, no actors: a selector loop (tests/lsp/lsp_driver.py) and basedpyright."""
    from lsp_driver import Driver
    from lsp_support import copy_project

    root = copy_project("python", tmp_path)
    d = Driver("basedpyright", root)
    try:
        r = d.call("hover", {"path": str(root / "shapes/report.py"), "line0": 3, "char": 4})
        assert "def total_area(shapes: list[Shape]) -> float" in r["hover"]
        (root / "shapes/report.py").write_text("x: int = 'no'\n")
        out = d.call("sync", {"paths": [str(root / "shapes/report.py")]})
        assert (
            out["mode"] == "pull" and out["files"][str(root / "shapes/report.py")][0]["line"] == 1
        )
    finally:
        d.close()
