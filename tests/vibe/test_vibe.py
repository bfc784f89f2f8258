"""The five vibe tools against real worker processes (tests/vibe/worker.py, a scripted
worker; tests/vibe/callables.py through tether.vibe_runner)."""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from tests.conftest import gone, health_node, wait_until
from tests.tools.conftest import ScriptedPort
from tether.messages.calls import ErrorCode, ResourceError
from tether.questions import ALLOW, DENY, Answer, CardKind
from tether.tools.vibe_workers import CallableBackend, CommandBackend

from .conftest import config

STREAM = "child\nstream 2000 0.02"  # a grandchild, then output for ~40 s


def spawn(run: Any, brief: str, label: str = "job", **kw: Any) -> str:
    res = run.call("vibe_spawn", {"brief": brief, "label": label, **kw})
    assert not res.is_error, res.text
    return str(res.data["worker_id"])


def output(run: Any, worker_id: str) -> str:
    """The worker's output so far, fresh from its actor (through vibe_list)."""
    assert not run.call("vibe_list", {}).is_error
    return str(run.state["vibe"].get(worker_id).snapshot.output)


def pids_of(run: Any, worker_id: str) -> list[int]:
    """The worker process and its grandchild (the `child` line of its brief)."""
    text = wait_until(lambda: re.search(r"child (\d+)", output(run, worker_id)), timeout=10)
    worker = run.state["vibe"].get(worker_id)
    return [int(worker.snapshot.pid), int(text.group(1))]


def test_tools_only_in_vibe_mode(open_run: Callable[..., Any], vibe_rt: Any, tmp_path) -> None:
    names = {"vibe_spawn", "vibe_send", "vibe_wait", "vibe_kill", "vibe_list"}
    run = open_run()
    assert names <= {t.name for t in run.tools()}
    assert {t.name for t in run.tools() if t.name in names} == names
    assert all(t.tier.value == "read" for t in run.tools() if t.name in names)
    plain = vibe_rt.open_run("plain", workdir=tmp_path)
    try:
        assert not names & {t.name for t in plain.tools()}
        res = plain.call("vibe_list", {})
        assert res.is_error and "vibe mode is off" in res.text
    finally:
        plain.close()


def test_spawn_several_returns_at_once_and_wait(open_run: Callable[..., Any]) -> None:
    run = open_run()
    ids, took = [], []
    for n in range(3):
        started = time.monotonic()
        ids.append(spawn(run, f"sleep 0.5\necho done {n}", label=f"job{n}"))
        took.append(time.monotonic() - started)
    assert max(took) < 0.5  # the worker sleeps 0.5 s: spawn did not wait for it
    listed = run.call("vibe_list", {})
    assert all(f"{i} [fast] 'job{n}': running" in listed.text for n, i in enumerate(ids))
    for n, worker_id in enumerate(ids):
        res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
        assert not res.is_error and res.data["finished"] is True
        assert f"done {n}" in res.text and res.data["status"] == "done"
    listed = run.call("vibe_list", {})
    assert listed.text.count(": done, ") == 3 and "last result: done 0" in listed.text


def test_wait_with_timeout_shows_partial_output(open_run: Callable[..., Any]) -> None:
    run = open_run()
    worker_id = spawn(run, "stream 2000 0.02")
    started = time.monotonic()
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 0.5})
    waited = time.monotonic() - started
    assert not res.is_error and res.data == {**res.data, "finished": False, "timed_out": True}
    assert 0.5 <= waited < 2.0
    assert "still running after waiting 0.5 s" in res.text and "tick 1\n" in res.text
    listed = run.call("vibe_list", {})
    assert "running" in listed.text and "output so far:" in listed.text and "tick" in listed.text
    assert run.call("vibe_kill", {"worker_id": worker_id}).data["killed_now"] is True


def test_wait_default_and_bad_timeout(open_run: Callable[..., Any]) -> None:
    run = open_run()
    worker_id = spawn(run, "echo quick")
    res = run.call("vibe_wait", {"worker_id": worker_id})  # default 30 s, ends at once
    assert res.data["finished"] is True and "quick" in res.text
    bad = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": -1})
    assert bad.is_error and "timeout_seconds" in bad.text
    unknown = run.call("vibe_wait", {"worker_id": "w99"})
    assert unknown.is_error and "no worker 'w99'" in unknown.text and "w1" in unknown.text


