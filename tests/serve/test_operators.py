"""The operator's views: `tether top` in a real terminal (tmux, 80x24) with real CPU, cut to
the width, `q` to quit; `tether status --json`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]
BUSY = "import time\nt = time.time()\nwhile time.time() - t < 12:\n    pass\n'done'"


def tmux(*args: str) -> subprocess.CompletedProcess[str]:
    sock = f"tether-test-{os.getpid()}"
    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True, timeout=20)


def test_top_in_an_80x24_terminal_shows_real_cpu_fits_the_width_and_quits_on_q(
    runtime_factory: Any, tether_state_dir: Path, tmp_path: Path
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install -y tmux)")
    rt = runtime_factory()
    run = rt.open_run("top", workdir=str(tmp_path))
    busy = threading.Thread(
        target=run.call, args=("eval", {"code": BUSY, "description": "spin the CPU a while"})
    )
    busy.start()
    env = f"TETHER_STATE_DIR={tether_state_dir}"
    command = f"cd {ROOT} && {env} {sys.executable} -m tether.cli top --port {rt.admin_port} --interval 0.5"
    assert tmux("new-session", "-d", "-s", "top", "-x", "80", "-y", "24", command).returncode == 0
    try:

        def busy_row() -> list[str] | None:
            pane = tmux("capture-pane", "-p", "-t", "top").stdout.splitlines()
            kernels = [line for line in pane if "kernel" in line and line.endswith("%")]
            hot = [line for line in kernels if int(line.rsplit(None, 1)[1][:-1]) >= 20]
            return pane if hot else None

        pane = wait_until(busy_row, timeout=30, interval=0.2)
        assert pane[0].startswith("tether top  127.0.0.1:"), pane  # the header stays on top
        assert all(len(line) <= 80 for line in pane)
        tmux("send-keys", "-t", "top", "q")
        wait_until(lambda: tmux("has-session", "-t", "top").returncode != 0, timeout=10)
    finally:
        tmux("kill-server")
        busy.join(timeout=30)


def test_status_json_is_the_health_tree(runtime_factory: Any, tether_state_dir: Path) -> None:
    rt = runtime_factory()
    done = subprocess.run(
        [sys.executable, "-m", "tether.cli", "status", "--port", str(rt.admin_port), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "TETHER_STATE_DIR": str(tether_state_dir)},
    )
    assert done.returncode == 0, done.stderr
    tree = json.loads(done.stdout)
    assert tree["kind"] == "root" and tree["children"], tree
    assert all("state" in child for child in tree["children"])
