"""vibe workers in a sandbox place: the scripted worker (tests/vibe/worker.py, copied into
the workspace: the sandbox sees nothing else of the checkout) in bubblewrap."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from tests.conftest import wait_until
from tests.places.test_places import needs_sandbox
from tests.vibe.test_vibe import output, spawn
from tether.actors.vibe import KINDS
from tether.tools.vibe_workers import CommandBackend, VibeConfig

pytestmark = needs_sandbox


def test_a_sandboxed_worker_runs_in_its_workspace_only(
    runtime_factory: Any, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "secret.txt").write_text("B's secret")
    (a / "mine.txt").write_text("A's own")
    worker = a / "worker.py"
    shutil.copy(Path(__file__).parent.parent / "vibe" / "worker.py", worker)
    rt = runtime_factory(kinds=KINDS)
    backends = {"fast": CommandBackend([sys.executable, str(worker)])}
    run = rt.open_run(
        "v", workdir=a, vibe=True, vibe_config=VibeConfig(backends=backends), place="sandbox"
    )
    brief = f"cat {b / 'secret.txt'}\ncat {a / 'mine.txt'}\nsh id -u\nwrite out.txt done"
    wid = spawn(run, brief)
    text = wait_until(lambda: (lambda o: o if "exit 0" in o else None)(output(run, wid)), 30)
    assert f"no {b / 'secret.txt'}" in text and "B's secret" not in text, text
    assert "A's own" in text and "1000" in text.split(), text
    assert (a / "out.txt").read_text() == "done\n"
    run.close()
