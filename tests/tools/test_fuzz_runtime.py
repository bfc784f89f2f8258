"""Fuzz the runtime-backed tools (lsp, structural, ...) through a Run on a real Runtime:
random argument dicts end in a ToolResult — never an exception, never a hang."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tether.tools.registry import Registry
from tether.tools.spec import Needs

from .conftest import ScriptedPort
from .test_fuzz import _answer, _call_bounded, arguments

RUNTIME_NEEDS = {Needs.LANGUAGE_SERVERS, Needs.PARSER, Needs.DEBUG_SESSIONS, Needs.KERNELS}
SLOW: list[tuple[Any, ...]] = []
TOOLS = [s for s in Registry.default().specs() if s.needs & RUNTIME_NEEDS]


def _fuzz_one(run: Any, spec: Any) -> None:
    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        database=None,
    )
    @given(args=arguments(spec))
    def check(args: Any) -> None:
        started = time.monotonic()
        result = _call_bounded(run, spec.name, args, deadline=120.0)
        took = time.monotonic() - started
        if took > 5:
            SLOW.append((round(took, 1), spec.name, args, result.text[:200]))

    check()


@pytest.mark.slow
@pytest.mark.skipif(not TOOLS, reason="no runtime-backed tool family in this tree yet")
def test_fuzz_runtime_tools(runtime: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "pyproject.toml").write_text("[project]\nname = 'fuzz'\nversion = '0'\n")
    (ws / "src" / "app.py").write_text(
        "import os\n\nretries = 3\n\n\ndef main() -> int:\n    return retries\n"
    )
    (ws / "README.md").write_text("# demo\n")
    run = runtime.open_run("fuzz-rt", workdir=str(ws), question_port=ScriptedPort(answer=_answer))
    connected = run.connected()
    for spec in TOOLS:
        if spec.needs <= connected:
            _fuzz_one(run, spec)
    run.close()
    for slow in SLOW:  # informational: calls over 5 s (shown with -s)
        print("slow call:", slow)
