"""ask_user: answered, skipped (success), timed out (error), no human (fails, never blocks)."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tether.question_ports import AsyncioPort, CallbackPort, parse_reply, render_card
from tether.questions import ALLOW, Answer, AnswerStatus, Card, CardKind, Option
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


# --- the shipped ports (tether.question_ports) -------------------------------------------


MULTI = {**Q, "multi_select": True}
FREE = {"question": "Which env?"}


def _answering(port: CallbackPort, reply: Callable[[Card], Answer | None]) -> threading.Thread:
    """A human who answers each card as it comes (None: leaves it open)."""

    def human() -> None:
        while (card := port.next_card(timeout=5)) is not None:
            answer = reply(card)
            if answer is not None:
                port.answer(card.number, answer)

    thread = threading.Thread(target=human, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("args", "answer", "status", "choices", "text"),
    [
        (Q, Answer.answered(["SQLite"]), "answered", ["SQLite"], ""),
        (MULTI, Answer.answered(["Postgres", "SQLite"]), "answered", ["Postgres", "SQLite"], ""),
        (FREE, Answer.answered(text="staging"), "answered", [], "staging"),
        (Q, Answer.skipped(), "skipped", None, None),
        (Q, Answer.answered(), "skipped", None, None),  # an empty answer is never ""
    ],
    ids=["single", "multi", "free_text", "skipped", "empty"],
)
def test_callback_port_outcomes(
    tmp_path: Path, args: dict, answer: Answer, status: str, choices: Any, text: Any
) -> None:
    shown: list[Card] = []
    port = CallbackPort(on_card=shown.append)
    _answering(port, lambda card: answer)
    with Run(workdir=tmp_path, question_port=port) as run:
        res = run.call("ask_user", args)
    assert not res.is_error and res.data["status"] == status
    if status == "answered":
        assert res.data["choices"] == choices and res.data["text"] == text
    else:
        assert res.text.endswith(PROCEED)
    assert [c.question for c in shown] == [args["question"]] and port.pending() == []


def test_callback_port_timeout_and_no_human(tmp_path: Path) -> None:
    port = CallbackPort()
    with Run(workdir=tmp_path, question_port=port, question_timeout=0.3) as run:
        res = run.call("ask_user", Q)
        assert res.is_error and res.data["status"] == "timed_out" and PROCEED in res.text
        assert port.pending() == []  # the timed-out card is not waiting any more
        with pytest.raises(ValueError, match="card #1 is not waiting"):
            port.answer(1, Answer.answered(["SQLite"]))
        port.disconnect()
        started = time.monotonic()
        res = run.call("ask_user", Q)
    assert res.is_error and res.data == {"status": "no_human"}
    assert time.monotonic() - started < 0.5 and port.next_card(timeout=0) is None


def test_callback_port_disconnect_ends_the_open_card(tmp_path: Path) -> None:
    port = CallbackPort()
    threading.Thread(
        target=lambda: port.next_card(timeout=5) and port.disconnect(), daemon=True
    ).start()
    with Run(workdir=tmp_path, question_port=port) as run:
        res = run.call("ask_user", Q)
    assert res.is_error and "the human disconnected" in res.text


def test_callback_port_refuses_answers_that_do_not_fit(tmp_path: Path) -> None:
    port = CallbackPort()
    problems: list[str] = []

    def reply(card: Card) -> Answer:
        for bad in (Answer.answered(["MySQL"]), Answer.answered(["Postgres", "SQLite"])):
            try:
                port.answer(card.number, bad)
            except ValueError as e:
                problems.append(str(e))
        return Answer.answered(["Postgres"])

    _answering(port, reply)
    with Run(workdir=tmp_path, question_port=port) as run:
        res = run.call("ask_user", Q)
    assert res.data["choices"] == ["Postgres"]
    assert problems == ["'MySQL' is not an option of card #1", "card #1 takes one option, got 2"]


def test_second_question_waits_its_turn(tmp_path: Path) -> None:
    port = CallbackPort()
    open_at_once: list[int] = []

    def reply(card: Card) -> Answer:
        open_at_once.append(len(port.pending()))
        time.sleep(0.1)  # the human reads the card (a second one must not show meanwhile)
        open_at_once.append(len(port.pending()))
        return Answer.answered(text=f"answer {card.number}")

    _answering(port, reply)
    with Run(workdir=tmp_path, question_port=port) as run:
        results: list[Any] = []
        threads = [
            threading.Thread(target=lambda q=q: results.append(run.call("ask_user", q)))
            for q in ({"question": "first?"}, {"question": "second?"})
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert sorted(r.data["text"] for r in results) == ["answer 1", "answer 2"]
    assert open_at_once == [1, 1, 1, 1]


def test_second_question_times_out_behind_an_open_one(tmp_path: Path) -> None:
    release = threading.Event()
    port = ScriptedPort(block=release)  # a human who keeps card #1 open past its timeout
    with Run(workdir=tmp_path, question_port=port, question_timeout=0.5) as run:
        first = threading.Thread(target=lambda: run.call("ask_user", {"question": "first?"}))
        first.start()
        wait_until(lambda: port.cards)
        res = run.call("ask_user", {"question": "second?"})
        release.set()
        first.join(5)
    assert res.is_error and "another question of this run stayed open" in res.text
    assert [c.question for c in port.cards] == ["first?"]  # #2 was never shown


def test_permission_card_through_the_same_port(tmp_path: Path) -> None:
    port = CallbackPort()
    seen: list[Card] = []
    _answering(port, lambda card: seen.append(card) or Answer.answered([ALLOW]))
    with Run(workdir=tmp_path, question_port=port, approval={"write": "ask"}) as run:
        res = run.call("write", {"path": "a.txt", "content": "hi\n"})
    assert not res.is_error and (tmp_path / "a.txt").read_text() == "hi\n"
    assert seen[0].kind is CardKind.PERMISSION and seen[0].tool == "write"
    assert seen[0].as_ask_user_question()["questions"][0]["header"] == "Permission"


def test_ask_user_question_shape() -> None:
    card = Card(
        1,
        CardKind.QUESTION,
        "Which database?",
        context="the service needs one",
        header="Database store",
        options=(Option("Postgres"), Option("SQLite", "one file")),
        multi_select=True,
    )
    assert card.as_ask_user_question() == {
        "questions": [
            {
                "question": "the service needs one\n\nWhich database?",
                "header": "Database sto",  # AskUserQuestion headers are at most 12 chars
                "options": [
                    {"label": "Postgres", "description": ""},
                    {"label": "SQLite", "description": "one file"},
                ],
                "multiSelect": True,
            }
        ]
    }


def _asyncio_call(tmp_path: Path, handler: Any, calls: list[dict], **kw: Any) -> list[Any]:
    async def main() -> list[Any]:
        port = AsyncioPort(asyncio.get_running_loop(), handler, connected=kw.pop("human", True))
        with Run(workdir=tmp_path, question_port=port, **kw) as run:
            return list(await asyncio.gather(*(run.acall("ask_user", c) for c in calls)))

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("args", "answer", "status", "choices", "text"),
    [
        (Q, Answer.answered(["SQLite"]), "answered", ["SQLite"], ""),
        (MULTI, Answer.answered(["Postgres", "SQLite"]), "answered", ["Postgres", "SQLite"], ""),
        (FREE, Answer.answered(text="staging"), "answered", [], "staging"),
        (Q, Answer.skipped(), "skipped", None, None),
    ],
    ids=["single", "multi", "free_text", "skipped"],
)
def test_asyncio_port_outcomes(
    tmp_path: Path, args: dict, answer: Answer, status: str, choices: Any, text: Any
) -> None:
    async def handler(card: Card) -> Answer:
        await asyncio.sleep(0.01)
        return answer

    (res,) = _asyncio_call(tmp_path, handler, [args])
    assert not res.is_error and res.data["status"] == status
    if choices is not None:
        assert res.data["choices"] == choices and res.data["text"] == text


def test_asyncio_port_timeout_cancels_the_handler(tmp_path: Path) -> None:
    cancelled = threading.Event()

    async def handler(card: Card) -> Answer:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Answer.skipped()

    (res,) = _asyncio_call(tmp_path, handler, [Q], question_timeout=0.3)
    assert res.is_error and res.data["status"] == "timed_out" and cancelled.is_set()


def test_asyncio_port_no_human_and_one_at_a_time(tmp_path: Path) -> None:
    async def never(card: Card) -> Answer:
        raise AssertionError("no card may be shown without a human")

    (res,) = _asyncio_call(tmp_path, never, [Q], human=lambda: False)
    assert res.is_error and res.data == {"status": "no_human"}
    open_now, most = [0], [0]

    async def handler(card: Card) -> Answer:
        open_now[0] += 1
        most[0] = max(most[0], open_now[0])
        await asyncio.sleep(0.1)
        open_now[0] -= 1
        return Answer.answered(text=card.question)

    results = _asyncio_call(tmp_path, handler, [{"question": f"q{i}?"} for i in range(3)])
    assert sorted(r.data["text"] for r in results) == ["q0?", "q1?", "q2?"] and most[0] == 1


# --- the terminal port, through the `tether` command ----------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _tether(*argv: str, **kw: Any) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tether.cli", *argv], env=env, **kw)


def _read_until(fd: int, needle: bytes, timeout: float = 20.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            raise AssertionError(f"no {needle!r} within {timeout} s; got {seen!r}")
        try:
            seen += os.read(fd, 4096)
        except OSError:  # the pty closed
            break
    return seen


def test_terminal_port_over_a_pty(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    proc = _tether(
        "call",
        "--workdir",
        str(tmp_path),
        "ask_user",
        json.dumps({**Q, "header": "DB"}),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    try:
        card = _read_until(master, b"then Enter:")
        assert b"[#1 DB] Which database?" in card and b"2. SQLite - one file" in card
        os.write(master, b"9\n")
        assert b"no option 9: pick 1 to 2" in _read_until(master, b"pick 1 to 2")
        os.write(master, b"sqlite\n")  # an option's label works as well as its number
        out = _read_until(master, b"chose 'SQLite'")
        assert b"The user answered question #1: chose 'SQLite'" in out
        assert proc.wait(20) == 0
    finally:
        os.close(master)
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("typed", "code", "expected"),
    [
        (b"1,2\n", 0, "chose 'Postgres', 'SQLite'"),
        (b"s\n", 0, "The user skipped question #1"),
        (b"", 1, "the terminal closed (end of input)"),
    ],
    ids=["multi", "skip", "eof"],
)
def test_terminal_port_over_a_pipe(tmp_path: Path, typed: bytes, code: int, expected: str) -> None:
    proc = _tether(
        "call",
        "--workdir",
        str(tmp_path),
        "ask_user",
        json.dumps(MULTI),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(typed, timeout=30)
    assert proc.returncode == code and expected in out.decode()
    assert "1. Postgres" in err.decode()  # the card went to stderr, the result to stdout


@pytest.mark.parametrize(("typed", "written"), [(b"1\n", True), (b"2\n", False)])
def test_permission_card_on_the_terminal(tmp_path: Path, typed: bytes, written: bool) -> None:
    args = json.dumps({"path": "a.txt", "content": "x\n"})
    proc = _tether(
        "call",
        "--workdir",
        str(tmp_path),
        "--approval",
        "write=ask",
        "write",
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(typed, timeout=30)
    assert "May I run write?" in err.decode() and "1. allow" in err.decode()
    assert (tmp_path / "a.txt").exists() is written
    assert (proc.returncode == 0) is written and (
        "the user denied it" in out.decode()
    ) is not written


def test_parse_reply_never_returns_an_empty_answer() -> None:
    card = Card(1, CardKind.QUESTION, "q", options=(Option("a"), Option("b")))
    assert parse_reply(card, "   ") == (None, 'nothing typed; type an answer, or "s" to skip')
    assert parse_reply(card, "whatever")[0] is None  # no free text on this card
    assert parse_reply(card, "2")[0] == Answer.answered(["b"])
    assert parse_reply(card, "SKIP")[0] == Answer(AnswerStatus.SKIPPED)
    assert "Type a number" in render_card(card)


def test_a_cancel_withdraws_an_open_card_from_the_port() -> None:
    from tether.call_scope import CancelHandle
    from tether.questions import ask_bounded

    taken: list[tuple[int, str]] = []
    port = CallbackPort(on_withdraw=lambda n, why: taken.append((n, why)))
    cancel, got = CancelHandle(), []
    card = Card(number=7, kind=CardKind.QUESTION, question="Go on?")
    asking = threading.Thread(target=lambda: got.append(ask_bounded(port, card, 30, cancel)))
    asking.start()
    assert port.next_card(timeout=5) == card
    cancel.cancel("the client cancelled")
    asking.join(5)
    assert got[0].status is AnswerStatus.WITHDRAWN and got[0].text == "the client cancelled"
    assert port.pending() == [] and taken == [(7, "the client cancelled")]
