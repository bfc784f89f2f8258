"""Fixtures of the vibe tests: a runtime with only the vibe_worker kind, and runs whose
workers are the scripted worker (tests/vibe/worker.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.actors.vibe import KINDS
from tether.tools.vibe_workers import CommandBackend, VibeConfig

WORKER = str(Path(__file__).with_name("worker.py"))


def config(**kw: Any) -> VibeConfig:
    backends = kw.pop(
        "backends",
        {
            "fast": CommandBackend([sys.executable, WORKER]),
            "good": CommandBackend([sys.executable, WORKER, "--stdin"], brief="stdin"),
        },
    )
    return VibeConfig(backends=backends, **kw)


@pytest.fixture
def vibe_rt(runtime_factory: Callable[..., Any]) -> Any:
    return runtime_factory(kinds=KINDS)


@pytest.fixture
def open_run(vibe_rt: Any, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    runs: list[Any] = []

    def make(run_id: str = "r", vibe_config: VibeConfig | None = None, **kw: Any) -> Any:
        run = vibe_rt.open_run(
            run_id, workdir=tmp_path, vibe=True, vibe_config=vibe_config or config(), **kw
        )
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.close()
