"""One commit for several files: all land, or every file is as it was (tether/atomic_files.py)."""

from __future__ import annotations

import errno
import os
import pickle
import threading
from pathlib import Path

import pytest

from tether import atomic_files
from tether.atomic_files import CommitError, Delete, Write, commit


@pytest.fixture
def tree(tmp_path: Path) -> list[Path]:
    """Three files with distinct modes, the third in a directory of its own."""
    (tmp_path / "sub").mkdir()
    files = [tmp_path / "a.txt", tmp_path / "b.sh", tmp_path / "sub" / "c.txt"]
    for i, (f, mode) in enumerate(zip(files, (0o640, 0o755, 0o600), strict=True)):
        f.write_bytes(f"old {i}\n".encode())
        f.chmod(mode)
    return files


def state(files: list[Path]) -> list[tuple[bytes, int] | None]:
    return [(f.read_bytes(), f.stat().st_mode & 0o7777) if f.exists() else None for f in files]


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".tether-" in p.name)


def writes(files: list[Path], tag: str = "new") -> list[Write]:
    return [Write(f, f"{tag} {i}\n".encode()) for i, f in enumerate(files)]


def fail_at(phase: str, at: int, exc: BaseException | None = None) -> atomic_files.Fault:
    def fault(ph: str, i: int, path: Path) -> None:
        if (ph, i) == (phase, at):
            raise exc or OSError(errno.ENOSPC, "No space left on device", str(path))

    return fault


def test_all_land_with_their_modes_kept(tree, tmp_path):
    commit(writes(tree))
    assert state(tree) == [(b"new 0\n", 0o640), (b"new 1\n", 0o755), (b"new 2\n", 0o600)]
    assert leftovers(tmp_path) == []


def test_new_file_gets_umask_default_mode_and_parents(tmp_path):
    commit([Write(tmp_path / "x" / "y" / "new.txt", b"hi\n")])
    umask = os.umask(0o022)
    os.umask(umask)
    assert (tmp_path / "x/y/new.txt").read_bytes() == b"hi\n"
    assert (tmp_path / "x/y/new.txt").stat().st_mode & 0o777 == 0o666 & ~umask


def test_explicit_mode_wins(tree):
    commit([Write(tree[0], b"x", mode=0o700)])
    assert state(tree)[0] == (b"x", 0o700)


def test_create_modify_delete_in_one_commit(tree, tmp_path):
    commit([Write(tmp_path / "new.txt", b"n\n"), Write(tree[0], b"m\n"), Delete(tree[1])])
    assert (tmp_path / "new.txt").read_bytes() == b"n\n" and tree[0].read_bytes() == b"m\n"
    assert not tree[1].exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("phase", "at"), [("temp", 0), ("temp", 2), ("rename", 0), ("rename", 1), ("rename", 2)]
)
def test_failure_at_any_step_leaves_every_file_as_it_was(tree, tmp_path, phase, at):
    before = state(tree)
    with pytest.raises(CommitError, match=r"No space left on device; every file was left as it was"):  # fmt: skip
        commit(writes(tree), fault=fail_at(phase, at))
    assert state(tree) == before and leftovers(tmp_path) == []


def test_failed_third_rename_restores_the_same_inodes(tree):
    inodes = [f.stat().st_ino for f in tree]
    with pytest.raises(CommitError) as got:
        commit(writes(tree), fault=fail_at("rename", 2))
    assert (got.value.path, got.value.unrestored, got.value.errno) == (tree[2], (), errno.ENOSPC)
    assert [f.stat().st_ino for f in tree] == inodes  # put back by rename, not rewritten


def test_third_target_turned_directory_mid_commit_restores_the_first_two(tree, tmp_path):
    """A real failure of os.replace itself (EISDIR), after two files were replaced."""
    before = state(tree[:2])

    def race(ph: str, i: int, path: Path) -> None:
        if (ph, i) == ("rename", 2):
            path.unlink()
            path.mkdir()  # someone made a directory where the third file was

    with pytest.raises(CommitError, match=r"cannot write .*/sub/c\.txt: Is a directory"):
        commit(writes(tree), fault=race)
    assert state(tree[:2]) == before and leftovers(tmp_path) == []


