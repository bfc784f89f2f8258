"""The cold-start note of an evicted language server reaches the model whichever lsp-backed
result is the server's first answer (issue 23): a write's folded diagnostics, `lsp status`,
or the next result after serve's progress probe heard it.
Real basedpyright on a copy of examples/sample_project, a real eviction (as in
test_cold_start: the budget squeezed until a kernel's start needs the idle server's room)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from tests.capacity.test_cold_start import HOVER, SAMPLE, server_name
from tests.capacity.test_governor import idle, squeeze
from tests.conftest import health_node, wait_until
from tether.actors.kernel import kinds
from tether.actors.language_server import KINDS as LSP_KINDS
from tether.call_scope import CallScope
from tether.capacity.policy import Settings
from tether.capacity.usage import EVICTED
from tether.serve.progress import indexing

BAD_LINE = 'wrong_on_purpose: int = "not an int"\n'


def evicted(runtime_factory: Any, tmp_path: Path) -> tuple[Any, Any, str]:
    """(runtime, run, the server's health name) once its basedpyright was evicted (its
    actor gone) and the budget has room again: the next call to it is a cold start."""
    work = tmp_path / "project"
    shutil.copytree(SAMPLE, work)
    rt = runtime_factory(kinds=[*LSP_KINDS, *kinds(spares=0)])  # (no spare's reservation)
    rt.governor.settings = Settings(min_idle=0.2)
    run = rt.open_run("c1", workdir=work)
    first = run.call("lsp", HOVER)
    assert not first.is_error and "[note]" not in first.text, first.text
    name = server_name(rt)
    idle(rt, name, 0.3)
    squeeze(rt, 1)  # a kernel can start only where the idle server was
    cell = run.call("eval", {"code": "1 + 1", "description": "start a kernel to need room"})
    assert cell.text.strip() == "2", cell.text
    assert rt.capacity()["evictions"].get("language_server") == 1
    # (as in test_cold_start: a stopping actor is listed until it exits, which took longer
    # than 10 s under a full run's load)
    wait_until(lambda: health_node(rt.health(), name) is None, timeout=30.0)
    rt.inject("memory_pressure", budget=1.0)
    return rt, run, name


def started_unanswered(rt: Any, run: Any, name: str) -> None:
    """Start the evicted server with a hover cancelled while it starts: the call queued for
    the start is dropped (nothing of it ran, nothing answered), so the cold-start note
    waits for the server's next answer, whoever asks."""
    scope = CallScope.start()
    late: dict[str, Any] = {}
    hover = threading.Thread(target=lambda: late.update(r=run.call("lsp", HOVER, scope=scope)))
    hover.start()
    try:
        wait_until(lambda: (health_node(rt.health(), name) or {}).get("state") == "starting", 30)
    finally:
        scope.cancel("the test gives up on it")
        hover.join(60)
    assert late["r"].is_error and "the test gives up on it" in late["r"].text, late["r"].text
    wait_until(lambda: (health_node(rt.health(), name) or {}).get("state") == "ready", 60.0)


def the_note(result: Any, name: str) -> str:
    """The one note of `result`, checked to be the cold start's and shown to the model."""
    [note] = result.data["notes"]
    assert note.startswith(f"{name} was {EVICTED}") and "a cold start" in note, note
    assert f"[note] {note}" in result.text, result.text
    return note


def test_a_write_that_is_the_first_call_after_an_eviction_says_it_was_a_cold_start(
    runtime_factory: Any, tmp_path: Path
) -> None:
    rt, run, name = evicted(runtime_factory, tmp_path)
    path = tmp_path / "project" / "inventory" / "models.py"
    wrote = run.call(
        "write", {"path": "inventory/models.py", "content": path.read_text() + BAD_LINE}
    )
    assert not wrote.is_error, wrote.text
    # the folded diagnostics: the new error; or (a cold server that has not checked the file
    # within the write's cap, as under a full run's load) the file pending after the write,
    # or its diagnostics before it not known, so what it has now is its baseline - each is
    # the server's first answer, which carries the note
    found = wrote.data["diagnostics"]
    models = ["inventory/models.py"]
    assert found["total_new"] == 1 or found["pending"] == models or found["baselined"] == models, (
        wrote.text
    )
    the_note(wrote, name)
    again = run.call("lsp", HOVER)  # said once: the server is warm now
    assert "class Item" in again.text and "[note]" not in again.text, again.text


def test_lsp_status_that_is_the_first_answer_after_an_eviction_says_it_was_a_cold_start(
    runtime_factory: Any, tmp_path: Path
) -> None:
    rt, run, name = evicted(runtime_factory, tmp_path)
    gone = run.call("lsp", {"action": "status"})  # nothing runs: nothing asked, nothing said
    assert "[note]" not in gone.text and not gone.data["running"], gone.text
    started_unanswered(rt, run, name)
    status = run.call("lsp", {"action": "status"})
    assert [s["server"] for s in status.data["running"]] == ["basedpyright"], status.text
    the_note(status, name)
    again = run.call("lsp", HOVER)
    assert "class Item" in again.text and "[note]" not in again.text, again.text


def test_a_note_a_progress_probe_heard_is_told_in_the_next_lsp_result(
    runtime_factory: Any, tmp_path: Path
) -> None:
    rt, run, name = evicted(runtime_factory, tmp_path)
    started_unanswered(rt, run, name)
    said = indexing(run)  # serve's progress probe asks the status: the server's first answer
    assert "[note]" not in said and "evicted" not in said, said  # (told to no model)
    again = run.call("lsp", HOVER)
    assert "class Item" in again.text, again.text
    the_note(again, name)
    third = run.call("lsp", HOVER)
    assert "[note]" not in third.text and "notes" not in third.data, third.text
