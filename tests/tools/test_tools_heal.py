"""The real tools keep working when their supervisor is killed under load: `ast_grep` (the
parser pool, supervisor:parser) and `lsp` (basedpyright, supervisor:language_server), and
when the whole tree is rebuilt (thespian's admin killed). Each tool call comes back long
before its own deadline, the tool answers again within 10 s, nothing is left running.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time

import pytest

from tests.conftest import health_node, wait_until
from tests.lsp.lsp_support import copy_project, need

pytestmark = pytest.mark.slow
_ids = itertools.count()
BACK_WITHIN = 10.0  # s until the tool answers again after the kill
CALL_BOUND = 10.0  # s any one tool call may take here (their deadlines are 30-120 s)

# the kinds the two tools call (a tree of every kind would boot, and rebuild, the others
# for nothing)
KINDS = ["tether.actors.parser", "tether.actors.language_server", "tether.actors.checker"]
CALLS = {
    "ast_grep": {"pattern": "def $F($$$A): $$$B", "language": "python"},
    "lsp": {"action": "symbols", "file": "shapes/base.py"},
}


def answered(result) -> bool:
    return not result.is_error and bool(result.text)


class ToolLoad:
    """Threads calling one tool of a run in a loop; every call timed."""

    def __init__(self, run, tool: str, threads: int = 3):
        self.run, self.tool = run, tool
        self.calls: list[tuple[float, float, bool, str]] = []  # start, end, ok, text
        self._stop = threading.Event()
        self._workers = [threading.Thread(target=self._loop, daemon=True) for _ in range(threads)]
        for worker in self._workers:
            worker.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            start = time.monotonic()
            result = self.run.call(self.tool, CALLS[self.tool])
            self.calls.append((start, time.monotonic(), answered(result), result.text[:300]))

    def back_after(self, moment: float) -> bool:
        return any(ok and start > moment for start, _, ok, _ in self.calls)

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(CALL_BOUND + 5)
            assert not worker.is_alive(), f"a {self.tool} call never came back"
        slow = [c for c in self.calls if c[1] - c[0] > CALL_BOUND]
        assert not slow, f"{self.tool} calls took longer than {CALL_BOUND} s: {slow[:2]}"


def restarts(rt, victim: str) -> int:
    """The restarts of `victim` (a supervisor) or of the whole tree ("admin")."""
    health = rt.health()
    if victim == "admin":
        return int(health["restarts"])
    return int((health_node(health, victim) or {}).get("restarts", 0))


@pytest.mark.parametrize(
    "tool,victim",
    [
        ("ast_grep", "supervisor:parser"),
        pytest.param("lsp", "supervisor:language_server", marks=need("basedpyright-langserver")),
        ("ast_grep", "admin"),
        pytest.param("lsp", "admin", marks=need("basedpyright-langserver")),
    ],
)
def test_a_tool_works_again_after_its_supervisor_or_the_admin_dies(
    runtime_factory, tmp_path, tool, victim
) -> None:
    rt = runtime_factory(kind_modules=KINDS)
    run = rt.open_run(f"heal-{next(_ids)}", workdir=str(copy_project("python", tmp_path)))
    first = run.call(tool, CALLS[tool])
    assert answered(first), first.text
    load = ToolLoad(run, tool)
    wait_until(lambda: load.back_after(0.0), timeout=30.0)
    pid = rt.admin_pid if victim == "admin" else health_node(rt.health(), victim)["pids"][0]["pid"]
    os.kill(pid, signal.SIGKILL)
    # healed once the runtime saw the death and restarted what died: a call answered before
    # that may come from an actor of the old tree still alive for a moment (the next call
    # then hears that the tree is being rebuilt)
    wait_until(lambda: restarts(rt, victim) == 1, timeout=BACK_WITHIN)
    healed = time.monotonic()
    wait_until(lambda: load.back_after(healed), timeout=BACK_WITHIN)
    load.stop()
    again = run.call(tool, CALLS[tool])
    assert answered(again) and again.text == first.text, again.text
    # a root nobody used before is started by the new supervisor (lsp: a new server)
    other = rt.open_run(f"heal-{next(_ids)}", workdir=str(copy_project("python", tmp_path / "b")))
    fresh = other.call(tool, CALLS[tool])
    assert answered(fresh) and fresh.text == first.text, fresh.text
    assert restarts(rt, victim) == 1
