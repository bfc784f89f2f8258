"""The session state machine, sans-io: a scripted server, a fake clock, recorded writes."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tether.lsp.jsonrpc import Capabilities
from tether.lsp.servers import BY_NAME
from tether.lsp.session import Session
from tether.lsp.session.freshness import CLEAN_CHECKS
from tether.messages.calls import ResourceError
from tether.messages.language_server_ops import (
    Diagnostics,
    Hierarchy,
    LanguageServerReply,
    Navigate,
    Rename,
    Sync,
    reply_payload,
)
from tether.protocol import FrameDecoder, encode


class FakeIO:
    def __init__(self) -> None:
        self.dec = FrameDecoder()
        self.sent: list[dict[str, Any]] = []
        self.timers: list[tuple[float, object]] = []
        self.results: dict[Any, tuple[bool, Any]] = {}
        self.t = 100.0

    def write(self, data: bytes) -> None:
        self.sent += self.dec.feed(data)

    def after(self, seconds: float, tag: object) -> None:
        self.timers.append((self.t + seconds, tag))

    def done(self, token: Any, reply: LanguageServerReply) -> None:
        self.results[token] = (True, reply_payload(reply))  # as it crosses the wire

    def error(self, token: Any, code: str, message: str) -> None:
        self.results[token] = (False, (code, message))

    def requests(self, method: str) -> list[dict]:
        return [m for m in self.sent if m.get("method") == method and "id" in m]

    def notes(self, method: str) -> list[dict]:
        return [m for m in self.sent if m.get("method") == method and "id" not in m]


def run_timers(io: FakeIO, s: Session, until: float) -> None:
    io.t = until
    due = sorted((t for t in io.timers if t[0] <= until), key=lambda t: t[0])
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
    s.handle(Diagnostics(str(project / "a.py")), "t1", io.t + 10)
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
    assert s.state == "ready" and s.status().diagnostics_mode == "push"


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
    s.handle(Diagnostics(str(a)), "t0", io.t + 10)
    answer(
        s,
        io.requests("textDocument/diagnostic")[-1],
        {"kind": "full", "resultId": "r1", "items": []},
    )
    a.write_text("x: int = 'bad'\n")
    s.handle(Sync([str(a)], cap=2.5), "t1", io.t + 10)
    late = io.requests("textDocument/diagnostic")[-1]
    assert late["params"]["previousResultId"] == "r1"
    run_timers(io, s, io.t + 2.6)  # the cap passes: pending, never stale
    assert io.results["t1"][1]["pending"] == [str(a)]
    a.write_text("x = 1\n")
    s.handle(Sync([str(a)], cap=2.5), "t2", io.t + 10)
    fresh = io.requests("textDocument/diagnostic")[-1]
    bad = {"range": {"start": {"line": 0, "character": 9}, "end": {"line": 0, "character": 14}}, "message": "bad", "severity": 1}  # fmt: skip
    answer(s, late, {"kind": "full", "resultId": "r2", "items": [bad]})  # late, older version
    answer(s, fresh, {"kind": "unchanged", "resultId": "r1"})
    assert io.results["t2"][1]["files"][str(a)] == []


def test_a_write_pulls_its_open_importers_in_the_same_answer(project):
    s, io = ready_pull(project)
    a, b = project / "a.py", project / "b.py"
    s.handle(Diagnostics(str(b)), "t0", io.t + 10)  # b.py (imports a) is open
    answer(s, io.requests("textDocument/diagnostic")[-1], {"kind": "full", "resultId": "rb", "items": []})  # fmt: skip
    s.handle(Sync([str(a)], created=[str(a)]), "t1", io.t + 10)
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
    s.handle(Diagnostics(str(b)), "t0", io.t + 10)
    answer(s, io.requests("textDocument/diagnostic")[-1], {"kind": "full", "resultId": "rb", "items": []})  # fmt: skip
    s.handle(Sync([str(a)]), "t1", io.t + 10)
    mine, importer = io.requests("textDocument/diagnostic")[-2:]
    answer(s, mine, {"kind": "full", "resultId": "ra", "items": []})
    run_timers(io, s, io.t + 1.1)  # the grace passes: answered without the importer
    assert io.results["t1"][1]["others"] == {}
    d = project / "d.py"
    d.write_text("n = 1\n")
    s.handle(Sync([str(d)], created=[str(d)]), "t2", io.t + 10)  # unrelated
    assert io.notes("$/cancelRequest")[-1]["params"]["id"] == importer["id"]  # stale: cancelled
    pulled = [r["params"]["textDocument"]["uri"] for r in io.requests("textDocument/diagnostic")]
    assert pulled[-2:] == [d.as_uri(), b.as_uri()]  # a's importer is checked again, with d


def test_push_versioned_publish_is_fresh_and_stale_one_is_not(project):
    s, io = start(project, {"hoverProvider": True, "textDocumentSync": 1}, server="gopls")
    (project / "go.mod").write_text("module x\n")
    f = project / "a.go"
    f.write_text("package a\n")
    s.handle(Diagnostics(str(f)), "t1", io.t + 10)
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


def _ts_write(project: Path, text: str) -> tuple[Session, FakeIO, Path]:
    caps = {"textDocumentSync": 2, "executeCommandProvider": {"commands": ["typescript.tsserverRequest"]}}  # fmt: skip
    s, io = start(project, caps, server="typescript-language-server")
    (project / "tsconfig.json").write_text("{}")
    f = project / "a.ts"
    f.write_text(text)
    s.handle(Sync([str(f)], created=[str(f)]), "t1", io.t + 10)
    run_timers(io, s, io.t + 2.0)  # no warm-up progress began: the write goes out
    return s, io, f


def test_a_clean_write_to_a_server_silent_about_clean_files_is_confirmed_at_once(project):
    # typescript-language-server publishes nothing when a clean file stays clean: the wait
    # asks tsserver for each kind of diagnostics, and all empty answers "no diagnostics"
    s, io, f = _ts_write(project, "export const x = 1;\n")
    for kind in CLEAN_CHECKS:
        assert "t1" not in io.results
        ask = io.requests("workspace/executeCommand")[-1]
        assert ask["params"] == {"command": "typescript.tsserverRequest", "arguments": [kind, {"file": f.as_uri()}]}  # fmt: skip
        answer(s, ask, {"type": "response", "success": True, "body": []})
    ok, reply = io.results["t1"]
    assert ok and reply["files"] == {str(f): []} and reply["pending"] == [], reply


def test_a_write_with_errors_waits_for_their_publish_not_the_check(project):
    s, io, f = _ts_write(project, "export const x: number = 'a';\n")
    ask = io.requests("workspace/executeCommand")[-1]
    answer(s, ask, {"type": "response", "success": True, "body": []})  # syntax: clean
    ask = io.requests("workspace/executeCommand")[-1]
    error = {"start": {"line": 1, "offset": 14}, "end": {"line": 1, "offset": 15}, "text": "Type 'string' is not assignable", "code": 2322, "category": "error"}  # fmt: skip
    answer(s, ask, {"type": "response", "success": True, "body": [error]})
    assert len(io.requests("workspace/executeCommand")) == 2  # no suggestion check: not clean
    assert "t1" not in io.results  # the publish that a non-empty kind brings is awaited
    item = {"range": {"start": {"line": 0, "character": 13}, "end": {"line": 0, "character": 14}}, "message": "Type 'string' is not assignable", "severity": 1}  # fmt: skip
    s.feed(encode({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": f.as_uri(), "diagnostics": [item]}}))  # fmt: skip
    run_timers(io, s, io.t + 0.5)  # its quiet window
    ok, reply = io.results["t1"]
    assert ok and [d["message"] for d in reply["files"][str(f)]] == [item["message"]], reply


def test_server_request_with_our_id_is_answered_not_taken_for_a_response(project):
    s, io = ready_pull(project)
    s.handle(Navigate("hover", str(project / "a.py"), 0, 0), "h", io.t + 10)
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
    assert io.results["h"] == (True, {"hover": "x: int", "notes": []})


def test_unadvertised_request_is_never_sent(project):
    s, io = ready_pull(project)
    s.handle(Navigate("references", str(project / "a.py"), 0, 0), "r", io.t + 10)
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
    s.handle(Navigate("hover", str(project / "a.py"), 0, 0), "h", io.t + 2)
    run_timers(io, s, io.t + 2)
    ok, (code, msg) = io.results["h"]
    assert not ok and code == "deadline" and "did not answer textDocument/hover in time" in msg
    assert io.notes("$/cancelRequest")


def test_exit_fails_everything_in_flight(project):
    s, io = ready_pull(project)
    s.handle(Navigate("hover", str(project / "a.py"), 0, 0), "h", io.t + 10)
    s.on_exit(-9)
    assert io.results["h"][1][0] == "resource_died" and "exit code -9" in io.results["h"][1][1]


WORKER_OOM = 'Error occurred on background thread: {"code":"ERR_WORKER_OUT_OF_MEMORY"}'


def log(s: Session, message: str, kind: int = 1) -> None:
    s.feed(encode({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": kind, "message": message}}))  # fmt: skip


def test_a_server_that_says_its_checker_died_fails_its_calls_at_once(project):
    # basedpyright's checker thread out of heap: it lives on and would answer nobody, so the
    # calls waiting go now (resource_died: an idempotent one is retried on the restart)
    s, io = ready_pull(project)
    s.handle(Diagnostics(str(project / "a.py")), "d", io.t + 10)
    log(s, "Background thread exited with code: 1", kind=4)  # (not itself a sign: a reload's)
    assert s.state == "ready" and "d" not in io.results
    log(s, WORKER_OOM)
    ok, (code, msg) = io.results["d"]
    assert not ok and code == "resource_died" and "ERR_WORKER_OUT_OF_MEMORY" in msg, msg
    assert s.state == "failed" and "it can answer no more" in s.error_text


def test_a_server_that_breaks_while_starting_fails_its_start(project):
    s, io = start(project, {"hoverProvider": True})
    s.handle(Navigate("hover", str(project / "a.py"), 0, 0), "h", io.t + 10)
    log(s, WORKER_OOM)
    ok, (code, msg) = io.results["h"]
    assert not ok and code == "failed" and "did not start" in msg and "ERR_WORKER" in msg, msg


def test_a_server_without_the_quirk_ignores_those_words(tmp_path):
    (tmp_path / "go.mod").write_text("module m\n")
    s, io = start(tmp_path, {"hoverProvider": True}, server="gopls")
    log(s, WORKER_OOM)
    assert s.state == "ready"


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
        r = d.call(Navigate("hover", str(root / "shapes/report.py"), 3, 4))
        assert "def total_area(shapes: list[Shape]) -> float" in r["hover"]
        (root / "shapes/report.py").write_text("x: int = 'no'\n")
        out = d.call(Sync([str(root / "shapes/report.py")]))
        assert (
            out["mode"] == "pull" and out["files"][str(root / "shapes/report.py")][0]["line"] == 1
        )
    finally:
        d.close()


# --- server-initiated edits (workspace/applyEdit): only during a write-tier call, confined --------


def _rng(l1: int, c1: int, l2: int, c2: int) -> dict:
    return {"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}}


def _change(*paths: Path, text: str = "y = 2") -> dict:
    return {"changes": {p.as_uri(): [{"range": _rng(0, 0, 0, 5), "newText": text}] for p in paths}}


def server_edit(s: Session, io: FakeIO, edit: Any, rid: int = 700) -> dict:
    """Feed the server's request; return our answer's result."""
    s.feed(encode({"jsonrpc": "2.0", "id": rid, "method": "workspace/applyEdit", "params": {"label": "fix", "edit": edit}}))  # fmt: skip
    return next(m for m in io.sent if m.get("id") == rid and "method" not in m)["result"]


def serving(project: Path, write_tier: bool = True, confine: Path | None = None):
    """A ready session in the middle of a call (its textDocument/rename unanswered)."""
    s, io = start(project, {"renameProvider": True, "hoverProvider": True, "textDocumentSync": 1})
    s.feed(encode({"jsonrpc": "2.0", "id": 99, "method": "client/registerCapability", "params": PULL_REG}))  # fmt: skip
    rename = Rename(str(project / "a.py"), 0, 0, "z")
    if write_tier:  # what lsp_rename (tier write) sends; lsp (tier read) never does
        rename = replace(rename, confine=[str(confine or project)], write_tier=True)
    s.handle(rename, "call", io.t + 10)
    assert io.requests("textDocument/rename") and "call" not in io.results
    return s, io


@pytest.fixture
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("elsewhere")
    (d / "x.py").write_text("x = 1\n")
    return d


REFUSED_NO_CALL = "tether applies a server's edits only during a write-tier call of a run (lsp_rename), and none is in progress; nothing was written"  # fmt: skip


def test_server_edit_with_no_call_open_is_refused(project):
    s, io = ready_pull(project)
    assert server_edit(s, io, _change(project / "a.py")) == {"applied": False, "failureReason": REFUSED_NO_CALL}  # fmt: skip
    assert (project / "a.py").read_text() == "x = 1\n"
    assert s.status().messages == [f"refused a workspace/applyEdit from the server: {REFUSED_NO_CALL}"]  # fmt: skip


def test_server_edit_during_a_read_tier_call_is_refused(project):
    s, io = serving(project, write_tier=False)
    assert server_edit(s, io, _change(project / "a.py"))["applied"] is False
    assert (project / "a.py").read_text() == "x = 1\n"


def test_server_edit_after_the_write_call_settled_is_refused(project):
    s, io = serving(project)
    answer(s, io.requests("textDocument/rename")[-1], {"changes": {}})
    assert "call" in io.results
    assert server_edit(s, io, _change(project / "a.py"))["applied"] is False
    assert (project / "a.py").read_text() == "x = 1\n"


def test_server_edit_during_a_write_tier_call_inside_the_root_lands(project):
    s, io = serving(project)
    assert server_edit(s, io, _change(project / "a.py", project / "b.py")) == {"applied": True}
    assert [(project / n).read_text() for n in ("a.py", "b.py")] == ["y = 2\n", "y = 2t a\n"]
    assert io.notes("textDocument/didChange")[-1]["params"]["textDocument"]["uri"] == (project / "a.py").as_uri()  # fmt: skip
    answer(s, io.requests("textDocument/rename")[-1], {"changes": {}})
    assert io.results["call"][0] is True  # the write call itself goes on as usual


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink", "create", "rename_out"])
def test_server_edit_reaching_outside_the_root_is_refused_whole(project, elsewhere, how):
    s, io = serving(project)
    out = elsewhere / "x.py"
    if how == "symlink":
        (project / "link.py").symlink_to(out)
    named = {
        "absolute": out,
        "dotdot": project / ".." / elsewhere.name / "x.py",
        "symlink": project / "link.py",
    }.get(how)
    if named is not None:
        edit = _change(project / "a.py", named)  # the inside file first: still nothing lands
    elif how == "create":
        edit = {"documentChanges": [{"kind": "create", "uri": (elsewhere / "new.py").as_uri()}]}
    else:
        edit = {"documentChanges": [{"kind": "rename", "oldUri": (project / "a.py").as_uri(), "newUri": (elsewhere / "a.py").as_uri()}]}  # fmt: skip
    res = server_edit(s, io, edit)
    assert res["applied"] is False and "outside" in res["failureReason"], res
    assert (project / "a.py").read_text() == "x = 1\n" and out.read_text() == "x = 1\n"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["x.py"]


def test_server_edit_outside_the_write_calls_workspace_is_refused(project):
    (project / "pkg").mkdir()
    s, io = serving(project, confine=project / "pkg")  # the run's workspace is a subfolder
    res = server_edit(s, io, _change(project / "a.py"))
    assert res == {"applied": False, "failureReason": f"the edit would change {project / 'a.py'}, outside {project / 'pkg'}; nothing was written"}  # fmt: skip
    assert (project / "a.py").read_text() == "x = 1\n"


def test_malformed_server_edit_is_refused_and_the_session_lives_on(project):
    s, io = serving(project)
    assert server_edit(s, io, {"documentChanges": [{"kind": "create"}]})["applied"] is False
    assert server_edit(s, io, ["not", "an", "edit"], rid=701)["applied"] is False
    assert server_edit(s, io, _change(project / "a.py"), rid=702) == {"applied": True}


def test_rename_computed_before_a_server_edit_to_its_file_is_refused(project):
    """Regression: with clangd, an applyTweak landing during a rename turned `placeholder`
    into `placeassist` (the rename's unversioned edit applied to text it was not made for)."""
    s, io = serving(project)
    assert server_edit(s, io, _change(project / "a.py")) == {"applied": True}
    answer(s, io.requests("textDocument/rename")[-1], _change(project / "a.py", text="z = 1"))
    assert io.results["call"] == (False, ("failed", f"rename not applied, nothing was written by it: {project / 'a.py'} changed while basedpyright computed it (basedpyright itself changed {project / 'a.py'} during the call); call lsp_rename again"))  # fmt: skip
    assert (project / "a.py").read_text() == "y = 2\n"


def test_rename_after_a_server_edit_to_another_file_lands_and_says_so(project):
    s, io = serving(project)
    assert server_edit(s, io, _change(project / "b.py")) == {"applied": True}
    answer(s, io.requests("textDocument/rename")[-1], _change(project / "a.py", text="z = 1"))
    ok, payload = io.results["call"]
    assert ok and payload["server_edits"] == [str(project / "b.py")]
    assert [(project / n).read_text() for n in ("a.py", "b.py")] == ["z = 1\n", "y = 2t a\n"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("clangd") is None, reason="not installed: clangd")
def test_clangd_tweak_edits_land_only_during_a_write_tier_call(tmp_path):
    """A real server-initiated workspace/applyEdit: clangd answers workspace/executeCommand
    `clangd.applyTweak` by asking the client to apply the tweak's edit. Whether clangd answers
    a rename sent just before the tweak before or after it asks for the tweak's edit is its
    own scheduling (under load any order comes): each order is checked as it comes (the
    tweak may even land before clangd begins the rename, which clangd then refuses itself:
    "File must be saved first"), and the one that matters - the edit lands during the
    rename, which is then refused - must come within a few tries."""
    from lsp_driver import Driver

    (tmp_path / "compile_flags.txt").write_text("-std=c++17\n")
    main = tmp_path / "main.cpp"
    before = "static int helper() { return 1; }\nint main() {\n    int total = 1 + 2;\n    return total + helper();\n}\n"  # fmt: skip
    tweaked = "static int helper() { return 1; }\nint main() {\n  auto placeholder = 1 + 2;\n  int total = placeholder;\n  return total + helper();\n}\n"  # fmt: skip
    tweak = {"command": "clangd.applyTweak", "arguments": [{"file": main.as_uri(), "selection": _rng(2, 16, 2, 21), "tweakID": "ExtractVariable"}]}  # fmt: skip
    orders = []
    for _ in range(5):
        main.write_text(before)
        d = Driver("clangd", tmp_path)
        try:
            d.call(Navigate("hover", str(main), 0, 11))  # open, AST built
            box = d.send("workspace/executeCommand", tweak)  # no call open: refused
            d.pump_until(lambda: box)  # noqa: B023
            assert box[0].error["message"] == f"edits were not applied: {REFUSED_NO_CALL}"
            assert main.read_text() == before
            rename = Rename(str(main), 0, 11, "assist", confine=[str(tmp_path)], write_tier=True)
            token = d.start_call(rename)
            box = d.send("workspace/executeCommand", tweak)  # during a write-tier call: applied
            try:
                d.wait(token)
            except ResourceError as refused:
                if "File must be saved first" in refused.message:
                    # the tweak's edit landed before clangd began the rename, which clangd
                    # then refused itself: the tweak is in the file, nothing of the rename
                    d.pump_until(lambda: box)  # noqa: B023
                    assert box[0].result == "Tweak applied."
                    assert main.read_text() == tweaked
                    orders.append("tweak before the rename")
                    continue
                # computed on the text before the tweak
                assert re.search(r"main\.cpp changed while clangd computed it \(clangd itself changed .*main\.cpp during the call\); call lsp_rename again", refused.message), refused.message  # fmt: skip
                d.pump_until(lambda: box)  # noqa: B023
                assert box[0].result == "Tweak applied."
                assert main.read_text() == tweaked
                orders.append("tweak during the rename")
                break
            # clangd answered the rename first: it landed, and the tweak's edit came with no
            # call open, so it was refused
            d.pump_until(lambda: box)  # noqa: B023
            assert box[0].error["message"] == f"edits were not applied: {REFUSED_NO_CALL}"
            assert "assist" in main.read_text() and "placeholder" not in main.read_text()
            orders.append("rename first")
        finally:
            d.close()
    assert orders[-1] == "tweak during the rename", orders


# --- call and type hierarchy ---------------------------------------------------------------
def _item(path: Path, name: str, line: int) -> dict:
    rng = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 3}}
    return {"name": name, "kind": 12, "uri": path.as_uri(), "range": rng, "selectionRange": rng}


