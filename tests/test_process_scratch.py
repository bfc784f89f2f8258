"""Nothing outside the workspace is written, whoever asks: a kernel's cell, a debuggee, a
vibe worker included. Each such process gets its own scratch directory (TMPDIR, the XDG
state and data homes) inside the runtime's private one (`tether.scratch`), which lives as
long as the process and is removed after it.

HOME, TMPDIR and every XDG directory point at fresh empty directories of the test before
the runtime starts (its actors and their processes inherit them). The user's program
writes a temp file (tempfile.mkstemp, Deno.makeTempFileSync): it lands in the process's
scratch under the runtime's state dir, the scratch is gone once the process ended, and
the test's HOME, TMPDIR and XDG directories are still empty after shutdown."""

from __future__ import annotations

import os
import re
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import health_node, shutdown_without_orphans, wait_until
from tests.outside_dirs import fresh_outside, written
from tether.actors.kernel import kinds as kernel_kinds
from tether.actors.vibe import KINDS as VIBE_KINDS
from tether.debug import adapters
from tether.kernels.launch import KernelUnavailable, deno_binary
from tether.tools.vibe_workers import CommandBackend, VibeConfig

pytestmark = pytest.mark.slow
TEMP_LINE = re.compile(r"temp (\S+)")


def scratch_of(text: str, state: Path) -> Path:
    """The scratch directory of the process that printed `temp PATH` (PATH: its temp file,
    in <scratch>/tmp), checked to be under the runtime's private directory."""
    found = TEMP_LINE.search(text)
    assert found, f"no temp file reported in: {text!r}"
    temp = Path(found.group(1))
    assert temp.is_file(), f"{temp} is not there while its process lives"
    assert temp.parent.name == "tmp", temp
    scratch = temp.parent.parent
    assert state in scratch.parents, f"{temp} is not under the runtime's {state}"
    return scratch


def _no_deno() -> str:
    try:
        deno_binary()
    except KernelUnavailable as exc:
        return str(exc)
    return ""


CELLS = {
    "python": (
        "import os, tempfile\nfd, path = tempfile.mkstemp()\nos.write(fd, b'cell')\n"
        "os.close(fd)\nprint('temp', path)"
    ),
    "javascript": "console.log('temp ' + Deno.makeTempFileSync())",
}


@pytest.mark.parametrize(
    "language, spares",
    [
        ("python", 0),
        ("python", 1),  # the kernel started by the pool, handed over to the run
        pytest.param(
            "javascript", 0, marks=pytest.mark.skipif(bool(_no_deno()), reason=_no_deno())
        ),
    ],
)
def test_a_kernel_writes_its_temp_files_into_its_own_scratch(
    runtime_factory: Any,
    tether_state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    language: str,
    spares: int,
) -> None:
    outside = fresh_outside(tmp_path, monkeypatch)
    (tmp_path / "ws").mkdir()
    rt = runtime_factory(kinds=kernel_kinds(spares=spares))
    run = rt.open_run(f"k-{language}-{spares}", workdir=str(tmp_path / "ws"))

    def ev(code: str, **extra: Any) -> Any:
        args = {"code": code, "description": "write a temp file here", "language": language}
        res = run.call("eval", {**args, **extra})
        assert not res.is_error, res.text
        return res

    first = scratch_of(ev(CELLS[language]).text, tether_state_dir)
    if language == "python":  # %pip works, its cache the shared kept one
        cache = ev("%pip cache dir").text.strip().splitlines()[-1]
        assert Path(cache) == tether_state_dir / "cache" / "pip", cache
    # a new kernel: the first one's scratch went with it, the new one has its own
    second = scratch_of(ev(CELLS[language], reset=True).text, tether_state_dir)
    assert second != first
    wait_until(lambda: not first.exists(), timeout=10)
    shutdown_without_orphans(rt)
    assert not second.exists()
    assert written(outside) == []  # HOME, TMPDIR, XDG dirs: nothing


