"""Staged edits: verify-then-write all or nothing, rollback on a failed write, ids per run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.structural.staging import (
    ResolveError,
    StagedFile,
    Staging,
    commit,
    digest,
)


def _stage(tmp_path: Path, n: int = 3) -> tuple[Staging, list[Path]]:
    paths = []
    files = []
    for i in range(n):
        p = tmp_path / f"f{i}.py"
        p.write_text(f"old {i}\n")
        paths.append(p)
        files.append(StagedFile(p.name, str(p), digest(p.read_bytes()), f"new {i}\n".encode(), 1))
    staging = Staging()
    staging.stage("old", "new", files)
    return staging, paths


def test_accept_writes_every_file(tmp_path):
    staging, paths = _stage(tmp_path)
    assert commit(staging.get("edit_1")) == ["f0.py", "f1.py", "f2.py"]
    assert [p.read_text() for p in paths] == ["new 0\n", "new 1\n", "new 2\n"]
    assert not list(tmp_path.glob(".tether-*"))


def test_a_moved_file_rejects_the_whole_change(tmp_path):
    staging, paths = _stage(tmp_path)
    paths[1].write_text("someone else\n")
    with pytest.raises(
        ResolveError,
        match=r"edit_1 rejected: 1 file\(s\) changed since it was staged: f1.py\. Nothing was written",
    ):
        commit(staging.get("edit_1"))
    assert [p.read_text() for p in paths] == ["old 0\n", "someone else\n", "old 2\n"]


def test_a_deleted_file_counts_as_moved(tmp_path):
    staging, paths = _stage(tmp_path)
    paths[2].unlink()
    with pytest.raises(ResolveError, match="f2.py"):
        commit(staging.get("edit_1"))
    assert paths[0].read_text() == "old 0\n"


@pytest.mark.parametrize(("phase", "at"), [("temp", 0), ("temp", 2), ("rename", 1), ("rename", 2)])
def test_a_failure_during_the_writes_leaves_every_file_as_it_was(tmp_path, phase, at):
    staging, paths = _stage(tmp_path)

    def fault(ph: str, i: int, path: str) -> None:
        if ph == phase and i == at:
            raise OSError(28, "No space left on device (injected)")

    with pytest.raises(
        ResolveError, match=r"every file was left as it was\. The change is still staged"
    ):
        commit(staging.get("edit_1"), fault=fault)
    assert [p.read_text() for p in paths] == ["old 0\n", "old 1\n", "old 2\n"]
    assert not list(tmp_path.glob(".tether-*"))  # no temporary file left behind
    assert commit(staging.get("edit_1"))  # still staged: a retry succeeds


def test_unknown_and_resolved_ids(tmp_path):
    staging, _ = _stage(tmp_path)
    with pytest.raises(
        ResolveError, match=r"unknown edit_id 'edit_9' for this run \(staged: edit_1\)"
    ):
        staging.get("edit_9")
    staging.discard("edit_1")
    with pytest.raises(ResolveError, match="edit_1 was already discarded"):
        staging.get("edit_1")


def test_edit_ids_belong_to_their_run(tmp_path):
    run_a, _ = _stage(tmp_path)
    run_b = Staging()
    with pytest.raises(ResolveError, match="unknown edit_id 'edit_1' for this run"):
        run_b.get("edit_1")
    assert run_a.get("edit_1").edit_id == "edit_1"


def test_file_mode_is_kept(tmp_path):
    staging, paths = _stage(tmp_path, 1)
    paths[0].chmod(0o750)
    commit(staging.get("edit_1"))
    assert paths[0].stat().st_mode & 0o777 == 0o750
