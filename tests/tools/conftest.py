"""Fixtures of the tool-surface tests: a small workspace, runs over it, a scripted human."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tether.places import Place
from tether.questions import Answer, Card
from tether.run import Run


class ScriptedPort:
    """A question port whose human answers from a script (the cards are recorded)."""

    def __init__(
        self,
        answer: Callable[[Card], Answer] | Answer | None = None,
        human: bool = True,
        target_space: bool = True,
        block: threading.Event | None = None,
    ):
        self.answer = answer if answer is not None else Answer.skipped()
        self.human = human
        self.target_space = target_space
        self.block = block
        self.cards: list[Card] = []

    def human_connected(self) -> bool:
        return self.human

    def has_target_space(self) -> bool:
        return self.target_space

    def ask(self, card: Card, timeout: float) -> Answer:
        self.cards.append(card)
        if self.block is not None:
            self.block.wait(timeout + 5)
        return self.answer(card) if callable(self.answer) else self.answer


class KindsRuntime:
    """Stands in for a runtime (tether.runtime_port.RuntimePort) that has these kinds and
    no tree: for visibility tests."""

    def __init__(self, kinds: set[str]):
        self.kinds = kinds
        self.default_place = Place.host()
        self.metrics = None

    def close_run(self, run_id: str, timeout: float = 5.0) -> None:
        pass

    def connected_kinds(self) -> set[str]:
        return set(self.kinds)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(
        "import os\n\nretries = 3\n\ndef main():\n    return retries\n"
    )
    (root / "README.md").write_text("# demo\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    return root


@pytest.fixture
def run(workdir: Path) -> Iterator[Run]:
    with Run(run_id="t1", workdir=workdir) as r:
        yield r
