"""Caps per spawn: wall-clock time, output size, and the tool calls and tokens a worker
reports; a worker at a cap is stopped and says which cap and what it had done. Real
worker processes (tests/vibe/worker.py, tests/vibe/callables.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import gone, wait_until
from tether.tools.vibe_workers import CallableBackend, Caps, VibeConfig

from .conftest import config
from .test_vibe import pids_of, spawn


def wait(run: Any, worker_id: str) -> Any:
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 60})
    assert res.data["finished"], res.text
    return res


def test_wall_clock_cap_stops_the_worker_and_its_children(open_run: Callable[..., Any]) -> None:
    run = open_run()
    worker_id = spawn(run, "child\nstream 2000 0.02", caps={"seconds": 1})
    pids = pids_of(run, worker_id)
    done = wait(run, worker_id)
    assert done.is_error and done.data["status"] == "capped"
    assert done.data["capped"]["cap"] == "seconds" and done.data["capped"]["limit"] == 1
    assert "was stopped (stopped at its wall-clock time cap (1; used 1." in done.text
    assert "What it had done so far:" in done.text and "tick 3" in done.text
    assert 1.0 <= done.data["elapsed"] < 10
    assert wait_until(lambda: gone(pids), timeout=10)


def test_output_cap(open_run: Callable[..., Any]) -> None:
    run = open_run()
    done = wait(run, spawn(run, "stream 100000 0.0005", caps={"output_chars": 2000}))
    assert done.data["status"] == "capped" and done.data["capped"]["cap"] == "output_chars"
    assert "output size cap (2000" in done.text
    assert 2000 <= done.data["usage"]["output_chars"] < 200_000


@pytest.mark.parametrize(
    ("cap", "brief", "words"),
    [
        ("tool_calls", "usage 3 100\nusage 6 200\nsleep 30", "tool calls cap (5; used 6)"),
        ("tokens", "usage 1 4\nusage 2 9000\nsleep 30", "tokens cap (5; used 9000)"),
    ],
)
def test_reported_usage_caps(
    open_run: Callable[..., Any], cap: str, brief: str, words: str
) -> None:
    run = open_run()
    done = wait(run, spawn(run, brief, caps={cap: 5}))
    assert done.data["status"] == "capped" and words in done.text, done.text
    assert done.data["elapsed"] < 20  # stopped at the report, not after its sleep


def test_list_shows_elapsed_and_use_against_caps(open_run: Callable[..., Any]) -> None:
    caps = {"fast": Caps(seconds=600, output_chars=1_000_000, tool_calls=50, tokens=None)}
    run = open_run(vibe_config=config(caps=caps))
    reporting = spawn(run, "usage 2 1500\nstream 2000 0.02", label="rep")
    silent = spawn(run, "stream 2000 0.02", label="quiet", caps={"seconds": 300})

    def listed() -> str:
        text = str(run.call("vibe_list", {}).text)
        return text if "tool calls 2 of 50, tokens 1.5k" in text and "tick" in text else ""

    text = wait_until(listed, timeout=20)
    line = next(x for x in text.splitlines() if "'rep'" in x)
    assert (
        " s of 600 s, output " in line and " of 1M chars, tool calls 2 of 50, tokens 1.5k" in line
    )
    quiet = next(x for x in text.splitlines() if "'quiet'" in x)
    assert " s of 300 s," in quiet and "tool calls not reported" in quiet
    assert "tokens" not in quiet  # no tokens cap on this tier, none reported
    for worker_id in (reporting, silent):
        run.call("vibe_kill", {"worker_id": worker_id})


def test_callable_worker_reports_usage(open_run: Callable[..., Any]) -> None:
    backends = {"fast": CallableBackend("tests.vibe.callables:busy")}
    run = open_run(vibe_config=config(backends=backends))
    done = wait(run, spawn(run, "work", caps={"tool_calls": 3}))
    assert done.data["status"] == "capped" and "tool calls cap (3; used 3)" in done.text
    assert "call 2" in done.text and "call 3" in done.text


@pytest.mark.parametrize(
    ("caps", "error"),
    [
        ({"seconds": 4000}, "cap seconds 4000 is above the fast tier's 1800; ask for at most 1800"),
        ({"tool_calls": 0}, "`caps.tool_calls`: must be > 0; got 0"),
        ({"turns": 3}, "turns"),
    ],
)
def test_bad_caps_are_refused(
    open_run: Callable[..., Any], caps: dict[str, Any], error: str
) -> None:
    run = open_run()
    res = run.call("vibe_spawn", {"brief": "echo hi", "label": "x", "caps": caps})
    assert res.is_error and error in res.text, res.text


def test_config_caps_are_checked() -> None:
    with pytest.raises(ValueError, match=r"Caps.seconds must be a number > 0 or None, got -1"):
        Caps(seconds=-1)
    with pytest.raises(ValueError, match="VibeConfig.caps maps a tier"):
        VibeConfig(backends={}, caps={"slow": Caps()})
