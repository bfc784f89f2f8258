"""The operator's views: `tether top` in a real terminal (tmux, 80x24) with real CPU, cut to
the width, `q` to quit; `tether status --json`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]
# spins until the test has seen it (a `stop` file in the workdir), 60 s at most: a fixed
# 12 s could end before a loaded machine had the kernel and `top` both up
BUSY = (
    "import os, time\nt = time.time()\n"
    "while time.time() - t < 60 and not os.path.exists('stop'):\n    pass\n'done'"
)


def tmux(sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """tmux on a server of its own, whose socket is in the test's tmp_path (not /tmp)."""
    argv = ["tmux", "-S", str(sock), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20)


def test_top_in_an_80x24_terminal_shows_real_cpu_fits_the_width_and_quits_on_q(
    runtime_factory: Any, tether_state_dir: Path, tmp_path: Path
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install -y tmux)")
    rt = runtime_factory()
    sock = tmp_path / "tmux.sock"
    run = rt.open_run("top", workdir=str(tmp_path))
    busy = threading.Thread(
        target=run.call, args=("eval", {"code": BUSY, "description": "spin the CPU a while"})
    )
    busy.start()
    env = f"TETHER_STATE_DIR={tether_state_dir}"
    command = f"cd {ROOT} && {env} {sys.executable} -m tether.cli top --port {rt.admin_port} --interval 0.5"
    started = tmux(sock, "new-session", "-d", "-s", "top", "-x", "80", "-y", "24", command)
    assert started.returncode == 0, started.stderr
    try:

        def busy_row() -> list[str] | None:
            pane = tmux(sock, "capture-pane", "-p", "-t", "top").stdout.splitlines()
            # (the cpu column is not always the last: a place column follows once a node
            # names its place, cut at the terminal's width)
            cpu = [re.findall(r" (\d+)%", line) for line in pane if "kernel" in line]
            hot = [found for found in cpu if found and int(found[-1]) >= 20]
            return pane if hot else None

        pane = wait_until(busy_row, timeout=50, interval=0.2)
        (tmp_path / "stop").touch()
        assert pane[0].startswith("tether top  127.0.0.1:"), pane  # the header stays on top
        assert all(len(line) <= 80 for line in pane)
        tmux(sock, "send-keys", "-t", "top", "q")
        wait_until(lambda: tmux(sock, "has-session", "-t", "top").returncode != 0, timeout=10)
    finally:
        (tmp_path / "stop").touch()
        tmux(sock, "kill-server")
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