def test_created_files_and_directories_are_removed_on_failure(tree, tmp_path):
    changes = [Write(tmp_path / "d1" / "d2" / "n.txt", b"n"), Delete(tree[0]), Write(tree[1], b"x")]
    before = state(tree)
    with pytest.raises(CommitError):
        commit(changes, fault=fail_at("rename", 2))
    assert not (tmp_path / "d1").exists() and state(tree) == before and leftovers(tmp_path) == []


def test_third_target_is_a_directory_refused_before_anything_is_written(tree, tmp_path):
    (tmp_path / "dir").mkdir()
    before = state(tree)
    with pytest.raises(CommitError, match=r"cannot write .*/dir: it is a directory; only files"):
        commit([*writes(tree[:2]), Write(tmp_path / "dir", b"x")])
    assert state(tree) == before and leftovers(tmp_path) == []


def test_third_parent_is_a_file_leaves_the_first_two(tree, tmp_path):
    (tmp_path / "blocker").write_text("a file, not a directory\n")
    before = state(tree)
    with pytest.raises(CommitError, match=r"blocker/x\.txt: Not a directory; every file was left"):
        commit([*writes(tree[:2]), Write(tmp_path / "blocker" / "x.txt", b"x")])
    assert state(tree) == before and leftovers(tmp_path) == []


def test_third_directory_read_only_leaves_the_first_two(tree, tmp_path):
    before = state(tree)
    (tmp_path / "sub").chmod(0o555)
    try:
        if os.access(tmp_path / "sub", os.W_OK):
            pytest.skip("this user writes into read-only directories (root with CAP_DAC_OVERRIDE)")
        with pytest.raises(CommitError, match=r"sub/c\.txt: Permission denied"):
            commit(writes(tree))
    finally:
        (tmp_path / "sub").chmod(0o755)
    assert state(tree) == before and leftovers(tmp_path) == []


def test_no_hard_links_falls_back_to_a_copy_in_memory(tree, tmp_path, monkeypatch):
    def no_link(*a, **k):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(atomic_files.os, "link", no_link)
    before = state(tree)
    with pytest.raises(CommitError):
        commit([*writes(tree[:2]), Delete(tree[2])], fault=fail_at("rename", 2))
    assert state(tree) == before and leftovers(tmp_path) == []
    commit([*writes(tree[:2]), Delete(tree[2])])
    assert state(tree)[:2] == [(b"new 0\n", 0o640), (b"new 1\n", 0o755)] and not tree[2].exists()


def test_commit_error_is_an_oserror_that_survives_pickling(tree):
    with pytest.raises(OSError) as got:
        commit(writes(tree), fault=fail_at("rename", 1))
    again = pickle.loads(pickle.dumps(got.value))
    assert (str(again), again.errno, again.filename) == (str(got.value), errno.ENOSPC, str(tree[1]))


def test_a_restore_that_fails_is_named(tree, monkeypatch):
    real_replace = os.replace

    def replace(src, dst, **dir_fds):
        if str(src).endswith(".orig"):
            raise OSError(errno.EIO, "Input/output error")
        real_replace(src, dst, **dir_fds)

    monkeypatch.setattr(atomic_files.os, "replace", replace)
    with pytest.raises(CommitError, match=r"1 file\(s\) could not be put back \(.*a\.txt: Input/output error") as got:  # fmt: skip
        commit(writes(tree), fault=fail_at("rename", 1))
    assert got.value.unrestored[0][0] == tree[0]


def test_delete_of_a_missing_file_is_refused(tmp_path):
    with pytest.raises(CommitError, match="it does not exist, so it cannot be deleted"):
        commit([Delete(tmp_path / "nope")])


