"""Isolated vibe workers: each on its own copy-on-write view of the workspace (a real
overlay mount, or a real copy), its change staged for the real `resolve` tool. The
worker is the scripted one (tests/vibe/worker.py); git is real."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tether import worker_views
from tether.actors.parser import KINDS as PARSER_KINDS
from tether.actors.vibe import KINDS as VIBE_KINDS

from .conftest import config

CALC = "def add(a, b):\n    return a + b\n"
UNCOMMITTED = CALC + "\n\ndef sub(a, b):\n    return a - b\n"
TESTS = (
    "from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_sub():\n    assert sub(5, 3) == 2\n"
)
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree with a committed file changed but not committed, an untracked test
    file, an ignored file, and hooks that leave a mark if git runs them."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "calc.py").write_text(CALC)
    (repo / "old.py").write_text("old = 1\n")
    (repo / ".gitignore").write_text("__pycache__/\n*.log\n")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    (repo / "calc.py").write_text(UNCOMMITTED)  # uncommitted
    (repo / "test_calc.py").write_text(TESTS)  # untracked
    (repo / "build.log").write_text("ignored output\n")  # ignored
    mark = tmp_path / "hook-ran"
    for hook in ("post-checkout", "pre-commit", "fsmonitor"):
        script = repo / ".git" / "hooks" / hook
        script.write_text(f"#!/bin/sh\necho {hook} >> {mark}\n")
        script.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(repo / ".git" / "hooks" / "fsmonitor"))
    return repo


@pytest.fixture
def iso_run(runtime_factory: Callable[..., Any], repo: Path) -> Iterator[Callable[..., Any]]:
    rt = runtime_factory(kinds=[*VIBE_KINDS, *PARSER_KINDS])
    runs: list[Any] = []

    def make(**kw: Any) -> Any:
        run = rt.open_run(f"r{len(runs)}", workdir=repo, vibe=True, vibe_config=config(**kw))
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.close()


def views(state: Path) -> list[Path]:
    return sorted((state / worker_views.SUBDIR).glob("*"))


def spawn(run: Any, brief: str, **kw: Any) -> str:
    res = run.call("vibe_spawn", {"brief": brief, "label": "iso", **kw})
    assert not res.is_error, res.text
    return str(res.data["worker_id"])


def wait(run: Any, worker_id: str) -> Any:
    res = run.call("vibe_wait", {"worker_id": worker_id, "timeout_seconds": 60})
    assert res.data["finished"], res.text
    return res


WORK = "\n".join(
    [
        "cat calc.py",
        "cat test_calc.py",
        "cat build.log",
        f"sh {PYTEST}",
        "write calc.py def add(a, b):",
        "write pkg/new.py NEW = 1",
        "rm old.py",
        "write more.log more ignored output",
    ]
)


@pytest.mark.parametrize("kind", ["overlay", "copy"])
def test_isolated_worker_sees_uncommitted_runs_tests_and_its_change_is_staged(
    iso_run: Callable[..., Any],
    repo: Path,
    tether_state_dir: Path,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if kind == "overlay" and not worker_views.overlay_mode(tether_state_dir):
        pytest.skip("no overlay mount here (no unshare, or the kernel refuses it)")
    if kind == "copy":
        monkeypatch.setattr(worker_views, "overlay_mode", lambda state=None: "")
    run = iso_run()
    res = run.call("vibe_spawn", {"brief": WORK, "label": "iso"})
    assert res.data["isolated"] and "own copy of the workspace" in res.text
    done = wait(run, res.data["worker_id"])
    assert not done.is_error, done.text
    out = done.text
    assert "def sub(a, b):" in out  # the uncommitted change
    assert "from calc import add, sub" in out  # the untracked file
    assert "ignored output" in out  # the ignored file
    assert "2 passed" in out and "exit 0" in out  # the project's tests ran, on the view
    # the workspace is as it was
    assert (repo / "calc.py").read_text() == UNCOMMITTED
    assert (repo / "old.py").exists() and not (repo / "pkg").exists()
    assert not (repo / "more.log").exists()
    change = done.data["change"]
    edit_id = change["edit_id"]
    assert edit_id and f'"edit_id": "{edit_id}"' in out
    assert change["files"] == ["M calc.py (-5)", "D old.py (-1)", "A pkg/new.py (+1)"]
    assert change["left_out"] >= 1  # more.log (and any __pycache__ pytest wrote)
    assert "Left out" in out and "more.log" in out
    assert views(tether_state_dir), "the view stays until the change is resolved"
    listed = run.call("vibe_list", {})
    assert f"change staged as {edit_id}" in listed.text
    accepted = run.call("resolve", {"edit_id": edit_id, "action": "accept"})
    assert not accepted.is_error, accepted.text
    assert (repo / "calc.py").read_text() == "def add(a, b):\n"
    assert (repo / "pkg" / "new.py").read_text() == "NEW = 1\n"
    assert not (repo / "old.py").exists()
    assert not (repo / "more.log").exists()  # ignored: left out
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)
    assert not (repo.parent / "hook-ran").exists(), "a git hook ran"


def test_accept_refused_when_the_workspace_changed_under_the_worker(
    iso_run: Callable[..., Any], repo: Path, tether_state_dir: Path
) -> None:
    go = repo.parent / "go"
    run = iso_run()
    worker_id = spawn(run, f"waitfor {go}\nwrite calc.py mine\nwrite other.py fine")
    (repo / "calc.py").write_text("the agent's\n")  # after the view was made
    go.touch()
    done = wait(run, worker_id)
    change = done.data["change"]
    assert change["conflicts"] == ["calc.py"]
    assert "⚠ 1 file(s) changed in the workspace after the worker started (calc.py)" in done.text
    res = run.call("resolve", {"edit_id": change["edit_id"], "action": "accept"})
    assert res.is_error and "calc.py" in res.text and "Nothing was written" in res.text
    assert "vibe_send w1" in res.text
    assert (repo / "calc.py").read_text() == "the agent's\n"
    assert not (repo / "other.py").exists()  # whole or not at all
    res = run.call("resolve", {"edit_id": change["edit_id"], "action": "discard"})
    assert not res.is_error, res.text
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)


def test_accept_refused_when_a_file_changed_after_staging(
    iso_run: Callable[..., Any], repo: Path
) -> None:
    run = iso_run()
    done = wait(run, spawn(run, "write calc.py mine\nwrite new.py x"))
    (repo / "new.py").write_text("someone else's\n")
    res = run.call("resolve", {"edit_id": done.data["change"]["edit_id"], "action": "accept"})
    assert res.is_error and "new.py" in res.text
    assert (repo / "calc.py").read_text() == UNCOMMITTED


def test_kill_removes_the_view_and_leaves_the_workspace(
    iso_run: Callable[..., Any], repo: Path, tether_state_dir: Path
) -> None:
    run = iso_run()
    worker_id = spawn(run, "write calc.py mine\nstream 2000 0.02")
    wait_until(lambda: "tick 1" in run.call("vibe_list", {}).text, timeout=20)
    assert views(tether_state_dir)
    res = run.call("vibe_kill", {"worker_id": worker_id})
    assert "view, and the change in it, were removed" in res.text
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)
    assert (repo / "calc.py").read_text() == UNCOMMITTED
    assert wait(run, worker_id).data["change"] is None


def test_rerun_builds_on_its_view_and_supersedes_the_change(
    iso_run: Callable[..., Any], repo: Path, tether_state_dir: Path
) -> None:
    run = iso_run()
    worker_id = spawn(run, "write a.py one")
    first = wait(run, worker_id).data["change"]["edit_id"]
    run.call("vibe_send", {"worker_id": worker_id, "message": "write b.py two"})
    second = wait(run, worker_id).data["change"]
    assert second["edit_id"] != first
    assert second["files"] == ["A a.py (+1)", "A b.py (+1)"]  # the first run's file too
    res = run.call("resolve", {"edit_id": first, "action": "accept"})
    assert res.is_error and "superseded" in res.text
    assert not run.call("resolve", {"edit_id": second["edit_id"], "action": "accept"}).is_error
    assert (repo / "a.py").read_text() == "one\n" and (repo / "b.py").read_text() == "two\n"
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)


def test_no_change_leaves_no_edit_and_no_view(
    iso_run: Callable[..., Any], tether_state_dir: Path
) -> None:
    run = iso_run()
    done = wait(run, spawn(run, "sh touch calc.py && cat calc.py"))  # copied up, unchanged
    assert "def sub" in done.text
    assert done.data["change"]["edit_id"] is None and done.data["change"]["files"] == []
    assert "It changed no file of the workspace." in done.text
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)


def test_default_is_isolated_in_a_git_work_tree_only(
    iso_run: Callable[..., Any], runtime_factory: Callable[..., Any], tmp_path: Path
) -> None:
    run = iso_run()
    assert wait(run, spawn(run, "echo hi")).data["isolated"] is True
    assert wait(run, spawn(run, "echo hi", isolated=False)).data["isolated"] is False
    plain = tmp_path / "plain"
    plain.mkdir()
    rt = runtime_factory(kinds=[*VIBE_KINDS, *PARSER_KINDS])
    other = rt.open_run("plain", workdir=plain, vibe=True, vibe_config=config())
    try:
        res = other.call("vibe_spawn", {"brief": "echo hi", "label": "p"})
        assert res.data["isolated"] is False and "in the workspace itself" in res.text
    finally:
        other.close()


def test_isolated_needs_resolve(open_run: Callable[..., Any]) -> None:
    run = open_run()  # a runtime with the vibe kind only: no parser, so no resolve
    res = run.call("vibe_spawn", {"brief": "echo hi", "label": "x", "isolated": True})
    assert res.is_error and "resolve" in res.text and "isolated false" in res.text


def test_send_to_a_running_isolated_worker_reruns_on_the_same_view(
    iso_run: Callable[..., Any], repo: Path, tether_state_dir: Path
) -> None:
    go = repo.parent / "go"
    run = iso_run()
    worker_id = spawn(run, f"write a.py one\necho ready\nwaitfor {go}")
    wait_until(lambda: "ready" in run.call("vibe_list", {}).text, timeout=20)
    res = run.call("vibe_send", {"worker_id": worker_id, "message": "cat a.py\nwrite b.py two"})
    assert res.data["stopped_previous"], res.text
    go.touch()  # (its rerun, the same brief and the message, goes through)
    done = wait(run, worker_id)
    assert "one" in done.text  # it saw what its stopped run wrote
    assert done.data["change"]["files"] == ["A a.py (+1)", "A b.py (+1)"]
    assert len(views(tether_state_dir)) == 1
    assert not run.call(
        "resolve", {"edit_id": done.data["change"]["edit_id"], "action": "discard"}
    ).is_error
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)
    assert not (repo / "a.py").exists()


def test_a_capped_isolated_worker_hands_back_what_it_had_done(
    iso_run: Callable[..., Any], repo: Path
) -> None:
    run = iso_run()
    done = wait(run, spawn(run, "write half.py done\nsleep 30", caps={"seconds": 1}))
    assert done.data["status"] == "capped" and "wall-clock time cap" in done.text
    assert done.data["change"]["files"] == ["A half.py (+1)"]
    assert not run.call(
        "resolve", {"edit_id": done.data["change"]["edit_id"], "action": "accept"}
    ).is_error
    assert (repo / "half.py").read_text() == "done\n"


def test_run_close_removes_the_view_of_an_unresolved_change(
    iso_run: Callable[..., Any], tether_state_dir: Path
) -> None:
    run = iso_run()
    assert wait(run, spawn(run, "write left.py x")).data["change"]["edit_id"]
    assert views(tether_state_dir)
    run.close()
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)


def test_kill_after_the_end_removes_the_view_and_keeps_the_staged_change(
    iso_run: Callable[..., Any], repo: Path, tether_state_dir: Path
) -> None:
    run = iso_run()
    worker_id = spawn(run, "write late.py x")
    done = wait(run, worker_id)
    # (one full run here had no change at all: its status and output say why, next time)
    assert done.data["change"] is not None, (done.data["status"], done.text)
    edit_id = done.data["change"]["edit_id"]
    res = run.call("vibe_kill", {"worker_id": worker_id})
    assert f"its change stays staged as {edit_id}" in res.text
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)
    assert not run.call("resolve", {"edit_id": edit_id, "action": "accept"}).is_error
    assert (repo / "late.py").read_text() == "x\n"


def test_a_reaped_workers_change_can_still_be_accepted(
    iso_run: Callable[..., Any], repo: Path, tether_state_dir: Path
) -> None:
    run = iso_run(reap_after=0.5)
    edit_id = wait(run, spawn(run, "write kept.py x")).data["change"]["edit_id"]
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)  # reaped: view gone
    res = run.call("resolve", {"edit_id": edit_id, "action": "accept"})
    assert not res.is_error, res.text
    assert (repo / "kept.py").read_text() == "x\n"


def test_a_crashed_workers_view_is_removed(
    iso_run: Callable[..., Any], repo: Path, tether_state_dir: Path
) -> None:
    run = iso_run()
    worker_id = spawn(run, f"write lost.py x\necho ready\nwaitfor {repo.parent / 'never'}")
    wait_until(lambda: "ready" in run.call("vibe_list", {}).text, timeout=20)
    assert views(tether_state_dir)
    run.runtime.inject("crash_actor", target=f"run:{run.run_id}/vibe_worker:{worker_id}")
    res = wait_until(
        lambda: (r := run.call("vibe_wait", {"worker_id": worker_id})).is_error and r, timeout=10
    )
    assert "crashed" in res.text
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)
    assert not (repo / "lost.py").exists()
