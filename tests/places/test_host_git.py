"""The host-side git (the `git` actor) ignores what a conversation plants in its repository:
core.fsmonitor, hooks and helpers run nothing, and the listing still works."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tether.actors.git import KINDS

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _plant(repo: Path, marker: Path) -> None:
    """A repository whose config runs a command of the conversation's on every ls-files."""
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "app.py").write_text("print('hi')\n")
    (repo / "new.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(repo), "add", "app.py"], check=True)
    hook = repo / "planted.sh"
    hook.write_text(f'#!/bin/sh\necho ran "$@" >> {marker}\n')
    hook.chmod(0o755)
    with open(repo / ".git" / "config", "a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {hook}\n\thooksPath = {repo}\n\tpager = {hook}\n"
            f"[include]\n\tpath = {repo / 'more.config'}\n"
        )
    (repo / "more.config").write_text(f"[core]\n\tfsmonitor = {hook}\n")


def test_a_planted_fsmonitor_runs_for_plain_git(tmp_path: Path) -> None:
    """The plant is live: an unhardened git runs it (the differential for the test below)."""
    marker = tmp_path / "ran"
    _plant(tmp_path / "repo", marker)
    subprocess.run(
        ["git", "ls-files", "--others"], cwd=tmp_path / "repo", capture_output=True, check=False
    )
    assert marker.exists() and "ran" in marker.read_text()


def test_the_git_actor_runs_nothing_the_repository_planted(
    runtime_factory: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    repo = tmp_path / "repo"
    _plant(repo, marker)
    rt = runtime_factory(kinds=KINDS)
    for _ in range(2):  # (a second run too: nothing cached the first time)
        got = rt.call("", "git", str(repo), "list_files", {"extensions": ["py", "sh"]}, 20)
        assert sorted(got["files"]) == ["app.py", "new.py", "planted.sh"]
    assert not marker.exists(), marker.read_text()