def test_a_path_named_twice_is_refused(tree):
    with pytest.raises(CommitError, match="named twice in one commit"):
        commit([Write(tree[0], b"1"), Write(tree[0], b"2")])


def test_symlink_is_written_through_and_stays_a_link(tree, tmp_path):
    link = tmp_path / "link.txt"
    link.symlink_to(tree[0])
    commit([Write(link, b"through\n")])
    assert link.is_symlink() and tree[0].read_bytes() == b"through\n"
    assert tree[0].stat().st_mode & 0o777 == 0o640


def test_symlink_and_its_target_in_one_commit_are_the_same_file(tree, tmp_path):
    (tmp_path / "link.txt").symlink_to(tree[0])
    with pytest.raises(CommitError, match="named twice"):
        commit([Write(tree[0], b"1"), Write(tmp_path / "link.txt", b"2")])


def test_dangling_symlink_is_refused(tmp_path):
    (tmp_path / "link.txt").symlink_to(tmp_path / "gone.txt")
    with pytest.raises(CommitError, match=r"it is a symlink to .*/gone\.txt, which does not exist"):
        commit([Write(tmp_path / "link.txt", b"x")])
    assert not (tmp_path / "gone.txt").exists()


def test_delete_removes_the_link_not_its_target(tree, tmp_path):
    (tmp_path / "link.txt").symlink_to(tree[0])
    commit([Delete(tmp_path / "link.txt")])
    assert not (tmp_path / "link.txt").is_symlink() and tree[0].read_bytes() == b"old 0\n"


def test_within_refuses_a_symlink_pointing_out(tmp_path):
    inside, outside = tmp_path / "ws", tmp_path / "elsewhere.txt"
    inside.mkdir()
    outside.write_text("keep\n")
    (inside / "link.txt").symlink_to(outside)
    with pytest.raises(CommitError, match=r"link\.txt -> .*/elsewhere\.txt is outside .*/ws"):
        commit([Write(inside / "ok.txt", b"x"), Write(inside / "link.txt", b"x")], within=[inside])
    assert outside.read_text() == "keep\n" and not (inside / "ok.txt").exists()


def test_within_refuses_dotdot(tmp_path):
    (tmp_path / "ws").mkdir()
    with pytest.raises(CommitError, match="is outside"):
        commit([Write(tmp_path / "ws" / ".." / "x.txt", b"x")], within=[tmp_path / "ws"])
    assert not (tmp_path / "x.txt").exists()


def test_two_threads_committing_one_file_never_collide(tmp_path):
    target, other = tmp_path / "shared.txt", [tmp_path / "t0.txt", tmp_path / "t1.txt"]
    target.write_bytes(b"start")
    contents = [bytes([65 + t]) * 200_000 for t in range(2)]
    errors: list[BaseException] = []
    seen: set[bytes] = set()
    go, stop = threading.Barrier(3), threading.Event()

    def committer(t: int) -> None:
        go.wait()
        try:
            for n in range(40):
                commit([Write(target, contents[t]), Write(other[t], str(n).encode())])
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    def reader() -> None:
        go.wait()
        while not stop.is_set():
            seen.add(target.read_bytes())

    threads = [threading.Thread(target=committer, args=(t,)) for t in range(2)]
    watcher = threading.Thread(target=reader)
    for th in [*threads, watcher]:
        th.start()
    for th in threads:
        th.join(60)
    stop.set()
    watcher.join(60)
    assert errors == []
    assert target.read_bytes() in contents and seen <= {b"start", *contents}  # never a torn file
    assert [o.read_bytes() for o in other] == [b"39", b"39"] and leftovers(tmp_path) == []


# --- a directory swapped for a symlink after the check (tether.beneath) -------------------