def test_a_sigkilled_kernel_actors_scratch_is_reaped_by_the_next_kernel(
    runtime_factory: Any, tether_state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The actor that started a kernel is SIGKILLed (no cleanup runs; its kernel dies with
    it): the next kernel started removes the scratch it left."""
    outside = fresh_outside(tmp_path, monkeypatch)
    (tmp_path / "ws").mkdir()
    rt = runtime_factory(kinds=kernel_kinds(spares=0))
    run = rt.open_run("k-killed", workdir=str(tmp_path / "ws"))

    def ev(code: str) -> Any:
        return run.call("eval", {"code": code, "description": "write a temp file here"})

    first = scratch_of(ev(CELLS["python"]).text, tether_state_dir)
    node = health_node(rt.health(), "run:k-killed/kernel:python")
    assert node is not None
    actor_pid = node["pids"][0]["pid"]
    os.kill(actor_pid, signal.SIGKILL)
    wait_until(lambda: not psutil.pid_exists(actor_pid), timeout=10)
    assert first.is_dir()  # nobody removed it: the process that would have is gone

    def next_cell() -> str:
        res = ev(CELLS["python"])  # (the first call after the kill may say: call again)
        return "" if res.is_error else res.text

    second = scratch_of(wait_until(next_cell, timeout=30), tether_state_dir)
    assert second != first and not first.exists()
    shutdown_without_orphans(rt)
    assert written(outside) == []


DEBUGGEE = textwrap.dedent(
    """\
    import os
    import tempfile

    fd, path = tempfile.mkstemp()
    os.write(fd, b"debuggee")
    os.close(fd)
    print("temp", path, flush=True)
    done = True
    """
)


def test_a_debuggee_writes_its_temp_files_into_its_adapters_scratch(
    runtime_factory: Any, tether_state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not adapters.find_binary(adapters.BY_NAME["debugpy"]):
        pytest.skip(
            f"debug adapter debugpy is not installed: {adapters.BY_NAME['debugpy'].install}"
        )
    outside = fresh_outside(tmp_path, monkeypatch)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (ws / "app.py").write_text(DEBUGGEE)
    rt = runtime_factory()
    run = rt.open_run("dbg", workdir=str(ws))

    def debug(args: dict[str, Any]) -> Any:
        res = run.call("debug", args)
        assert not res.is_error, res.text
        return res

    debug({"op": "breakpoints", "file": "app.py", "lines": [8]})
    stopped = debug({"op": "launch", "program": "app.py"})
    assert stopped.text.startswith("stopped at app.py:8"), stopped.text
    scratch = scratch_of(debug({"op": "output"}).text, tether_state_dir)
    exited = debug({"op": "continue"})
    assert "exited with code 0" in exited.text, exited.text
    debug({"op": "terminate"})  # the adapter ends: its scratch (and its program's) goes
    wait_until(lambda: not scratch.exists(), timeout=10)
    shutdown_without_orphans(rt)
    assert written(outside) == []


WORKER = (
    "import sys, tempfile\nfd, path = tempfile.mkstemp()\nprint('temp', path, flush=True)\n"
    "sys.stdin.readline()"  # (until killed)
)


@pytest.mark.parametrize("backend_env", ["none", "pointing_elsewhere"])
def test_a_vibe_worker_writes_its_temp_files_into_its_own_scratch(
    runtime_factory: Any,
    tether_state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend_env: str,
) -> None:
    outside = fresh_outside(tmp_path, monkeypatch)
    (tmp_path / "ws").mkdir()
    rt = runtime_factory(kinds=VIBE_KINDS)
    # a backend's configured env may not move the places a worker writes out of its scratch
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = (
        {}
        if backend_env == "none"
        else {"TMPDIR": str(elsewhere), "XDG_STATE_HOME": str(elsewhere)}
    )
    backends = {"fast": CommandBackend([sys.executable, "-c", WORKER], env=env)}
    run = rt.open_run(
        "vibe", workdir=tmp_path / "ws", vibe=True, vibe_config=VibeConfig(backends=backends)
    )
    res = run.call("vibe_spawn", {"brief": "write a temp file", "label": "temp"})
    assert not res.is_error, res.text
    worker_id = str(res.data["worker_id"])

    def output() -> str:
        assert not run.call("vibe_list", {}).is_error
        return str(run.state["vibe"].get(worker_id).snapshot.output)

    scratch = scratch_of(
        wait_until(lambda: TEMP_LINE.search(output()) and output(), 20), tether_state_dir
    )
    killed = run.call("vibe_kill", {"worker_id": worker_id})
    assert not killed.is_error, killed.text
    wait_until(lambda: not scratch.exists(), timeout=10)
    run.close()
    shutdown_without_orphans(rt)
    assert written(outside) == []
    assert list(elsewhere.iterdir()) == []