def test_send_appends_and_reruns(open_run: Callable[..., Any]) -> None:
    run = open_run()
    worker_id = spawn(run, STREAM)
    old = pids_of(run, worker_id)
    res = run.call("vibe_send", {"worker_id": worker_id, "message": "echo second"})
    assert not res.is_error and res.data["stopped_previous"] is True and res.data["run"] == 2
    assert "stopped its current run and started run 2" in res.text
    wait_until(lambda: gone(old), timeout=10)  # the previous run's whole tree is gone
    new = wait_until(lambda: not set(p := pids_of(run, worker_id)) & set(old) and p, timeout=5)
    assert psutil.Process(new[0]).cmdline()[-1] == STREAM + "\n\necho second"
    assert "[tether] stopped to rerun" not in output(run, worker_id)  # a fresh run's output
    run.call("vibe_kill", {"worker_id": worker_id})


def test_send_after_finish_reruns_with_appended_brief(open_run: Callable[..., Any]) -> None:
    run = open_run()
    worker_id = spawn(run, "echo one")
    run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    res = run.call("vibe_send", {"worker_id": worker_id, "message": "echo two"})
    assert res.data["stopped_previous"] is False
    done = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    assert done.text.endswith("one\ntwo") and done.data["run"] == 2


def test_kill_mid_run_leaves_no_process(open_run: Callable[..., Any]) -> None:
    run = open_run()
    worker_id = spawn(run, STREAM)
    pids = pids_of(run, worker_id)
    assert not gone(pids)
    started = time.monotonic()
    res = run.call("vibe_kill", {"worker_id": worker_id})
    assert not res.is_error and "process group is gone" in res.text
    wait_until(lambda: gone(pids), timeout=10.0)
    assert time.monotonic() - started < 1.0
    again = run.call("vibe_kill", {"worker_id": worker_id})
    assert not again.is_error and "already ended (killed)" in again.text
    assert run.call("vibe_wait", {"worker_id": worker_id}).data["status"] == "killed"


def test_worker_that_fails_is_reported(open_run: Callable[..., Any]) -> None:
    run = open_run()
    worker_id = spawn(run, "echo before\nexit 3")
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    assert res.is_error and res.data["status"] == "failed" and res.data["exit_code"] == 3
    assert "exited with code 3" in res.text and "exiting with 3" in res.text
    assert "before" in res.text
    assert "failed, exit 3" in run.call("vibe_list", {}).text


def test_worker_actor_crash_is_reported_not_restarted(
    open_run: Callable[..., Any], vibe_rt: Any
) -> None:
    run = open_run()
    worker_id = spawn(run, STREAM)
    pids = pids_of(run, worker_id)
    name = f"run:r/vibe_worker:{worker_id}"
    assert health_node(vibe_rt.health(), name) is not None
    vibe_rt.inject("crash_actor", target=name)
    wait_until(lambda: gone(pids), timeout=5)  # the worker process died with its actor
    res = wait_until(
        lambda: (r := run.call("vibe_wait", {"worker_id": worker_id})).is_error and r, timeout=10
    )
    assert "crashed: its actor died" in res.text
    assert "crashed" in run.call("vibe_list", {}).text
    assert health_node(vibe_rt.health(), name) is None  # temporary: not restarted
    assert run.call("vibe_send", {"worker_id": worker_id, "message": "x"}).is_error


def test_permission_prompt_reaches_the_parent_port(open_run: Callable[..., Any]) -> None:
    port = ScriptedPort(answer=lambda card: Answer.answered([ALLOW]))
    run = open_run(question_port=port, approval={"write": "ask"})
    worker_id = spawn(run, "ask write write\necho after", label="editor")
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    assert "write allowed" in res.text and "after" in res.text
    assert "allowed by the user (card #1)" in res.text
    card = port.cards[0]
    assert card.kind is CardKind.PERMISSION and card.tool == "write"
    assert card.question == f"May worker {worker_id} (editor) run write?"
    assert card.arguments == {"path": "x.py"}


def test_permission_denied_by_the_user(open_run: Callable[..., Any]) -> None:
    port = ScriptedPort(answer=Answer.answered([DENY]))
    run = open_run(question_port=port, approval={"write": "ask"})
    worker_id = spawn(run, "ask write write")
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    assert (
        "write denied: not_approved" in res.text or "write denied: the user denied it" in res.text
    )


def test_prompt_visible_while_pending(open_run: Callable[..., Any]) -> None:
    release = threading.Event()
    port = ScriptedPort(answer=Answer.answered([ALLOW]), block=release)
    run = open_run(question_port=port, approval={"exec": "ask"})
    worker_id = spawn(run, "ask bash exec\necho ran")
    listed = wait_until(
        lambda: "waiting for permission to run bash" in (t := run.call("vibe_list", {}).text) and t,
        timeout=10,
    )
    assert "waiting" in listed
    release.set()
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    assert "bash allowed" in res.text and "ran" in res.text


