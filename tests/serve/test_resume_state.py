"""A served run's kept state (tether.serve.run_state, run_store): what a snapshot holds, how
it comes back into a new run, and every way a file is refused instead of decoded blindly."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tether.questions import ALLOW, DENY, Answer, CardKind
from tether.run import Run
from tether.serve import resume_notes, run_state, run_store
from tether.serve.run_state import CardLog, RunStateError
from tether.structural.staging import StagedFile, commit, digest
from tether.tools.lsp_tool.ledger import Ledger
from tether.tools.registry import Registry
from tether.tools.results import ToolResult
from tether.tools.structural import run_staging

HANDLE = "c-" + "A" * 16


def held_run(workdir: Path) -> tuple[Run, CardLog]:
    """A run holding one of each: a staged edit, ledger entries, breakpoints, two cards."""
    (workdir / "a.py").write_text("print(1)\n")
    run = Run(workdir=workdir)
    staging, _lock = run_staging(run.state)
    path = str(run.workdir / "a.py")
    staging.stage("print($X)", "log($X)", [StagedFile("a.py", path, digest(b"print(1)\n"),
                                                      b"log(1)\n", 1)])  # fmt: skip
    ledger = run.state.setdefault("lsp", {}).setdefault("ledger", Ledger())
    ledger.fold("a.py", [{"severity": 1, "code": "E1", "message": "boom", "line": 3}] * 2)
    run.state["debug"] = {
        "breakpoints": {path: [{"line": 1, "condition": "", "hit_condition": "",
                                "log_message": "", "text": "print(1)"}]},
        "functions": [{"name": "main", "condition": "", "hit_condition": ""}],
        "exceptions": ["raised"],
        "features": {"debugpy": {}},
    }  # fmt: skip
    cards = CardLog()
    permission = run.new_card(kind=CardKind.PERMISSION, question="May I?", tool="write")
    cards.saw(permission, Answer.answered([ALLOW]))
    denied = run.new_card(kind=CardKind.PERMISSION, question="May I?", tool="eval")
    cards.saw(denied, Answer.answered([DENY]))
    return run, cards


def kept(tmp_path: Path) -> tuple[Run, CardLog, dict[str, Any]]:
    run, cards = held_run(tmp_path)
    return run, cards, json.loads(run_state.encode(run_state.snapshot(run, HANDLE, cards)))


def test_a_snapshot_comes_back_whole_in_a_new_run(tmp_path: Path) -> None:
    old, cards, _doc = kept(tmp_path)
    data = run_state.encode(run_state.snapshot(old, HANDLE, cards))
    new, new_cards = Run(workdir=tmp_path), CardLog()
    restored = run_state.restore(new, run_state.decode(data, HANDLE, new.workdir), new_cards)
    assert restored.edits == ["edit_1"] and restored.breakpoints == 2 and restored.approved == [1]
    staging, _lock = run_staging(new.state)
    edit = staging.get("edit_1")
    assert (edit.files[0].new, edit.pattern, staging.counter) == (b"log(1)\n", "print($X)", 1)
    assert staging.stage("p", "r", []).edit_id == "edit_2"  # ids go on, never reused
    old_ledger, new_ledger = old.state["lsp"]["ledger"], new.state["lsp"]["ledger"]
    assert new_ledger.counts == old_ledger.counts and new_ledger.counts["a.py"]
    assert new_ledger.lines == old_ledger.lines
    assert new_ledger.fold("a.py", [{"severity": 1, "code": "E1", "message": "boom"}] * 2) == []
    debug = new.state["debug"]
    assert debug["breakpoints"] == old.state["debug"]["breakpoints"]
    assert (debug["functions"][0]["name"], debug["exceptions"]) == ("main", ["raised"])
    assert new.new_card(kind=CardKind.QUESTION, question="?").number == 3  # after #1, #2
    assert restored.held == {"kernels": [], "debugged": True, "workers": []}


def test_a_restored_edit_is_accepted_or_refused_by_its_hash(tmp_path: Path) -> None:
    old, cards, _doc = kept(tmp_path)
    data = run_state.encode(run_state.snapshot(old, HANDLE, cards))
    for content, written in ((b"print(1)\n", b"log(1)\n"), (b"print(2)\n", b"print(2)\n")):
        (tmp_path / "a.py").write_bytes(content)
        new = Run(workdir=tmp_path)
        run_state.restore(new, run_state.decode(data, HANDLE, new.workdir), CardLog())
        staging, _lock = run_staging(new.state)
        if content == b"print(1)\n":
            assert commit(staging.get("edit_1")) == ["a.py"]
        else:
            with pytest.raises(Exception, match="changed since it was staged: a.py"):
                commit(staging.get("edit_1"))
        assert (tmp_path / "a.py").read_bytes() == written


def test_the_notes_say_what_came_back_and_what_did_not(tmp_path: Path) -> None:
    old, cards, doc = kept(tmp_path)
    doc["held"]["kernels"] = ["python"]
    new = Run(workdir=tmp_path)
    restored = run_state.restore(new, run_state.decode(json.dumps(doc).encode(), HANDLE,
                                                       new.workdir), CardLog())  # fmt: skip
    general, per_tool = resume_notes.resumed_notes(restored)
    assert "1 staged edit (edit_1" in general and "2 breakpoint(s)" in general
    assert "interpreter variables" in general and "cards #1" in general
    assert "(python) is gone" in per_tool["eval"]
    assert "launch the program again" in per_tool["debug"]
    assert "vibe_wait" not in per_tool  # no worker ran


def test_a_note_not_said_yet_is_said_after_a_second_restart(tmp_path: Path) -> None:
    _old, _cards, doc = kept(tmp_path)
    doc["held"]["kernels"] = ["python"]
    second = Run(workdir=tmp_path)
    data = json.dumps(doc).encode()
    restored = run_state.restore(second, run_state.decode(data, HANDLE, second.workdir), CardLog())
    _general, unsaid = resume_notes.resumed_notes(restored)
    # the second server saves before any eval said it: its own run had no kernel
    again = run_state.encode(run_state.snapshot(second, HANDLE, CardLog(), unsaid))
    third = Run(workdir=tmp_path)
    restored = run_state.restore(third, run_state.decode(again, HANDLE, third.workdir), CardLog())
    assert restored.held["kernels"] == []
    assert "(python) is gone" in resume_notes.resumed_notes(restored)[1]["eval"]


def _mutate(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


REFUSALS = [
    ("format", "tether-other", "not a tether run-state file"),
    ("version", 2, "version 2; this server reads version 1"),
    ("conversation", "c-BBBBBBBBBBBBBBBB", "belongs to conversation 'c-BBBBBBBBBBBBBBBB'"),
    ("workdir", "/elsewhere", "kept for the workdir '/elsewhere'"),
    ("staged.edits", {}, "staged edits are not a list"),
    ("staged.edits.0.files.0.path", "/etc/passwd", "'a.py' is not a file of the workdir"),
    ("staged.edits.0.files.0.rel", "../../etc/passwd", "is not a file of the workdir"),
    ("staged.edits.0.files.0.old_hash", "", "'a.py' has no content hash"),
    ("staged.edits.0.files.0.new", "not base64!", "new content of 'a.py' is not base64"),
    ("staged.edits.0.files.0.mode", 0o170000, "bad file mode"),
    ("staged.edits.0.files.0.replacements", -1, "has no replacement count"),
    ("ledger.a\\.py", None, "ledger"),
    ("debug.breakpoints", {"/etc/passwd": []}, "'/etc/passwd' is outside the workdir"),
    ("debug.functions", [{"name": ""}], "a breakpoint in it is not valid"),
    ("debug.exceptions", ["sometimes"], "exceptions takes raised and/or uncaught"),
    ("cards.last", -1, "card record is malformed"),
    ("held.debugged", "yes", "what the old server held is malformed"),
    ("unsaid", [], "notes not yet said are malformed"),
]


@pytest.mark.parametrize(("path", "value", "says"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_foreign_or_corrupt_document_is_refused_saying_what_is_wrong(
    tmp_path: Path, path: str, value: Any, says: str
) -> None:
    _run, _cards, doc = kept(tmp_path)
    if path.startswith("ledger."):
        doc["ledger"]["a.py"][0][3] = 0  # an entry counted zero times
    else:
        _mutate(doc, path, value)
    with pytest.raises(RunStateError, match=None) as caught:
        run_state.decode(json.dumps(doc).encode(), HANDLE, Run(workdir=tmp_path).workdir)
    assert says in str(caught.value), str(caught.value)


@pytest.mark.parametrize(("data", "says"), [(b"\x00garbage", "not JSON"), (b"[]", "not a tether")])
def test_bytes_that_are_not_a_document_are_refused(tmp_path: Path, data: bytes, says: str) -> None:
    with pytest.raises(RunStateError, match=says):
        run_state.decode(data, HANDLE, tmp_path)


def test_the_store_writes_private_files_and_reads_only_its_own(tmp_path: Path) -> None:
    store = run_store.Store(tmp_path)
    assert store.load(HANDLE) is None
    store.save(HANDLE, b"{}")
    path = store.path(HANDLE)
    modes = (os.stat(store.directory).st_mode & 0o777, os.stat(path).st_mode & 0o777)
    assert modes == (0o700, 0o600)
    assert store.load(HANDLE) == b"{}" and store.handles() == [HANDLE]
    path.chmod(0o644)
    with pytest.raises(RunStateError, match="not written by this server"):
        store.load(HANDLE)
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RunStateError, match="not a regular file"):
        store.load(HANDLE)
    with pytest.raises(RunStateError, match="not a conversation handle"):
        store.path("../../etc/passwd")
    assert store.set_aside(HANDLE) is not None and store.handles() == []


def test_the_keeping_registry_wraps_every_tool_and_the_default_stays_as_it_was() -> None:
    seen: list[tuple[str, str]] = []

    def after(run_id: str, tool: str, result: ToolResult) -> ToolResult:
        seen.append((run_id, tool))
        return ToolResult.ok("noted " + result.text)

    registry = run_store.keeping_registry(after)
    default = Registry.default()
    assert registry.names() == default.names() and len(registry.names()) > 10
    for name in default.names():
        assert registry.wrappers_for(name)[1:] == default.wrappers_for(name)
        assert all(w.__name__ != f"serve_keep_{name}" for w in default.wrappers_for(name))
    run = Run(run_id="r-1", workdir=Path.cwd(), registry=registry)
    assert run.call("read", {"path": "pyproject.toml"}).text.startswith("noted ")
    assert seen == [("r-1", "read")]
    embedded = Run(workdir=Path.cwd())  # (the default registry: no serve hook)
    assert not embedded.call("read", {"path": "pyproject.toml"}).text.startswith("noted")


class BareRuntime:
    """What `Conversations` needs of a runtime for the host-side state alone: runs with no
    actor tree (a bare `Run`: its staging, ledger and breakpoints are plain data)."""

    def open_run(self, run_id: str, **options: Any) -> Run:
        options = {k: v for k, v in options.items() if k in ("workdir", "registry", "surface")}
        return Run(run_id=run_id, **options)


def served(state: Path, workdir: Path) -> Any:
    from tether.serve.config import load
    from tether.serve.conversations import Conversations

    return Conversations(BareRuntime(), load(None, [f"app={workdir}"]), state)


def test_conversations_keep_and_resume_through_the_state_dir(tmp_path: Path) -> None:
    state, work = tmp_path / "state", tmp_path / "app"
    state.mkdir(mode=0o700)
    work.mkdir()
    (work / "a.py").write_text("print(1)\n")
    first = served(state, work)
    conversation = first.open("app")
    staging, _lock = run_staging(conversation.run.state)
    path = str(conversation.run.workdir / "a.py")
    staging.stage("p", "r", [StagedFile("a.py", path, digest(b"print(1)\n"), b"log(1)\n", 1)])
    assert first.close_all() == 1  # (the drain's last save)
    kept = state / "serve-runs" / f"{conversation.handle}.state"
    assert kept.exists() and (kept.stat().st_mode & 0o777) == 0o600
    second = served(state, work)
    assert second.resume() == [conversation.handle]
    again = second.get(conversation.handle)
    assert "1 staged edit (edit_1" in again.take_note()
    assert commit(run_staging(again.run.state)[0].get("edit_1")) == ["a.py"]
    second.close(conversation.handle)  # closed: nothing of it is kept for a restart
    assert not kept.exists() and served(state, work).resume() == []


def test_a_handles_file_that_is_not_ours_resumes_nothing(tmp_path: Path) -> None:
    state, work = tmp_path / "state", tmp_path / "app"
    state.mkdir(mode=0o700)
    work.mkdir()
    served(state, work).open("app")
    (state / "serve-conversations").chmod(0o644)  # others may read it: not one we wrote
    assert served(state, work).resume() == []
    (state / "serve-conversations").chmod(0o600)
    (state / "serve-conversations").write_text(json.dumps({"../../x": {"workdir": "app"}}))
    assert served(state, work).resume() == ["'../../x' not resumed: not a handle this server mints"]
