"""debug with debugpy: the whole tool surface on a real Python program. A test that kills
or crashes a session, an adapter or a run actor, or sets kinds of its own, runs its own
runtime; the others share the module's (`shared`: runs of their own on a healthy tree)."""

from __future__ import annotations

import os
import signal

import psutil

from tests.conftest import gone, wait_until
from tests.debug.support import err, keeps_running, ok, session_pids


def test_breakpoints_launch_inspect_step_and_exit(shared, py_project) -> None:
    run = shared.open_run("py", workdir=str(py_project))
    set_ = ok(run, {"op": "breakpoints", "file": "app.py", "lines": [5, 999]})
    assert "set (verified when a program is launched)" in set_.text and "total = a + b" in set_.text
    first = ok(run, {"op": "launch", "program": "app.py"})
    # debugpy moves a breakpoint past the end of the file to the last line: shown as moved,
    # and hit first (the module's last line calls main)
    assert "line 999: verified, moved to line 22" in first.text, first.text
    assert first.text.startswith("stopped at app.py:22 (breakpoint)"), first.text
    res = ok(run, {"op": "continue"})
    assert res.text.startswith("stopped at app.py:5 (breakpoint)"), res.text
    assert "5 | total = a + b" in res.text
    assert "a (int) = 1" in res.text and "b (int) = 2" in res.text  # locals of the top frame

    stack = ok(run, {"op": "stack"})
    frames = stack.data["frames"]
    assert [f["name"] for f in frames[:2]] == ["add", "main"], stack.text
    scopes = ok(run, {"op": "scopes", "frame_id": frames[1]["id"]})
    ref = scopes.data["scopes"][0]["reference"]
    assert "x" not in [
        v["name"] for v in ok(run, {"op": "variables", "reference": ref}).data["variables"]
    ]
    value = ok(run, {"op": "evaluate", "expression": "a * 10 + b", "frame_id": frames[0]["id"]})
    assert value.text == "a * 10 + b (int) = 12"

    stepped = ok(run, {"op": "step_over"})
    assert stepped.data["frames"][0]["line"] == 6, stepped.text
    out = ok(run, {"op": "step_out"})
    assert out.data["frames"][0]["name"] == "main" and out.data["frames"][0]["line"] == 10
    # add's frame, and the references handed out before the steps, are stale now
    stale = err(run, {"op": "scopes", "frame_id": frames[0]["id"]})
    assert "call stack" in stale.text and "stale" in stale.text
    into = ok(run, {"op": "step_over"})
    assert into.data["frames"][0]["line"] == 11

    # pause on a stopped program is harmless
    paused = ok(run, {"op": "pause"})
    assert "already stopped" in paused.text and paused.data["frames"][0]["line"] == 11
    threads = ok(run, {"op": "threads"})
    assert threads.data["threads"], threads.text

    # the program reads stdin: it gets end-of-file, and runs to its exit
    done = ok(run, {"op": "continue"})
    assert done.text.startswith("the program exited with code 0"), done.text
    assert "hello 3" in done.text and "stdin gave ''" in done.text
    output = ok(run, {"op": "output"})
    assert "hello 3" in output.text
    assert err(run, {"op": "stack"}).text.count("exited") >= 1
    ok(run, {"op": "terminate"})


def test_variables_are_capped_and_values_shortened(shared, py_project) -> None:
    run = shared.open_run("caps", workdir=str(py_project))
    ok(run, {"op": "breakpoints", "file": "app.py", "lines": [16]})
    res = ok(run, {"op": "launch", "program": "app.py"})
    assert res.data["frames"][0]["line"] == 16, res.text
    items = ok(run, {"op": "evaluate", "expression": "items"})
    children = ok(run, {"op": "variables", "reference": items.data["reference"]})
    assert len(children.data["variables"]) == 50 and children.data["total"] > 50
    assert "more not shown" in children.text
    text = ok(run, {"op": "evaluate", "expression": "text"})
    assert len(text.data["value"]) < 450 and "more characters" in text.data["value"]
    ok(run, {"op": "terminate"})