def swap_after_check(directory: Path, outside: Path, phase: str) -> atomic_files.Fault:
    """A fault hook that, once the commit checked its paths, turns `directory` into a
    symlink to `outside` (as a cell writing in the workspace could)."""

    def fault(ph: str, i: int, path: Path) -> None:
        if ph == phase and not directory.is_symlink():
            directory.rename(directory.with_name(directory.name + ".real"))
            directory.symlink_to(outside)

    return fault


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "c.txt").write_text("SECRET\n")
    return tmp_path / "out"


def test_a_write_through_a_directory_swapped_after_the_check_writes_nothing_outside(
    tree, tmp_path, outside
):
    fault = swap_after_check(tmp_path / "sub", outside, "temp")
    with pytest.raises(CommitError, match=r"sub/c\.txt: .*/sub leads out of .*/sub through the symlink .*/sub \(-> .*/out\); symlinks out of the workspace are not followed"):  # fmt: skip
        commit(writes(tree), within=[tmp_path / "sub", tmp_path], fault=fault)
    assert (outside / "c.txt").read_text() == "SECRET\n" and os.listdir(outside) == ["c.txt"]
    assert state(tree[:2]) == [(b"old 0\n", 0o640), (b"old 1\n", 0o755)]


def test_a_delete_through_a_directory_swapped_after_the_check_deletes_nothing_outside(
    tree, tmp_path, outside
):
    with pytest.raises(CommitError, match=r"sub/c\.txt: .*symlinks out of the workspace are not followed"):  # fmt: skip
        commit([Delete(tree[2])], fault=swap_after_check(tmp_path / "sub", outside, "rename"))
    assert (outside / "c.txt").read_text() == "SECRET\n"


def test_new_parents_under_a_swapped_directory_are_not_made_outside(tmp_path, outside):
    (tmp_path / "ws" / "d").mkdir(parents=True)
    fault = swap_after_check(tmp_path / "ws" / "d", outside, "temp")
    with pytest.raises(CommitError, match="not followed"):
        commit([Write(tmp_path / "ws/d/x/y/new.txt", b"x")], within=[tmp_path / "ws"], fault=fault)
    assert os.listdir(outside) == ["c.txt"]


def test_writes_through_in_workspace_symlinks_land_as_before(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("old\n")
    (tmp_path / "lib").symlink_to("src")  # a linked directory
    (tmp_path / "b.txt").symlink_to(tmp_path / "src" / "a.txt")  # an absolute file link
    commit([Write(tmp_path / "lib" / "a.txt", b"one\n")], within=[tmp_path])
    assert (tmp_path / "src" / "a.txt").read_text() == "one\n"
    commit([Write(tmp_path / "b.txt", b"two\n"), Write(tmp_path / "lib/n.txt", b"n\n")])
    assert (tmp_path / "src" / "a.txt").read_text() == "two\n" and (tmp_path / "b.txt").is_symlink()
    assert (tmp_path / "src" / "n.txt").read_text() == "n\n"


def test_open_regular_beneath_a_root_refuses_a_swapped_directory(tmp_path, outside):
    (tmp_path / "ws" / "d").mkdir(parents=True)
    (tmp_path / "ws" / "d" / "c.txt").write_text("inside\n")
    ws = tmp_path / "ws"
    with atomic_files.open_regular(ws / "d" / "c.txt", root=ws) as f:
        assert f.read() == b"inside\n"
    (ws / "d").rename(ws / "d.real")
    (ws / "d").symlink_to(outside)
    for follow in (False, True):  # follow resolves first: the link leads out, refused
        with pytest.raises(OSError, match="symlinks out of the workspace are not followed"):
            atomic_files.open_regular(ws / "d" / "c.txt", follow=follow, root=ws)


def test_open_regular_follow_reads_through_an_in_workspace_link(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("a\n")
    (tmp_path / "lib").symlink_to(tmp_path / "src")
    with atomic_files.open_regular(tmp_path / "lib" / "a.txt", follow=True, root=tmp_path) as f:
        assert f.read() == b"a\n"
