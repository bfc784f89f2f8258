"""debug with lldb-dap (a C program built with -g) and delve (a Go package). A test that
kills an adapter or starts the tree with an environment of its own runs its own runtime;
the others share the module's (`shared`: runs of their own on a healthy tree)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil

from tests.conftest import gone, wait_until
from tests.debug.conftest import need
from tests.debug.support import (
    err,
    go_build,
    keeps_running,
    lldb_server,
    ok,
    read_line,
    runs_freely,
    session_pids,
)
from tether.processes import session_processes


def test_c_under_lldb_breakpoint_stack_locals_and_exit_code(shared, c_project) -> None:
    run = shared.open_run("c", workdir=str(c_project))
    bps = ok(run, {"op": "breakpoints", "file": "prog.c", "lines": [4, 200]})
    assert "int total = a + b;" in bps.text
    res = ok(run, {"op": "launch", "program": "prog"})
    assert res.text.startswith("stopped at prog.c:4 (breakpoint)"), res.text
    assert "line 200: NOT verified" in res.text  # lldb cannot place it: said so
    assert "a (int) = 1" in res.text and "b (int) = 2" in res.text
    frames = ok(run, {"op": "stack"}).data["frames"]
    assert [f["name"] for f in frames[:2]] == ["add", "main"]
    assert ok(run, {"op": "evaluate", "expression": "a + b"}).data["value"] == "3"
    out = ok(run, {"op": "step_out"})
    assert out.data["frames"][0]["name"] == "main"
    done = ok(run, {"op": "continue"})
    assert done.data == {**done.data, "outcome": "exited", "exit_code": 3}, done.text
    assert "hello 3" in done.text and "stdin gave -1" in done.text  # end-of-file, no hang
    pids = session_pids(shared.rt, run.run_id)
    ok(run, {"op": "terminate"})
    wait_until(lambda: gone(pids), timeout=10.0)


def test_go_under_delve_breakpoint_unverified_line_and_output(shared, go_project) -> None:
    run = shared.open_run("go", workdir=str(go_project))
    ok(run, {"op": "breakpoints", "file": "main.go", "lines": [6, 100]})
    res = ok(run, {"op": "launch", "program": ".", "wait": 60})
    assert res.text.startswith("stopped at main.go:6 (breakpoint)"), res.text
    assert "line 100: NOT verified" in res.text
    assert "a (int) = 1" in res.text, res.text
    pids = session_pids(shared.rt, run.run_id)
    assert len(pids) >= 2, pids  # dlv and the built program
    done = ok(run, {"op": "continue"})
    assert done.data["outcome"] == "exited" and done.data["exit_code"] == 0, done.text
    assert "hello 3" in done.text  # the program's output, read from dlv's stdout
    # the program, delve and the binary delve built are gone (removed by delve, or by the
    # session when delve ended before it could)
    wait_until(lambda: gone(pids) and not list(go_project.glob("__debug_bin*")), timeout=10.0)
    assert "exited" in err(run, {"op": "stack"}).text


def test_a_killed_delve_leaves_no_built_binary_in_the_workspace(runtime, go_project) -> None:
    run = runtime.open_run("go-killed", workdir=str(go_project))
    ok(run, {"op": "breakpoints", "file": "main.go", "lines": [6]})
    ok(run, {"op": "launch", "program": ".", "wait": 60})
    assert list(go_project.glob("__debug_bin*"))  # delve built it beside the package
    dlv = [p for p in session_pids(runtime, "go-killed") if "dlv" in psutil.Process(p).name()]
    assert dlv, session_pids(runtime, "go-killed")
    os.kill(dlv[0], 9)  # delve cannot clean up after itself: the session does
    wait_until(lambda: not list(go_project.glob("__debug_bin*")), timeout=10.0)
    assert "ended" in err(run, {"op": "stack"}).text


def test_lldb_attaches_to_a_running_process_by_pid(shared, c_project) -> None:
    import subprocess

    proc = subprocess.Popen(
        [str(c_project / "prog"), "wait"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    try:
        run = shared.open_run("attach-c", workdir=str(c_project))
        ok(run, {"op": "attach", "adapter": "lldb", "pid": proc.pid})
        stopped = ok(run, {"op": "pause"})
        assert stopped.data["outcome"] == "stopped", stopped.text
        names = [f["name"] for f in ok(run, {"op": "stack"}).data["frames"]]
        assert "main" in names, names
        assert "detached" in ok(run, {"op": "terminate"}).text
        wait_until(lambda: runs_freely(proc.pid), timeout=10)  # left running, not killed
    finally:
        proc.kill()
        proc.wait(5)


def test_delve_attaches_to_a_running_process_by_pid(shared, go_project) -> None:
    import subprocess

    go_build(go_project)
    proc = subprocess.Popen(
        [str(go_project / "prog"), "wait"],
        cwd=go_project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        run = shared.open_run("attach-go", workdir=str(go_project))
        ok(run, {"op": "breakpoints", "file": "main.go", "lines": [6]})
        # add runs every 10 ms: the attach waits (bounded) for the breakpoint's stop
        hit = ok(run, {"op": "attach", "adapter": "delve", "pid": proc.pid, "wait": 60})
        assert hit.text.startswith("stopped at main.go:6"), hit.text
        assert "detached" in ok(run, {"op": "terminate"}).text
        keeps_running(go_project / "beat")  # breakpoint gone, resumed: it runs on
    finally:
        proc.kill()
        proc.wait(5)


def test_lldb_attaches_to_a_gdb_remote_port(shared, c_project) -> None:
    import subprocess

    server = lldb_server()
    proc = subprocess.Popen(
        [str(c_project / "prog"), "wait"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    assert read_line(proc.stdout.fileno()) == "hello 3"  # past add(1, 2): in its loop
    read_end, write_end = os.pipe()
    gdbserver = subprocess.Popen(
        [server, "gdbserver", "--attach", str(proc.pid), "--pipe", str(write_end), "127.0.0.1:0"],
        pass_fds=(write_end,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:
        port = int(read_line(read_end))
        run = shared.open_run("attach-port", workdir=str(c_project))
        ok(run, {"op": "breakpoints", "file": "prog.c", "lines": [4]})
        hit = ok(run, {"op": "attach", "adapter": "lldb", "port": port, "wait": 60})
        assert hit.text.startswith("stopped at prog.c:4 (breakpoint)"), hit.text
        assert "b (int) = 1" in hit.text, hit.text  # add(x, 1) of the loop
        assert ok(run, {"op": "evaluate", "expression": "a + b"}).data["value"] == str(
            int(ok(run, {"op": "evaluate", "expression": "a"}).data["value"]) + 1
        )
        ended = ok(run, {"op": "terminate"})
        assert "detached" in ended.text, ended.text
        wait_until(lambda: runs_freely(proc.pid), timeout=10)  # released, not killed
    finally:
        os.close(read_end)
        proc.stdout.close()
        for p in (gdbserver, proc):
            p.kill()
            p.wait(5)


@contextlib.contextmanager
def headless_delve(project: Path, *args: str) -> Iterator[tuple[subprocess.Popen, int]]:
    """`dlv --headless --accept-multiclient exec prog -- args` on a loopback port (the
    program starts halted), and its port; killed with its program afterwards."""
    go_build(project)
    config_home = project / ".dlv-config"  # dlv --headless writes its config there
    argv = ["dlv", "--headless", "--accept-multiclient", "--listen=127.0.0.1:0"]
    server = subprocess.Popen(
        [*argv, "--api-version=2", "exec", str(project / "prog"), "--", *args],
        cwd=project,
        env={**os.environ, "XDG_CONFIG_HOME": str(config_home)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert server.stdout is not None
    started = psutil.Process(server.pid).create_time()
    try:
        listening = ""
        for _ in range(5):  # a warning may come first
            listening = read_line(server.stdout.fileno())
            if "listening at:" in listening:
                break
        yield server, int(listening.rsplit(":", 1)[1])
    finally:
        # dlv and its program, which it puts in a process group of its own (same session)
        for proc in session_processes(server.pid, started):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        server.wait(5)
        server.stdout.close()
        wait_until(lambda: not session_processes(server.pid, started), timeout=5)


def test_delve_joins_a_headless_server_on_a_port_and_leaves_it_running(shared, go_project) -> None:
    with headless_delve(go_project, "wait") as (server, port):
        run = shared.open_run("attach-dlv", workdir=str(go_project))
        ok(run, {"op": "breakpoints", "file": "main.go", "lines": [6]})
        # the server started the program halted: joining it runs it to the breakpoint
        hit = ok(run, {"op": "attach", "adapter": "delve", "port": port, "wait": 60})
        assert hit.text.startswith("stopped at main.go:6 (breakpoint)"), hit.text
        assert "a (int) = 1" in hit.text and "b (int) = 2" in hit.text, hit.text
        assert session_pids(shared.rt, run.run_id) == []  # nothing of ours to kill
        assert "detached" in ok(run, {"op": "terminate"}).text
        keeps_running(go_project / "beat")  # delve keeps breakpoints: they were cleared
        # the server is still there for the next client
        again = ok(run, {"op": "attach", "adapter": "delve", "port": port})
        assert again.data["outcome"] == "running", again.text
        assert ok(run, {"op": "pause"}).data["outcome"] == "stopped"
        ok(run, {"op": "terminate"})
        assert server.poll() is None


def test_a_joined_delve_program_runs_to_its_exit_and_the_server_stays(shared, go_project) -> None:
    with headless_delve(go_project) as (server, port):
        run = shared.open_run("attach-dlv-exit", workdir=str(go_project))
        ok(run, {"op": "breakpoints", "file": "main.go", "lines": [6]})
        hit = ok(run, {"op": "attach", "adapter": "delve", "port": port, "wait": 60})
        assert hit.text.startswith("stopped at main.go:6 (breakpoint)"), hit.text
        done = ok(run, {"op": "continue", "wait": 60})
        assert done.data["outcome"] == "exited", done.text
        assert "exited" in err(run, {"op": "stack"}).text
        ok(run, {"op": "terminate"})
        assert server.poll() is None  # the user's server: left for them to end


def test_attach_to_a_port_nobody_serves_says_what_it_expects(shared, go_project) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing accepts there
    run = shared.open_run("attach-none", workdir=str(go_project))
    res = err(run, {"op": "attach", "adapter": "delve", "port": port})
    assert f"nothing accepts on 127.0.0.1:{port}" in res.text, res.text
    assert "dlv --headless --accept-multiclient" in res.text
    need("lldb")
    (go_project / "CMakeLists.txt").write_text("project(demo C)\n")
    res = err(run, {"op": "attach", "adapter": "lldb", "port": port})
    assert "lldb attaches to a pid of a local process, or port of a gdb-remote" in res.text, (
        res.text
    )
    (go_project / "pyproject.toml").write_text("[project]\nname = 'both'\n")
    res = err(run, {"op": "attach", "adapter": "debugpy", "pid": 1})
    assert "debugpy cannot attach by pid" in res.text and "--listen" in res.text, res.text


def test_a_go_session_builds_with_tethers_caches_never_home(
    runtime_factory, go_project, tether_state_dir, tmp_path_factory, monkeypatch
) -> None:
    home = tmp_path_factory.mktemp("empty-home")
    for var in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "GOCACHE", "GOPATH", "GOMODCACHE"):
        monkeypatch.delenv(var, raising=False)  # go would use these instead of HOME
    monkeypatch.setenv("HOME", str(home))
    rt = runtime_factory()
    run = rt.open_run("go-home", workdir=str(go_project))
    ok(run, {"op": "breakpoints", "file": "main.go", "lines": [6]})
    hit = ok(run, {"op": "launch", "program": ".", "wait": 60})
    assert hit.text.startswith("stopped at main.go:6"), hit.text
    assert ok(run, {"op": "continue"}).data["outcome"] == "exited"
    ok(run, {"op": "terminate"})
    assert list(home.rglob("*")) == []  # go build (run by delve) wrote nothing there
    build_cache = tether_state_dir / "cache" / "go-build"
    assert any(build_cache.iterdir()), "go build's cache is tether's own"
    assert build_cache.parent.stat().st_mode & 0o077 == 0  # private to this user
