"""ask_user: answered, skipped (success), timed out (error), no human (fails, never blocks)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tether.questions import Answer, CardKind
from tether.run import Run
from tether.tools.ask_user import PROCEED

from .conftest import ScriptedPort

Q = {
    "question": "Which database?",
    "context": "the service needs one",
    "options": [{"label": "Postgres"}, {"label": "SQLite", "description": "one file"}],
}


def _ask(tmp_path: Path, port: ScriptedPort, args: dict = Q, **kw) -> tuple:
    with Run(workdir=tmp_path, question_port=port, **kw) as run:
        return run.call("ask_user", args), port.cards


def test_answered(tmp_path: Path) -> None:
    res, cards = _ask(tmp_path, ScriptedPort(answer=Answer.answered(["SQLite"])))
    assert not res.is_error and res.text == "The user answered question #1: chose 'SQLite'"
    assert res.data == {"card": 1, "status": "answered", "choices": ["SQLite"], "text": ""}
    card = cards[0]
    assert card.kind is CardKind.QUESTION and card.question == "Which database?"
    assert card.context == "the service needs one"
    assert [(o.label, o.description) for o in card.options] == [
        ("Postgres", ""),
        ("SQLite", "one file"),
    ]
    assert card.allow_free_text is False and card.multi_select is False


def test_free_text(tmp_path: Path) -> None:
    port = ScriptedPort(answer=Answer.answered(text="use the staging DB"))
    res, cards = _ask(tmp_path, port, {"question": "Which env?"})
    assert res.text == "The user answered question #1: wrote: use the staging DB"
    assert cards[0].allow_free_text is True  # no options: free text by default


def test_skip_is_success_with_instruction(tmp_path: Path) -> None:
    res, _ = _ask(tmp_path, ScriptedPort(answer=Answer.skipped()))
    assert not res.is_error and res.text == f"The user skipped question #1. {PROCEED}"


def test_timeout_is_error_with_same_instruction(tmp_path: Path) -> None:
    res, _ = _ask(tmp_path, ScriptedPort(answer=Answer.timed_out()))
    assert res.is_error and res.text == f"Question #1 got no answer in time. {PROCEED}"


def test_port_overstaying_is_a_timeout(tmp_path: Path) -> None:
    never = threading.Event()
    port = ScriptedPort(answer=Answer.answered(["SQLite"]), block=never)
    port.ask = lambda card, timeout: never.wait(60) and Answer.skipped()  # type: ignore[method-assign,assignment,return-value]
    started = time.monotonic()
    res, _ = _ask(tmp_path, port, question_timeout=0.2)
    never.set()
    assert res.is_error and PROCEED in res.text
    assert time.monotonic() - started < 5


def test_no_human_fails_at_once(tmp_path: Path) -> None:
    port = ScriptedPort(human=False, block=threading.Event())
    started = time.monotonic()
    res, cards = _ask(tmp_path, port)
    assert res.is_error and cards == []
    assert res.text == f"nobody is connected to answer, so the question was not shown. {PROCEED}"
    assert time.monotonic() - started < 1


def test_cards_are_numbered(tmp_path: Path) -> None:
    port = ScriptedPort(answer=Answer.skipped())
    with Run(workdir=tmp_path, question_port=port) as run:
        run.call("ask_user", {"question": "a?"})
        res = run.call("ask_user", {"question": "b?"})
    assert [c.number for c in port.cards] == [1, 2] and "#2" in res.text


def test_multi_select(tmp_path: Path) -> None:
    port = ScriptedPort(answer=Answer.answered(["Postgres", "SQLite"]))
    res, _ = _ask(tmp_path, port, {**Q, "multi_select": True})
    assert res.data["choices"] == ["Postgres", "SQLite"]


def test_single_select_keeps_one(tmp_path: Path) -> None:
    port = ScriptedPort(answer=Answer.answered(["Postgres", "SQLite"]))
    res, _ = _ask(tmp_path, port)
    assert res.data["choices"] == ["Postgres"]


def test_duplicate_labels(tmp_path: Path) -> None:
    res, _ = _ask(
        tmp_path, ScriptedPort(), {"question": "x", "options": [{"label": "a"}, {"label": "a"}]}
    )
    assert res.is_error and "distinct label" in res.text


def test_multi_select_needs_options(tmp_path: Path) -> None:
    res, _ = _ask(tmp_path, ScriptedPort(), {"question": "x", "multi_select": True})
    assert res.is_error and "multi_select needs options" in res.text


def test_visible_on_read_only_surfaces(tmp_path: Path) -> None:
    with Run(workdir=tmp_path, question_port=ScriptedPort(), surface="plan") as run:
        assert "ask_user" in [t.name for t in run.tools()]


def test_absent_without_port(tmp_path: Path) -> None:
    with Run(workdir=tmp_path) as run:
        res = run.call("ask_user", {"question": "x"})
    assert res.is_error and "the run has no question port" in res.text
