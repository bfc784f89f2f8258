"""debug with lldb-dap (a C program built with -g) and delve (a Go package)."""

from __future__ import annotations

from tests.conftest import wait_until
from tests.debug.support import err, gone, ok, session_pids


def test_c_under_lldb_breakpoint_stack_locals_and_exit_code(runtime, c_project) -> None:
    run = runtime.open_run("c", workdir=str(c_project))
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
    pids = session_pids(runtime, "c")
    ok(run, {"op": "terminate"})
    wait_until(lambda: gone(pids), timeout=10.0)


def test_go_under_delve_breakpoint_unverified_line_and_output(runtime, go_project) -> None:
    run = runtime.open_run("go", workdir=str(go_project))
    ok(run, {"op": "breakpoints", "file": "main.go", "lines": [6, 100]})
    res = ok(run, {"op": "launch", "program": ".", "wait": 60})
    assert res.text.startswith("stopped at main.go:6 (breakpoint)"), res.text
    assert "line 100: NOT verified" in res.text
    assert "a (int) = 1" in res.text, res.text
    pids = session_pids(runtime, "go")
    assert len(pids) >= 2, pids  # dlv and the built program
    done = ok(run, {"op": "continue"})
    assert done.data["outcome"] == "exited" and done.data["exit_code"] == 0, done.text
    assert "hello 3" in done.text  # the program's output, read from dlv's stdout
    wait_until(lambda: gone(pids), timeout=5.0)
    assert not list(go_project.glob("__debug_bin*"))  # delve removed the binary it built
    assert "exited" in err(run, {"op": "stack"}).text


def test_lldb_attaches_to_a_running_process_by_pid(runtime, c_project) -> None:
    import subprocess

    proc = subprocess.Popen(
        [str(c_project / "prog"), "wait"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    try:
        run = runtime.open_run("attach-c", workdir=str(c_project))
        ok(run, {"op": "attach", "adapter": "lldb", "pid": proc.pid})
        stopped = ok(run, {"op": "pause"})
        assert stopped.data["outcome"] == "stopped", stopped.text
        names = [f["name"] for f in ok(run, {"op": "stack"}).data["frames"]]
        assert "main" in names, names
        ok(run, {"op": "terminate"})
    finally:
        proc.kill()
        proc.wait(5)


def test_delve_attaches_to_a_running_process_by_pid(runtime, go_project) -> None:
    import subprocess

    # (no inlining: a breakpoint in add must be a place in the binary)
    build = ["go", "build", "-gcflags=all=-N -l", "-o", "prog", "."]
    subprocess.run(build, cwd=go_project, check=True)
    proc = subprocess.Popen(
        [str(go_project / "prog"), "wait"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    try:
        run = runtime.open_run("attach-go", workdir=str(go_project))
        ok(run, {"op": "breakpoints", "file": "main.go", "lines": [6]})
        hit = ok(run, {"op": "attach", "adapter": "delve", "pid": proc.pid, "wait": 5})
        if hit.data["outcome"] != "stopped":  # attached between two calls of add
            hit = ok(run, {"op": "continue"})
        assert hit.text.startswith("stopped at main.go:6"), hit.text
        ok(run, {"op": "terminate"})
    finally:
        proc.kill()
        proc.wait(5)