def test_an_uncaught_exception_stops_with_its_type_and_message(shared, py_project) -> None:
    run = shared.open_run("exc", workdir=str(py_project))
    res = ok(run, {"op": "launch", "program": "app.py", "args": ["crash"]})
    assert "(exception)" in res.text, res.text
    assert "exception: ValueError: bad value 3" in res.text
    assert res.data["frames"][0]["source"].startswith("raise ValueError")
    ok(run, {"op": "terminate"})


def test_a_second_launch_is_refused_and_terminate_leaves_no_process(shared, py_project) -> None:
    run = shared.open_run("two", workdir=str(py_project))
    ok(run, {"op": "breakpoints", "file": "app.py", "lines": [5]})
    ok(run, {"op": "launch", "program": "app.py"})
    pids = session_pids(shared.rt, run.run_id)
    assert len(pids) >= 2, pids  # the adapter and the program (and debugpy's launcher)
    again = err(run, {"op": "launch", "program": "app.py"})
    assert "already running" in again.text and "terminate" in again.text
    ok(run, {"op": "terminate"})
    wait_until(lambda: gone(pids), timeout=10.0)
    after = err(run, {"op": "stack"})
    assert "previous one ended" in after.text and "terminate" in after.text
    # and a new launch works (a new session: its breakpoints are set anew)
    ok(run, {"op": "breakpoints", "file": "app.py", "lines": [5]})
    res = ok(run, {"op": "launch", "program": "app.py"})
    assert res.data["outcome"] == "stopped"


def test_adapter_sigkilled_mid_session_ends_it_and_a_new_launch_works(runtime, py_project) -> None:
    run = runtime.open_run("kill", workdir=str(py_project))
    ok(run, {"op": "breakpoints", "file": "app.py", "lines": [5]})
    ok(run, {"op": "launch", "program": "app.py"})
    pids = session_pids(runtime, "kill")
    adapter = next(p for p in pids if "debugpy.adapter" in " ".join(psutil.Process(p).cmdline()))
    os.kill(adapter, signal.SIGKILL)
    wait_until(lambda: gone(pids), timeout=5.0)  # the program died with it
    res = err(run, {"op": "stack"})
    assert "previous one ended" in res.text and "signal 9" in res.text, res.text
    status = ok(run, {"op": "status"})
    assert "no debug session" in status.text and "signal 9" in status.text
    again = ok(run, {"op": "launch", "program": "app.py"})
    assert again.data["frames"][0]["line"] == 5


def test_a_crashed_session_actor_leaves_no_process(runtime, py_project) -> None:
    run = runtime.open_run("crash", workdir=str(py_project))
    ok(run, {"op": "breakpoints", "file": "app.py", "lines": [5]})
    ok(run, {"op": "launch", "program": "app.py"})
    pids = session_pids(runtime, "crash")
    runtime.inject("crash_actor", target="run:crash/debug_session:session")
    # the supervisor reaps what the actor reported it owned: adapter, launcher, program
    wait_until(lambda: gone(pids), timeout=5.0)
    assert "previous one ended" in err(run, {"op": "stack"}).text


def test_a_launch_after_a_crash_sets_the_breakpoints_again_and_says_why(
    runtime, py_project
) -> None:
    run = runtime.open_run("lost", workdir=str(py_project))
    ok(run, {"op": "breakpoints", "file": "app.py", "lines": [5]})
    runtime.inject("crash_actor", target="run:lost/debug_session:session")
    status = lambda: run.call("debug", {"op": "status"}).text  # noqa: E731
    wait_until(lambda: "the last one ended" in status(), timeout=20.0)
    listed = ok(run, {"op": "breakpoints"})
    assert "(kept by the run, set again at the next launch: app.py:5)" in listed.text, listed.text
    res = ok(run, {"op": "launch", "program": "app.py"})
    # the run's breakpoints are its intent, kept by the host: the new session has them
    assert res.text.startswith("stopped at app.py:5 (breakpoint)"), res.text
    assert "they were set again before this start: app.py:5" in res.text, res.text
    assert "died" in res.data["restored_breakpoints"]["why"], res.data
    assert "went with it" not in res.text, res.text
    ok(run, {"op": "terminate"})  # clears the breakpoints: none to set again
    again = ok(run, {"op": "launch", "program": "app.py"})
    assert "the program exited with code 0" in again.text, again.text
    assert "set again" not in again.text, again.text