def _err(s: Session, req: dict, code: int, message: str) -> None:
    s.feed(encode({"jsonrpc": "2.0", "id": req["id"], "error": {"code": code, "message": message}}))


def test_a_hierarchy_the_server_does_not_advertise_is_never_sent(tmp_path):
    (tmp_path / "a.go").write_text("package a\n")
    s, io = start(tmp_path, {"callHierarchyProvider": True}, server="gopls")
    s.handle(Hierarchy("subtypes", str(tmp_path / "a.go"), 0, 0), "t", io.t + 10)
    assert not io.requests("textDocument/prepareTypeHierarchy")
    assert io.results["t"] == (False, ("unavailable", "gopls does not offer type_hierarchy subtypes (textDocument/prepareTypeHierarchy is not in its advertised capabilities). Servers in the table that have subtypes: clangd 15+, dart. Instead, lsp implementation on the type lists what implements it."))  # fmt: skip


def test_method_not_found_is_believed_and_never_asked_again(tmp_path):
    f = tmp_path / "a.c"
    f.write_text("int f(void);\n")
    s, io = start(tmp_path, {"callHierarchyProvider": True}, server="clangd")
    s.handle(Hierarchy("outgoing", str(f), 0, 4), "t1", io.t + 10)
    answer(s, io.requests("textDocument/prepareCallHierarchy")[0], [_item(f, "f", 0)])
    _err(s, io.requests("callHierarchy/outgoingCalls")[0], -32601, "method not found")
    ok, (code, message) = io.results["t1"]
    assert code == "unavailable" and message.startswith('clangd does not offer call_hierarchy outgoing (it answered callHierarchy/outgoingCalls "method not found", though it advertises the provider; clangd has it from release 20). Servers in the table that have outgoing calls: basedpyright, typescript-language-server, gopls'), message  # fmt: skip
    s.handle(Hierarchy("outgoing", str(f), 0, 4), "t2", io.t + 10)
    assert io.results["t2"][1] == (code, message)
    assert len(io.requests("textDocument/prepareCallHierarchy")) == 1  # not asked again
    s.handle(Hierarchy("incoming", str(f), 0, 4), "t3", io.t + 10)  # the other direction is
    assert len(io.requests("textDocument/prepareCallHierarchy")) == 2


