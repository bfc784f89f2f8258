"""Cancelling an eval call reaches the kernel: the cell is interrupted (its state stays) and
the conversation's next cell answers at once - from a CallScope cancelled by another thread
(an MCP server's notifications/cancelled) and from an asyncio task cancelled by its host.
The tests share the module's tree (kernels without spares): each cancels only its own
run's cell, and the tree must be healthy after it (`shared`)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SharedTest, SharedTree, wait_until
from tether.actors.kernel import kinds
from tether.call_scope import CallScope

DESCRIPTION = "count slowly so the call can be cancelled"
# (the count is written whole, by rename: an interrupt between a truncate and its write
# would leave an empty file behind)
LOOP = (
    "import os, time\nticks = 0\nfor _ in range(80):\n    ticks += 1\n"
    "    open('ticks.new', 'w').write(str(ticks))\n    os.replace('ticks.new', 'ticks')\n"
    "    time.sleep(0.1)\n"
)


def ticks(workdir: Path) -> int:
    try:
        return int((workdir / "ticks").read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def ev(run: Any, code: str, scope: CallScope | None = None) -> Any:
    return run.call("eval", {"code": code, "description": DESCRIPTION}, scope)


@pytest.fixture(scope="module")
def shared_tree(tether_state_dir: Path) -> Iterator[SharedTree]:
    """The module's runtime: the kernel kinds, no spares (each run starts its kernel)."""
    tree = SharedTree(tether_state_dir, kinds=kinds(spares=0))
    yield tree
    tree.close()


def test_a_cancelled_scope_interrupts_the_cell_and_the_next_cell_answers_at_once(
    shared: SharedTest, tmp_path: Path
) -> None:
    run = shared.open_run("cancel-1", workdir=tmp_path)
    assert not ev(run, "kept = 'yes'").is_error
    scope = CallScope.start(timeout=60)
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(ev(run, LOOP, scope)))
    worker.start()
    wait_until(lambda: ticks(tmp_path) >= 3, timeout=30)
    cancelled_at = time.monotonic()
    scope.cancel("the client cancelled")
    worker.join(timeout=5)
    assert result and result[0].is_error and "cancelled" in result[0].text, result
    assert time.monotonic() - cancelled_at < 2.0
    after = ev(run, "(kept, ticks)")
    assert time.monotonic() - cancelled_at < 2.0, "the next cell waited for the cancelled one"
    kept, counted = eval(after.text.strip())  # noqa: S307 - our own cell's echo
    assert kept == "yes" and 3 <= counted < 80, after.text
    assert ticks(tmp_path) in (counted - 1, counted)  # the loop did not go on behind our back


def test_a_cancelled_acall_task_interrupts_the_cell(shared: SharedTest, tmp_path: Path) -> None:
    run = shared.open_run("cancel-2", workdir=tmp_path)

    async def scenario() -> tuple[float, Any]:
        task = asyncio.ensure_future(run.acall("eval", {"code": LOOP, "description": DESCRIPTION}))
        deadline = time.monotonic() + 30
        while ticks(tmp_path) < 3:
            assert time.monotonic() < deadline, "the cell never started"
            await asyncio.sleep(0.02)
        task.cancel()
        cancelled_at = time.monotonic()
        try:
            await task
        except asyncio.CancelledError:
            pass
        nxt = await run.acall("eval", {"code": "ticks", "description": DESCRIPTION})
        return time.monotonic() - cancelled_at, nxt

    elapsed, nxt = asyncio.run(scenario())
    assert elapsed < 2.0, f"the next cell answered {elapsed:.2f} s after the cancel"
    assert 3 <= int(nxt.text.strip()) < 80, nxt.text


def test_a_scope_past_its_deadline_ends_the_call_with_a_deadline_error(
    shared: SharedTest, tmp_path: Path
) -> None:
    run = shared.open_run("cancel-3", workdir=tmp_path)
    assert not ev(run, "1").is_error  # the kernel is up: the deadline is the cell's alone
    started = time.monotonic()
    res = ev(run, LOOP, CallScope.start(timeout=1.0))
    assert res.is_error and time.monotonic() - started < 3.0, res.text


def test_a_cancel_withdraws_the_card_a_cell_is_waiting_on(
    shared: SharedTest, tmp_path: Path
) -> None:
    from tether.question_ports import CallbackPort

    withdrawn: list[tuple[int, str]] = []
    port = CallbackPort(on_withdraw=lambda n, why: withdrawn.append((n, why)))
    run = shared.open_run("cancel-4", workdir=tmp_path, question_port=port)
    cell = (
        "answer = tool('ask_user', {'question': 'Proceed?', 'options': [{'label': 'yes'}]})\n"
        "open('after', 'w').write('the cell went on')\n"
    )
    scope = CallScope.start(timeout=60)
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(ev(run, cell, scope)))
    worker.start()
    card = port.next_card(timeout=30)
    assert card is not None and card.question == "Proceed?"
    cancelled_at = time.monotonic()
    scope.cancel("the client cancelled")
    worker.join(5)
    assert result and result[0].is_error and "cancelled" in result[0].text, result
    assert port.pending() == [] and withdrawn == [(card.number, "the client cancelled")], result[
        0
    ].text
    after = ev(run, "1 + 1")
    assert after.text.strip() == "2", after.text
    assert time.monotonic() - cancelled_at < 2.0, "the next cell waited for the cancelled one"
    assert not (tmp_path / "after").exists()  # interrupted at its tool() call, not resumed