def test_breakpoints_survive_their_run_actor_and_cleared_ones_stay_cleared(
    runtime, py_project
) -> None:
    (py_project / "lib.py").write_text("x = 1\ny = 2\n")
    run = runtime.open_run("rebuilt", workdir=str(py_project))
    ok(run, {"op": "breakpoints", "file": "app.py", "lines": [5]})
    ok(run, {"op": "breakpoints", "file": "lib.py", "lines": [2]})
    ok(run, {"op": "breakpoints", "file": "lib.py", "lines": []})  # cleared: not restored
    # the RunActor takes the session actor with it; the new one knows nothing of either
    runtime.inject("crash_actor", target="run:rebuilt")
    status = lambda: run.call("debug", {"op": "status"}).text  # noqa: E731
    wait_until(lambda: "app.py" not in status(), timeout=20.0)
    res = ok(run, {"op": "launch", "program": "app.py"})
    assert res.text.startswith("stopped at app.py:5 (breakpoint)"), res.text
    assert "they were set again before this start: app.py:5)" in res.text, res.text
    assert list(res.data["restored_breakpoints"]["files"]) == [str(py_project / "app.py")]
    ok(run, {"op": "terminate"})


def test_the_ttl_ends_the_session_and_the_next_call_says_why(runtime_factory, py_project) -> None:
    from tether.actors.debug_session import KINDS
    from tether.kinds import ChildSpec, KindSpec, Restart

    short = KindSpec(
        KINDS[0].kind,
        KINDS[0].actor_class,
        KINDS[0].scope,
        ChildSpec(restart=Restart.TEMPORARY, shutdown_timeout=2.0, ttl=10.0),
    )
    rt = runtime_factory(kinds=[short])
    run = rt.open_run("ttl", workdir=str(py_project))
    ok(run, {"op": "breakpoints", "file": "app.py", "lines": [5]})
    ok(run, {"op": "launch", "program": "app.py"})
    pids = session_pids(rt, "ttl")
    wait_until(
        lambda: gone(pids), timeout=40.0
    )  # the 10 s TTL, then the kill: proves it, not how fast
    res = err(run, {"op": "continue"})
    assert "ttl of 10 s expired" in res.text, res.text


def test_two_runs_have_independent_sessions(shared, py_project) -> None:
    a = shared.open_run("a", workdir=str(py_project))
    b = shared.open_run("b", workdir=str(py_project))
    ok(a, {"op": "breakpoints", "file": "app.py", "lines": [5]})
    ok(b, {"op": "breakpoints", "file": "app.py", "lines": [10]})
    assert ok(a, {"op": "launch", "program": "app.py"}).data["frames"][0]["line"] == 5
    assert ok(b, {"op": "launch", "program": "app.py"}).data["frames"][0]["line"] == 10
    ok(a, {"op": "terminate"})
    assert ok(b, {"op": "stack"}).data["frames"][0]["line"] == 10
    pids = session_pids(shared.rt, b.run_id)
    shared.rt.close_run(b.run_id)
    wait_until(lambda: gone(pids), timeout=5.0)


def test_adapters_and_the_intersection_rule(shared, tmp_path) -> None:
    (tmp_path / "loose.py").write_text("print(1)\n")
    run = shared.open_run("rules", workdir=str(tmp_path))
    res = ok(run, {"op": "adapters"})
    assert "debugpy: not usable here: no root marker" in res.text
    assert "dart: not usable here" in res.text
    refused = err(run, {"op": "launch", "program": "loose.py"})
    assert "no root marker (pyproject.toml, setup.py, requirements.txt)" in refused.text
    outside = err(run, {"op": "launch", "program": "../elsewhere.py"})
    assert "outside" in outside.text or "refused" in outside.text
    assert "no program" in err(run, {"op": "stack"}).text


FORKER = """\
import os, sys, time
child = os.fork()
if child == 0:
    os.setpgid(0, 0)  # its own group, still in the session: it must die with it too
    time.sleep(600)
    os._exit(0)
sys.stdout.write("x" * 300_000 + "END\\n")
sys.stdout.flush()
for _ in range(12000):  # short sleeps: debugpy pauses a thread only in Python code
    time.sleep(0.05)
"""


