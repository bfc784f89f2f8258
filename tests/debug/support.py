"""Helpers of the debug tests: call the tool, find the session's processes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil

from tests.conftest import health_node


def ok(run: Any, args: dict[str, Any]) -> Any:
    res = run.call("debug", args)
    assert not res.is_error, res.text
    return res


def err(run: Any, args: dict[str, Any]) -> Any:
    res = run.call("debug", args)
    assert res.is_error, res.text
    return res


def session_pids(rt: Any, run_id: str) -> list[int]:
    node = health_node(rt.health(), f"run:{run_id}/debug_session:session") or {}
    return [p["pid"] for p in node.get("pids", [])[1:] if p.get("alive")]


def lldb_server() -> str:
    """lldb's gdb-remote server (`lldb-server`, or `lldb-server-NN` beside lldb-dap-NN)."""
    import shutil

    import pytest

    from tether.debug.adapters import LLDB_VERSIONS

    for name in ("lldb-server", *(f"lldb-server-{v}" for v in LLDB_VERSIONS)):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("lldb-server is not installed (apt-get install lldb-19 ships lldb-server-19)")


def read_line(fd: int, timeout: float = 10.0) -> str:
    """The first line a process wrote to `fd` (newline- or NUL-ended: lldb-server writes its
    port with a NUL), bounded in time."""
    import select

    got = b""
    while not got.endswith((b"\0", b"\n")):
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"nothing written within {timeout} s (got {got!r})"
        chunk = os.read(fd, 1)
        assert chunk, f"closed before a whole line (got {got!r})"
        got += chunk
    return got.strip(b"\0\n").decode()


def runs_freely(pid: int) -> bool:
    """`pid` is alive and neither stopped by a debugger nor traced by one."""
    try:
        proc = psutil.Process(pid)
        status = proc.status()
        with open(f"/proc/{pid}/status") as f:
            tracer = next(line for line in f if line.startswith("TracerPid:"))
    except (psutil.NoSuchProcess, OSError, StopIteration):
        return False
    stopped = (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE)
    return status not in stopped and tracer.split()[1] == "0"


def keeps_running(beat: Path, timeout: float = 10.0) -> None:
    """The program writing its heartbeat count to `beat` moves on (not left stopped)."""
    from tests.conftest import wait_until

    def count() -> str:
        try:
            return beat.read_text()
        except OSError:
            return ""

    first = wait_until(count, timeout=timeout)
    wait_until(lambda: count() not in ("", first), timeout=timeout)


def go_build(project: Path) -> Path:
    """`project/prog`, built for debugging (no inlining: a breakpoint in add must be a
    place in the binary) with the caches tether gives delve, not the user's home."""
    import subprocess

    from tether.debug.adapters import BY_NAME, adapter_env
    from tether.scratch import ProcessScratch

    build = ["go", "build", "-gcflags=all=-N -l", "-o", "prog", "."]
    scratch = ProcessScratch("go-build")
    try:
        env = adapter_env(BY_NAME["delve"], scratch)
        subprocess.run(build, cwd=project, env=env, check=True)
    finally:
        scratch.close()
    return project / "prog"
