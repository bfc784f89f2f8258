"""The examples in examples/ run, and say what they show."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_fault_injection_shows_restarts_and_the_give_up() -> None:
    out = run_example("fault_injection.py")
    assert "gave up on echo_process:k after 5 restarts in 60 s" in out
    assert out.rstrip().endswith("shut down; no process left behind")


@pytest.mark.parametrize("seconds", ["3"])
def test_health_watch_draws_the_tree_while_a_resource_is_killed(seconds) -> None:
    out = run_example("health_watch.py", seconds)
    assert "supervisor:echo_process  [ready]" in out
    assert "restarts 1" in out and "was killed by signal 9" in out


def test_agent_server_serves_three_conversations_at_once() -> None:
    out = run_example("agent_server.py")
    assert "[builder] 2 matches in 1 file:" in out
    assert "[builder] `Item` at inventory/models.py:7:" in out
    assert "[planner] read ok: True" in out and "[planner] write refused: True" in out
    assert "[human] card #1: Ship the inventory report today?" in out
    assert "[asker] The user answered question #1: chose 'yes'" in out
    assert "PLAN.md written: False; NOTES.md written: True" in out
