"""`kill -9` of the host leaves no process behind: the tree's own (thespian's admin and
logger, every actor, one forked but not yet told what it is) see their host or their
parent go, and a place's processes die with the actor that started them (parent-death
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

from tests.conftest import alive, described, state_dir_processes, wait_until
from tests.places.test_places import needs_sandbox
from tether.processes import still_running
from tether.runtime import Runtime

pytestmark = needs_sandbox

# (a host script's, before it starts the runtime) An actor forked but not yet told what it
# is (its Start) when the host dies: its supervisor holds back the Start of echo:held, as
# when a parent actor dies between a child's fork and its Start (seen after a kill -9: a
# supervisor restarting a child as the host went). It must die with its parent all the
# same (TetherActor.__init__'s parent-death signal: thespian makes the instance as the
# actor process starts its loop): nothing else watches it, it never arms its watchdog.
HOLD_A_START = """
from tether.messages.control import Start
from tether.supervisors.core import Supervisor
def _holding(send):
    return lambda self, to, msg, extra=None: (
        None if isinstance(msg, Start) and msg.key == "held" else send(self, to, msg, extra)
    )
Supervisor.send_encoded = _holding(Supervisor.send_encoded)
"""
# (once it runs, with the echo kinds) the call that makes its supervisor fork it
CALL_THE_HELD = """
import threading
threading.Thread(target=rt.call, args=("", "echo", "held", "echo", {}, 600.0), daemon=True).start()
"""
HELD_TITLE = "tether: EchoActor"  # (thespian's title for a forked actor until its Start)

HOST = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    {hold_a_start}
    from tether.actors.echo import KINDS as ECHO_KINDS
    from tether.actors.kernel import kinds
    from tether.runtime import Runtime
    rt = Runtime.start(kinds=[*kinds(spares=0), *ECHO_KINDS], state_dir={state!r})
    {call_the_held}
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
    """Run `host_script` (a runtime with the echo kinds that holds back a Start
    (`{hold_a_start}` before it starts, `{call_the_held}` after), whose cell starts `sleep
    <mark>` and prints 'up') as a host process, wait for `running` of its place's processes
    and the held actor, SIGKILL it, and assert that nothing of it is left 20 s later: no
    process of its place (`ours`), none of the tree's own (found as `rt.processes()` finds
    them, from its port file: `state_dir_processes`)."""
    state = Path(tempfile.mkdtemp(prefix="tk-"))  # (short: a kernel's ipc socket paths fit)
    repo = str(Path(__file__).parents[2])
    script = host_script.format(
        repo=repo,
        state=str(state),
        work=str(work),
        hold_a_start=HOLD_A_START,
        call_the_held=CALL_THE_HELD,
    )
    host = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "up"
        assert wait_until(lambda: len(ours(mark, under)) >= running, 10)
        # the tree's own: the admin, the logger, every actor, and the one held back
        wait_until(lambda: any(HELD_TITLE in t for t in described(state_dir_processes(state))), 10)
        tree = state_dir_processes(state)
        assert any(t.endswith(": tether: root") for t in described(tree)), described(tree)
        os.kill(host.pid, signal.SIGKILL)
        host.wait(10)

        def left() -> list[psutil.Process]:
            found = [*ours(mark, under), *alive(tree), *state_dir_processes(state)]
            return list({p.pid: p for p in found}.values())

        try:
            wait_until(lambda: not left(), 20)
        except AssertionError:
            raise AssertionError(f"left by the killed host: {described(left())}") from None
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)
        Runtime.reap_stale(state)  # (what a failure left: the next test's orphan check)
        shutil.rmtree(state, ignore_errors=True)


def test_kill_9_of_the_host_leaves_no_sandboxed_process(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    kill_9_leaves_nothing(HOST, work, "307.25", under=work, running=1)  # the sleep, its box