def test_no_human_denies_visibly(open_run: Callable[..., Any]) -> None:
    port = ScriptedPort(human=False)
    run = open_run(question_port=port, approval={"write": "ask"})
    worker_id = spawn(run, "ask write write\necho after")
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    assert "write denied: no human is connected to approve it [write tier]" in res.text
    assert "[tether] permission for write denied" in res.text and port.cards == []


def test_policy_is_inherited(open_run: Callable[..., Any]) -> None:
    port = ScriptedPort(answer=Answer.answered([ALLOW]))
    run = open_run(question_port=port, approval={"write": "deny", "exec": "allow"})
    worker_id = spawn(run, "ask write write\nask bash exec\nask mystery")
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    assert "write denied: write-tier actions are denied on this run" in res.text
    assert "bash allowed" in res.text and "allowed by the run's approval policy" in res.text
    assert "mystery allowed" in res.text  # no tier declared, unknown tool: exec, allowed here
    assert port.cards == []  # nothing was asked: the policy decided


def test_stdin_backend_and_its_prompts(open_run: Callable[..., Any]) -> None:
    port = ScriptedPort(answer=Answer.answered([ALLOW]))
    run = open_run(question_port=port, approval={"write": "ask"})
    worker_id = spawn(run, "echo from stdin\nask write write", tier="good")
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    assert "from stdin" in res.text and "[good]" in run.call("vibe_list", {}).text
    assert "permission for write denied: this worker reads its brief from stdin" in res.text


def test_tier_without_backend(open_run: Callable[..., Any]) -> None:
    run = open_run(vibe_config=config(backends={"fast": config().backends["fast"]}))
    res = run.call("vibe_spawn", {"brief": "echo", "label": "x", "tier": "good"})
    assert res.is_error and "no worker backend is configured for tier 'good'" in res.text


def test_callable_backend(open_run: Callable[..., Any]) -> None:
    from tests.vibe import callables

    port = ScriptedPort(answer=Answer.answered([ALLOW]))
    backends = {
        "fast": CallableBackend(callables.review),
        "good": CallableBackend(callables.broken),
    }
    run = open_run(
        vibe_config=config(backends=backends), question_port=port, approval={"write": "ask"}
    )
    ok = run.call("vibe_wait", {"worker_id": spawn(run, "the plan"), "timeout_seconds": 20})
    assert "reviewing: the plan" in ok.text and "reviewed 8 chars" in ok.text
    assert "write allowed: allowed by the user" in ok.text and port.cards[0].tool == "write"
    bad = run.call("vibe_wait", {"worker_id": spawn(run, "x", tier="good"), "timeout_seconds": 20})
    assert bad.is_error and "the callable worker broke" in bad.text


def test_per_run_cap(open_run: Callable[..., Any]) -> None:
    run = open_run(vibe_config=config(max_per_run=2))
    first = spawn(run, STREAM)
    spawn(run, STREAM)
    res = run.call("vibe_spawn", {"brief": "echo", "label": "third"})
    assert res.is_error and "already has 2 running workers (cap 2)" in res.text
    run.call("vibe_kill", {"worker_id": first})
    spawn(run, "echo ok")


def test_per_runtime_cap(open_run: Callable[..., Any]) -> None:
    a = open_run("a", vibe_config=config(max_per_runtime=2))
    b = open_run("b", vibe_config=config(max_per_runtime=2))
    spawn(a, STREAM)
    spawn(b, STREAM)
    res = a.call("vibe_spawn", {"brief": "echo", "label": "x"})
    assert res.is_error and "runs 2 workers across its runs (cap 2)" in res.text
    b.close()
    spawn(a, "echo ok")  # b's workers went with its run


def test_run_closing_with_workers_running(open_run: Callable[..., Any], vibe_rt: Any) -> None:
    run = open_run()
    pids = pids_of(run, spawn(run, STREAM)) + pids_of(run, spawn(run, STREAM))
    run.close()
    wait_until(lambda: gone(pids), timeout=5)
    wait_until(lambda: health_node(vibe_rt.health(), "run:r") is None, timeout=5)
    assert run.call("vibe_list", {}).is_error