def test_each_prepared_item_is_followed_and_repeats_merged(tmp_path):
    f = tmp_path / "a.c"
    f.write_text("int f(int);\nint f(long);\nint g(void) { return f(1); }\n")
    s, io = start(tmp_path, {"callHierarchyProvider": True}, server="clangd")
    s.handle(Hierarchy("incoming", str(f), 0, 4, limit=50), "t", io.t + 10)
    answer(s, io.requests("textDocument/prepareCallHierarchy")[0], [_item(f, "f", 0), _item(f, "f", 1)])  # fmt: skip
    site = {"start": {"line": 2, "character": 21}, "end": {"line": 2, "character": 22}}
    call = {"from": _item(f, "g", 2), "fromRanges": [site, site]}  # tsserver repeats sites
    answer(s, io.requests("callHierarchy/incomingCalls")[0], [call])
    assert "t" not in io.results  # the second overload is asked about too
    answer(s, io.requests("callHierarchy/incomingCalls")[1], [call])
    payload = io.results["t"][1]
    assert payload["total"] == 1 and [o["line"] for o in payload["origin"]] == [1, 2]
    (caller,) = payload["items"]
    assert (caller["name"], caller["line"], caller["sites_path"]) == ("g", 3, str(f))
    assert [(x["line"], x["character"]) for x in caller["sites"]] == [(3, 21)]


