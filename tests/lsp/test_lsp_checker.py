"""The project checker belongs to the tree: `lsp diagnostics "*"` runs it as the subprocess
of a `checker` actor, so it dies with shutdown(), with its host, and is reaped by the next
start when neither could take it down; a run whose callers all gave up is stopped.

A real basedpyright on a generated project big enough to take several seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
from lsp_support import need

from tests.conftest import wait_until
from tether.lsp.servers import make_key
from tether.messages.calls import ErrorCode, ResourceError
from tether.messages.checker_ops import Check
from tether.processes import still_running

pytestmark = [pytest.mark.slow, need("basedpyright-langserver", "basedpyright")]

HEADER = """from typing import Generic, TypeVar

T = TypeVar("T")
"""
BODY = """

class Box{j}(Generic[T]):
    x: T

    def __init__(self, x: T) -> None:
        self.x = x

    def get(self) -> T:
        return self.x


def f{j}(a: int, b: str) -> dict[str, list[int]]:
    return {{b: [Box{j}(a).get(), a + 1]}}
"""


def big_project(root: Path, modules: int = 200) -> Path:
    """A clean Python project basedpyright needs a while for (200 modules: ~25 s of CPU
    here; the tests stop it long before)."""
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'big'\n")
    (root / "pkg" / "__init__.py").write_text("")
    for i in range(modules):
        body = HEADER + "".join(BODY.format(j=j) for j in range(40))
        (root / "pkg" / f"m{i}.py").write_text(body)
    return root


def checker_process(rt, timeout: float = 20.0) -> psutil.Process:
    """The running checker's process, found among the checker actor's own processes."""

    def find() -> psutil.Process | None:
        for node in _nodes(rt.health()):
            if node["kind"] == "checker":
                for info in node["pids"][1:]:
                    if info["alive"] and "basedpyright" in info["cmd"]:
                        return psutil.Process(info["pid"])
        return None

    return wait_until(find, timeout=timeout, interval=0.05)


def _nodes(node: dict) -> list[dict]:
    return [node, *(n for child in node.get("children", []) for n in _nodes(child))]


def gone(proc: psutil.Process) -> bool:
    return not still_running(proc)


def test_the_checker_is_a_process_of_the_tree_and_dies_with_shutdown(runtime_factory, tmp_path):
    rt = runtime_factory()
    run = rt.open_run("check", workdir=str(big_project(tmp_path)))
    out: list = []
    caller = threading.Thread(
        target=lambda: out.append(run.call("lsp", {"action": "diagnostics", "file": "*"}))
    )
    caller.start()
    proc = checker_process(rt)
    actor = proc.parent()
    assert actor is not None and os.getsid(proc.pid) == proc.pid  # its own session...
    assert actor.pid in {p.pid for p in psutil.Process(rt.admin_pid).children(recursive=True)}
    start = time.monotonic()
    rt.shutdown()
    wait_until(lambda: gone(proc), timeout=20.0)
    caller.join(10)
    assert out and out[0].is_error and "the runtime is shut down" in out[0].text, out
    assert time.monotonic() - start < 10.0


def test_a_check_whose_callers_gave_up_is_stopped(runtime_factory, tmp_path):
    rt = runtime_factory()
    root = big_project(tmp_path)
    key = make_key("basedpyright", root.resolve())
    caller = threading.Thread(
        target=lambda: pytest.raises(
            ResourceError, rt.call, "r", "checker", key, Check(), None, 1.5
        )
    )
    caller.start()
    proc = checker_process(rt)
    caller.join(5)
    wait_until(lambda: gone(proc), timeout=4.0)  # (not the 300 s its own limit allows)
    # the next caller gets a fresh run, and the answer (on a project cut down to one module)
    for module in (root / "pkg").glob("m*.py"):
        if module.name != "m0.py":
            module.unlink()
    (root / "pkg" / "broken.py").write_text("x: int = 'no'\n")
    reply = rt.call("r", "checker", key, Check(), None, 120)
    assert [(r["path"], r["line"]) for r in reply["records"]] == [
        (str(root.resolve() / "pkg" / "broken.py"), 1)
    ]


def test_a_bad_key_or_a_missing_checker_binary_says_so(runtime_factory, tmp_path):
    rt = runtime_factory()
    root = big_project(tmp_path, modules=1)
    with pytest.raises(ResourceError) as info:
        rt.call("r", "checker", f"nope:{root}", Check(), None, 10)
    assert info.value.code == ErrorCode.UNAVAILABLE
    assert "language_server key 'nope:" in info.value.message
    if shutil.which("dart") is None:
        with pytest.raises(ResourceError) as info:
            rt.call("r", "checker", make_key("dart", root), Check(), None, 10)
        assert info.value.code == ErrorCode.UNAVAILABLE
        assert info.value.message == "the dart project checker needs dart, which is not on PATH"


HOST = textwrap.dedent(
    """
    import json, os, signal, sys, threading
    sys.path.insert(0, {repo!r})
    from tether.runtime import Runtime
    rt = Runtime.start(state_dir={state!r})
    run = rt.open_run("check", workdir={root!r})
    threading.Thread(target=run.call, args=("lsp", {{"action": "diagnostics", "file": "*"}}),
                     daemon=True).start()
    print(json.dumps({{"admin": rt.admin_pid}}), flush=True)
    threading.Event().wait()
    """
)


def _runs(program: str, proc: psutil.Process) -> bool:
    """Does `proc` run `program` (not a tree process titled with a key that names it, as
    `tether: checker basedpyright:/root` is)?"""
    argv = proc.cmdline()
    return bool(argv) and not argv[0].startswith("tether:") and program in " ".join(argv[:3])


def host_with_a_running_checker(
    tmp_path: Path,
) -> tuple[subprocess.Popen, psutil.Process, psutil.Process]:
    """A host process (its own runtime) whose checker is running: (host, admin, checker)."""
    root = big_project(tmp_path / "project")
    script = HOST.format(
        repo=str(Path(__file__).resolve().parents[2]), state=str(tmp_path / "state"), root=str(root)
    )
    host = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert host.stdout is not None
    admin = psutil.Process(json.loads(host.stdout.readline())["admin"])

    def find() -> psutil.Process | None:
        """The checker the actor started (not the node process it runs in turn)."""
        try:
            tree = admin.children(recursive=True)
            checkers = {p.pid for p in tree if _runs("basedpyright", p)}
            for proc in tree:
                if proc.pid in checkers and proc.ppid() not in checkers and not gone(proc):
                    return proc
        except psutil.NoSuchProcess:
            pass  # (one went while we looked: look again)
        return None

    return host, admin, wait_until(find, timeout=20.0, interval=0.05)


def test_the_checker_dies_with_its_host(tmp_path):
    host, _, checker = host_with_a_running_checker(tmp_path)
    actor = checker.parent()
    assert actor is not None
    host.send_signal(signal.SIGKILL)
    host.wait()
    # the actor's watchdog sees the host go and kills what it owns, then itself
    wait_until(lambda: gone(checker) and gone(actor), timeout=20.0)


def test_the_next_start_reaps_a_checker_nothing_else_could_stop(runtime_factory, tmp_path):
    host, admin, checker = host_with_a_running_checker(tmp_path)
    actor = checker.parent()
    assert actor is not None
    supervisor = actor.parent()
    assert supervisor is not None
    # neither the actor's watchdog nor its supervisor's cleanup can run: the checker
    # outlives the host and the tree
    for proc in (actor, supervisor):
        proc.suspend()
    try:
        host.send_signal(signal.SIGKILL)
        host.wait()
        wait_until(lambda: gone(admin), timeout=20.0)
        assert not gone(checker)
        runtime_factory(state_dir=tmp_path / "state")  # Runtime.start() reaps what is left
        wait_until(lambda: gone(checker) and gone(actor), timeout=20.0)
    finally:
        for proc in (checker, actor, supervisor):
            if not gone(proc):
                proc.kill()