def test_finished_workers_are_reaped(open_run: Callable[..., Any], vibe_rt: Any) -> None:
    run = open_run(vibe_config=config(reap_after=0.5))
    worker_id = spawn(run, "echo quick")
    run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    assert worker_id in run.call("vibe_list", {}).text
    name = f"run:r/vibe_worker:{worker_id}"
    wait_until(lambda: health_node(vibe_rt.health(), name) is None, timeout=5)
    wait_until(lambda: "No workers" in run.call("vibe_list", {}).text, timeout=5)
    res = run.call("vibe_wait", {"worker_id": worker_id})
    assert res.is_error and "reaped 0.5 s after they end" in res.text


def test_vibe_off_kills_nothing_and_says_so(open_run: Callable[..., Any]) -> None:
    run = open_run()
    worker_id = spawn(run, STREAM)
    pids = pids_of(run, worker_id)
    notice = run.set_vibe(False)
    assert notice == (
        f"vibe mode is off: the vibe tools are hidden; still running (not killed): {worker_id}; "
        "turn vibe mode on again to reach them"
    )
    assert "vibe_list" not in {t.name for t in run.tools()} and not gone(pids)
    run.set_vibe(True)
    assert run.call("vibe_kill", {"worker_id": worker_id}).data["killed_now"] is True
    wait_until(lambda: gone(pids), timeout=10)


def test_wait_timeout_is_capped(open_run: Callable[..., Any], monkeypatch: Any) -> None:
    import tether.tools.vibe as vibe_tools

    monkeypatch.setattr(vibe_tools, "MAX_WAIT", 0.5)  # the cap logic, without waiting 300 s
    run = open_run()
    worker_id = spawn(run, "stream 2000 0.02")
    started = time.monotonic()
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 1000})
    assert time.monotonic() - started < 3 and res.data["timed_out"] is True
    assert "after waiting 0.5 s (timeout_seconds is capped at 0.5)" in res.text
    run.call("vibe_kill", {"worker_id": worker_id})


def test_list_caps_the_result(open_run: Callable[..., Any]) -> None:
    run = open_run()
    worker_id = spawn(run, "stream 400 0")
    run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 10})
    line = run.call("vibe_list", {}).text
    shown = line.split("last result: ", 1)[1]
    assert shown.startswith("[... ") and shown.endswith("tick 400")
    assert len(shown) < 340  # LIST_CHARS (300) and the marker
    full = run.call("vibe_wait", {"worker_id": worker_id}).text
    assert "tick 300\n" in full and "tick 1\n" not in full  # wait shows more, also capped


def test_command_that_cannot_start(open_run: Callable[..., Any]) -> None:
    missing = CommandBackend(["/nonexistent/agent-cli"])
    run = open_run(vibe_config=config(backends={"fast": missing}))
    worker_id = spawn(run, "anything")
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 5})
    assert res.is_error and "cannot start '/nonexistent/agent-cli'" in res.text


def test_malformed_ops_are_refused(open_run: Callable[..., Any], vibe_rt: Any) -> None:
    open_run()
    with pytest.raises(ResourceError) as err:
        vibe_rt.call("r", "vibe_worker", "w9", "spawn", {"brief": 1}, 5.0)
    assert err.value.code == ErrorCode.BAD_REQUEST and "needs 'worker_id'" in err.value.message
    with pytest.raises(ResourceError) as err:
        vibe_rt.call("r", "vibe_worker", "w9", "status", {}, 5.0)
    assert "no such worker" in err.value.message


def test_backend_config_is_checked() -> None:
    with pytest.raises(ValueError, match="brief must be one of arg, stdin"):
        CommandBackend(["x"], brief="file")
    with pytest.raises(ValueError, match="module-level function"):
        CallableBackend(lambda brief, worker: "")
    with pytest.raises(ValueError, match="unknown tier 'slow'"):
        config(backends={"slow": CommandBackend(["x"])})


def _in_main(name: str) -> Any:
    """A module-level function as a script's __main__ defines it."""

    def f(brief: str, worker: Any) -> str:
        return brief

    f.__module__, f.__qualname__ = "__main__", name
    return f


def test_a_function_of_main_is_named_by_the_module_main_runs(monkeypatch) -> None:
    import types

    ran_as_module = types.ModuleType("__main__")
    ran_as_module.__spec__ = types.SimpleNamespace(name="tether.demo")  # python -m tether.demo
    monkeypatch.setitem(sys.modules, "__main__", ran_as_module)
    argv, _, _ = CallableBackend(_in_main("census")).command()
    assert argv[-1] == "tether.demo:census"
    script = types.ModuleType("__main__")  # python some_script.py: nothing to import it by
    script.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", script)
    with pytest.raises(ValueError, match="run as __main__, which the worker's process cannot"):
        CallableBackend(_in_main("census"))
