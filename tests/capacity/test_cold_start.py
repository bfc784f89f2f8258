"""A language server the governor evicted starts again on the next call, and that answer says
it was a cold start (issue 23): real basedpyright on a copy of examples/sample_project, a
real eviction (the budget squeezed until a kernel's start needs the server's room)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.capacity.test_governor import idle, squeeze
from tests.conftest import health_node, wait_until
from tether.actors.kernel import kinds
from tether.actors.language_server import KINDS as LSP_KINDS
from tether.capacity.policy import Settings
from tether.capacity.usage import EVICTED

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"
HOVER = {"action": "hover", "file": "inventory/models.py", "line": 7, "symbol": "Item"}


def server_name(rt) -> str:
    """The health name of the one basedpyright actor (language_server:basedpyright:<root>)."""
    found: list[str] = []

    def walk(node: dict) -> None:
        if str(node.get("name", "")).startswith("language_server:basedpyright:"):
            found.append(node["name"])
        for child in node.get("children", []):
            walk(child)

    walk(rt.health())
    assert len(found) == 1, found
    return found[0]


def test_an_evicted_language_server_says_its_next_answer_was_a_cold_start(
    runtime_factory, tmp_path
):
    work = tmp_path / "project"
    shutil.copytree(SAMPLE, work)
    # with a spare pool: its start comes first in the cell's own admission, and a spare
    # starts only into free room (it once stopped the server for itself and left the
    # kernel 'nothing may be stopped' where the server held < 189 MiB: cd8cf0b)
    rt = runtime_factory(kinds=[*LSP_KINDS, *kinds(spares=1)])
    rt.governor.settings = Settings(min_idle=0.2)
    run = rt.open_run("c1", workdir=work)
    first = run.call("lsp", HOVER)
    assert not first.is_error and "class Item" in first.text, first.text
    assert "[note]" not in first.text and "notes" not in first.data
    name = server_name(rt)
    idle(rt, name, 0.3)
    squeeze(rt, 1)  # a kernel (~100 MiB) can start only where the idle server was
    cell = run.call("eval", {"code": "1 + 1", "description": "start a kernel to need room"})
    assert cell.text.strip() == "2", cell.text
    assert rt.capacity()["evictions"].get("language_server") == 1
    # (gone for good once its actor exited: a stopping actor is listed until then, which on
    # a loaded machine took longer than 10 s once in a full run)
    wait_until(lambda: health_node(rt.health(), name) is None, timeout=30.0)
    rt.inject("memory_pressure", budget=1.0)  # room again: the next hover may start it

    again = run.call("lsp", HOVER)
    assert not again.is_error and "class Item" in again.text, again.text
    [note] = again.data["notes"]
    assert note.startswith(f"{name} was {EVICTED}")
    assert "a cold start" in note and f"[note] {note}" in again.text
    third = run.call("lsp", HOVER)  # said once: the server is warm now
    assert "[note]" not in third.text and "notes" not in third.data
