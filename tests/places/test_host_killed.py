"""`kill -9` of the host leaves no process of a sandbox behind: the tree's actors see their
host go, and a place's processes die with the actor that started them (parent-death
signal on bwrap, `--die-with-parent` inside, and the pid namespace ends with its init)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import psutil

from tests.conftest import wait_until
from tests.places.test_places import needs_sandbox
from tether.processes import still_running

pytestmark = needs_sandbox

HOST = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from tether.actors.kernel import kinds
    from tether.runtime import Runtime
    rt = Runtime.start(kinds=kinds(spares=0), state_dir={state!r})
    run = rt.open_run("k", workdir={work!r}, place="sandbox")
    res = run.call("eval", {{"code": "import subprocess\\n"
        "p = subprocess.Popen(['sleep', '307.25'], start_new_session=True)\\nprint('up')",
        "description": "start a child that would outlive us"}})
    print(res.text, flush=True)
    sys.stdin.read()
    """
)


def ours(mark: str, under: Path) -> list[psutil.Process]:
    """The live processes a killed host left: its `sleep <mark>` and any bubblewrap of `under`."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if mark in cmd or (str(under) in cmd and "bwrap" in cmd):
            if still_running(proc):
                found.append(proc)
    return found


def kill_9_leaves_nothing(
    host_script: str, work: Path, mark: str, under: Path, running: int
) -> None:
    """Run `host_script` (a runtime whose cell starts `sleep <mark>` and prints 'up') as a
    host process, wait for `running` of its processes, SIGKILL it, and assert that nothing
    of it is left 20 s later (`ours`)."""
    state = Path(tempfile.mkdtemp(prefix="tk-"))  # (short: a kernel's ipc socket paths fit)
    repo = str(Path(__file__).parents[2])
    script = host_script.format(repo=repo, state=str(state), work=str(work))
    host = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "up"
        assert wait_until(lambda: len(ours(mark, under)) >= running, 10)
        os.kill(host.pid, signal.SIGKILL)
        host.wait(10)
        left = lambda: ours(mark, under)  # noqa: E731
        assert wait_until(lambda: not left(), 20), [p.cmdline() for p in left()]
    finally:
        if host.poll() is None:
            host.kill()
        shutil.rmtree(state, ignore_errors=True)


def test_kill_9_of_the_host_leaves_no_sandboxed_process(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    kill_9_leaves_nothing(HOST, work, "307.25", under=work, running=1)  # the sleep, its box
