"""A tree process through ptrace and /proc, from each kind of process that runs a
conversation's code (issue 22 item 3: "read ... another process's /proc; signal or ptrace
a tree process"): a cell, a debuggee and a vibe worker in a sandbox try to ptrace-attach an
actor of the tree (its pid taken from rt.health()), to read its memory map, its memory
through /proc/PID/mem and its environment, and to read pid 1's; and the rest of the
hostile program (tests/places/hostile_probe.py): another run's file, a write outside, the
port file, the host's loopback, a signal.

The control is a host-place cell of the same runtime: run by root it attaches to the actor,
reads its memory and environment and pid 1's (the machine's init) - what `host` cannot stop.
In the sandbox the tree's pids do not exist (its own pid namespace: ptrace and kill say
ESRCH, /proc/PID is not there), and the pid 1 it sees is its own bubblewrap, never the
host's."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

from tests.conftest import wait_until
from tests.debug.support import ok
from tests.places.hostile_probe import actor_pid, attempts, kept_in_its_place, probe_source
from tests.places.test_places import needs_sandbox
from tests.vibe.test_vibe import output, spawn
from tether.tools.vibe_workers import CommandBackend, VibeConfig

pytestmark = needs_sandbox
WORKER = Path(__file__).parent.parent / "vibe" / "worker.py"
DESCRIPTION = "try to reach a tree process"


def test_a_tree_process_is_out_of_reach_of_a_sandboxed_cell_debuggee_and_worker(
    runtime: Any, tmp_path: Path
) -> None:
    a, b, h = tmp_path / "a", tmp_path / "b", tmp_path / "h"
    for d in (a, b, h):
        d.mkdir()
    (b / "secret.txt").write_text("B's secret\n")
    (a / "pyproject.toml").write_text('[project]\nname = "app"\n')
    shutil.copy(WORKER, a / "worker.py")
    config = VibeConfig(backends={"fast": CommandBackend([sys.executable, str(a / "worker.py")])})
    host = runtime.open_run("h", workdir=h)
    boxed = runtime.open_run("a", workdir=a, place="sandbox", vibe=True, vibe_config=config)
    name, pid = actor_pid(runtime.health())

    with socket.socket() as tree_port:  # a TCP port of the host's, as thespian's are
        tree_port.bind(("127.0.0.1", 0))
        tree_port.listen()

        def program(who: str) -> str:
            return probe_source(
                secret=str(b / "secret.txt"),
                outside=str(tmp_path / f"planted-{who}"),
                port_file=str(runtime.port_file),
                state=str(runtime.state_dir),
                tree_pid=pid,
                port=tree_port.getsockname()[1],
            )

        # the control: on the host the same program reaches the tree process
        res = host.call("eval", {"code": program("host"), "description": DESCRIPTION})
        seen = attempts(res.text)
        assert not res.is_error and "probe done" in res.text, res.text
        assert seen["secret"] == seen["portfile"] == seen["signal"] == "OPEN", res.text
        assert (tmp_path / "planted-host").exists(), res.text
        if os.getuid() == 0:  # root: CAP_SYS_PTRACE over every process of the machine
            for what in ("ptrace", "maps", "mem", "environ"):
                assert seen[what] == "OPEN", (what, name, pid, res.text)
        # (pid 1 of this machine is process_api, whose environment and memory root's cell
        # is refused here too, PermissionError: the sandbox's answer is not to see it)

        # a sandboxed cell
        res = boxed.call("eval", {"code": program("cell"), "description": DESCRIPTION})
        assert not res.is_error, res.text
        kept_in_its_place("cell", res.text, runtime.port_file.name, tmp_path / "planted-cell")

        # a sandboxed debuggee (debugpy's adapter and the program in the run's sandbox)
        (a / "probe_debuggee.py").write_text(program("debuggee"))
        res = ok(boxed, {"op": "launch", "program": "probe_debuggee.py"})
        text = res.text
        if "probe done" not in text:  # (the launch answered before the program ended)
            text = wait_until(
                lambda: (lambda t: t if "probe done" in t else None)(
                    ok(boxed, {"op": "output"}).text
                ),
                30,
            )
        kept_in_its_place("debuggee", text, runtime.port_file.name, tmp_path / "planted-debuggee")

        # a sandboxed vibe worker running the program as its shell command
        (a / "probe_worker.py").write_text(program("worker"))
        wid = spawn(boxed, f"sh {sys.executable} probe_worker.py")
        text = wait_until(lambda: (lambda o: o if "exit 0" in o else None)(output(boxed, wid)), 60)
        kept_in_its_place("worker", text, runtime.port_file.name, tmp_path / "planted-worker")
    assert (b / "secret.txt").read_text() == "B's secret\n"
