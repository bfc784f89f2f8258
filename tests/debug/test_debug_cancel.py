"""A cancelled `continue` (its CallScope cancelled, as an MCP client's cancel does) pauses
the program on the real adapter: the call ends at once, and the conversation's next call
finds the program stopped where it was, within 2 s of the cancel."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from tests.conftest import in_flight
from tests.debug.support import ok
from tether.call_scope import CallScope

PROGRAM = """\
import time

n = 0
while True:
    n += 1
    time.sleep(0.01)
"""


def test_a_cancelled_continue_pauses_the_program(runtime: Any, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "loop"\n')
    (tmp_path / "loop.py").write_text(PROGRAM)
    run = runtime.open_run("dbg-cancel", workdir=str(tmp_path))
    ok(run, {"op": "breakpoints", "file": "loop.py", "lines": [3]})
    assert ok(run, {"op": "launch", "program": "loop.py"}).text.startswith("stopped at loop.py:3")
    ok(run, {"op": "breakpoints", "file": "loop.py", "lines": []})
    scope = CallScope.start(timeout=120)
    box: list[Any] = []
    waiting = threading.Thread(
        target=lambda: box.append(run.call("debug", {"op": "continue", "wait": 60}, scope))
    )
    waiting.start()
    # the continue reached the adapter (a cancel before that is the queued case, which the
    # actor drops without running anything)
    in_flight(runtime, "run:dbg-cancel/debug_session:session", timeout=10)
    cancelled_at = time.monotonic()
    scope.cancel("the client cancelled")
    waiting.join(5)
    assert box and box[0].is_error and "cancelled" in box[0].text, box
    status = ok(run, {"op": "status"})
    assert "stopped" in status.text, status.text
    stack = ok(run, {"op": "stack"})
    assert "loop.py" in stack.text, stack.text
    assert time.monotonic() - cancelled_at < 2.0
    counted = ok(run, {"op": "evaluate", "expression": "n"}).text
    assert int(counted.split()[-1].strip("'")) > 0, counted
    ok(run, {"op": "terminate"})