def test_a_dynamically_registered_hierarchy_covers_its_follow_ups():
    caps = Capabilities()
    caps.register({"registrations": [{"id": "c", "method": "textDocument/prepareCallHierarchy"}]})
    assert caps.supports("callHierarchy/incomingCalls") and caps.supports(
        "callHierarchy/outgoingCalls"
    )
    assert not caps.supports("typeHierarchy/subtypes")


def test_only_the_capped_callers_and_sites_cross_back(tmp_path):
    f = tmp_path / "a.c"
    f.write_text("int f(void);\n")
    s, io = start(tmp_path, {"callHierarchyProvider": True}, server="clangd")
    s.handle(Hierarchy("incoming", str(f), 0, 4, limit=50), "t", io.t + 10)
    answer(s, io.requests("textDocument/prepareCallHierarchy")[0], [_item(f, "f", 0)])
    sites = [{"start": {"line": n, "character": 1}, "end": {"line": n, "character": 2}} for n in range(30)]  # fmt: skip
    calls = [{"from": _item(f, f"g{n}", n), "fromRanges": sites} for n in range(60)]
    answer(s, io.requests("callHierarchy/incomingCalls")[0], calls)
    payload = io.results["t"][1]
    assert (len(payload["items"]), payload["total"]) == (50, 60)
    assert {(len(i["sites"]), i["sites_total"]) for i in payload["items"]} == {(20, 30)}