def test_a_forking_loud_program_is_bounded_and_dies_with_the_session(shared, py_project) -> None:
    (py_project / "forker.py").write_text(FORKER)
    run = shared.open_run("fork", workdir=str(py_project))
    res = ok(run, {"op": "launch", "program": "forker.py", "wait": 2})
    assert res.data["outcome"] == "running" and "pause" in res.text
    wait_until(lambda: "END" in ok(run, {"op": "output"}).text, timeout=10)
    out = ok(run, {"op": "output"})
    assert len(out.data["output"]) <= 64 * 1024 and out.data["dropped"] > 0
    assert "were dropped" in out.text
    pids = wait_until(
        lambda: (p := session_pids(shared.rt, run.run_id)) and len(p) >= 4 and p, timeout=20
    )
    paused = ok(run, {"op": "pause"})
    assert paused.data["outcome"] == "stopped" and paused.data["reason"] == "pause", paused.text
    ok(run, {"op": "terminate"})
    wait_until(lambda: gone(pids), timeout=10.0)


def test_attach_to_a_debugpy_listener(shared, py_project) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (py_project / "server.py").write_text(
        "import time\ni = 0\nwhile True:\n    i += 1\n"
        "    open('beat', 'w').write(str(i))\n    time.sleep(0.05)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "debugpy", "--listen", f"127.0.0.1:{port}", "server.py"],
        cwd=py_project,
    )
    try:
        run = shared.open_run("attach", workdir=str(py_project))
        wait_until(lambda: _listening(port), timeout=10)
        ok(run, {"op": "attach", "adapter": "debugpy", "port": port})
        paused = ok(run, {"op": "pause"})
        assert paused.data["outcome"] == "stopped", paused.text
        assert any(f["file"].endswith("server.py") for f in ok(run, {"op": "stack"}).data["frames"])
        assert "detached" in ok(run, {"op": "terminate"}).text
        keeps_running(py_project / "beat")  # left running, not killed nor paused
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(5)


def _listening(port: int) -> bool:
    """A listening socket on `port` (never connect to probe: debugpy takes one client)."""
    return any(
        c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
        for c in psutil.net_connections("tcp")
    )


def test_the_project_virtualenv_python_runs_the_program(shared, py_project) -> None:
    import sys

    venv_bin = py_project / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    run = shared.open_run("venv", workdir=str(py_project))
    ok(run, {"op": "breakpoints", "file": "app.py", "lines": [5]})
    ok(run, {"op": "launch", "program": "app.py"})
    where = ok(run, {"op": "evaluate", "expression": "sys.executable"})
    assert str(venv_bin / "python") in where.text, where.text
    ok(run, {"op": "terminate"})


def test_calls_of_one_session_are_served_one_at_a_time(shared, py_project) -> None:
    import threading
    import time

    from tether.messages.debug_ops import Launch, Status

    (py_project / "slow.py").write_text("import time\nfor _ in range(200):\n    time.sleep(0.05)\n")
    serial = shared.run_id("serial")
    shared.rt._open_run_actor(serial)
    call = shared.rt.engine.call
    finished: dict[str, float] = {}

    def launch() -> None:
        call(
            serial,
            "debug_session",
            "session",
            Launch("debugpy", str(py_project / "slow.py"), str(py_project), [], 3.0),
            None,
            60,
        )
        finished["launch"] = time.monotonic()

    t = threading.Thread(target=launch)
    t.start()
    seen: list[str] = []

    def status_state() -> str:
        seen.append(call(serial, "debug_session", "session", Status(), None, 60)["state"])
        return seen[-1]

    wait_until(lambda: status_state() != "none" or bool(finished))
    status_state()
    t.join(60)
    # a status that arrived during the launch waited for it: it saw the session before the
    # launch ("none") or after it ("running"), never half-way ("starting")
    assert "launch" in finished and "starting" not in seen and seen[-1] == "running", seen
    ok(shared.open_run("serial", workdir=str(py_project)), {"op": "terminate"})
