"""Opening beneath a root with no symlink followed at any component (tether/beneath.py),
through openat2 and through the openat walk that stands in for it."""

from __future__ import annotations

import errno
import os
import platform
from pathlib import Path

import pytest

from tether import beneath
from tether.beneath import SymlinkRefused


@pytest.fixture(params=["openat2", "walk"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "walk":
        monkeypatch.setattr(beneath, "_openat2_works", False)
    return str(request.param)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with d/f.txt, and beside it (outside) out/f.txt holding a secret."""
    (tmp_path / "ws" / "d").mkdir(parents=True)
    (tmp_path / "ws" / "d" / "f.txt").write_text("inside\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "f.txt").write_text("SECRET\n")
    return tmp_path / "ws"


def swap_for_link(ws: Path) -> None:
    """ws/d becomes a symlink to the outside directory (the real one kept as d.real)."""
    (ws / "d").rename(ws / "d.real")
    (ws / "d").symlink_to(ws.parent / "out")


def read(fd: int) -> bytes:
    try:
        return os.read(fd, 100)
    finally:
        os.close(fd)


def test_a_path_inside_is_opened(ws, way):
    assert read(beneath.open_file(ws, ws / "d" / "f.txt", os.O_RDONLY)) == b"inside\n"


def test_openat2_is_used_where_the_kernel_has_it(ws):
    if tuple(int(x) for x in platform.release().split(".")[:2]) < (5, 6):
        pytest.skip(f"openat2 is Linux >= 5.6; this kernel is {platform.release()}")
    read(beneath.open_file(ws, ws / "d" / "f.txt", os.O_RDONLY))
    assert beneath._openat2_works


def test_a_directory_swapped_for_a_link_out_is_refused_naming_path_and_link(ws, way):
    swap_for_link(ws)
    with pytest.raises(SymlinkRefused) as got:
        beneath.open_file(ws, ws / "d" / "f.txt", os.O_RDONLY)
    assert got.value.errno == errno.ELOOP and got.value.filename == str(ws / "d" / "f.txt")
    assert str(got.value) == (
        f"{ws}/d/f.txt leads out of {ws} through the symlink {ws}/d (-> {ws.parent}/out); "
        "symlinks out of the workspace are not followed, so it was not opened"
    )


def test_a_write_through_a_swapped_directory_creates_nothing_outside(ws, way):
    swap_for_link(ws)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    with pytest.raises(SymlinkRefused):
        beneath.open_file(ws, ws / "d" / "new.txt", flags)
    with pytest.raises(SymlinkRefused):
        beneath.open_dir(ws, ws / "d" / "x" / "y", make=True)
    assert sorted(os.listdir(ws.parent / "out")) == ["f.txt"]


def test_a_link_swapped_in_that_stays_inside_is_refused_too_and_says_call_again(ws, way):
    (ws / "d").rename(ws / "e")
    (ws / "d").symlink_to("e")
    with pytest.raises(SymlinkRefused, match=r"ws/d, a symlink \(-> .*/ws/e\) that was not there when the path was checked; symlinks out of the workspace are not followed.*Call again"):  # fmt: skip
        beneath.open_file(ws, ws / "d" / "f.txt", os.O_RDONLY)


@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_PATH, os.O_RDONLY | os.O_DIRECTORY])
def test_a_final_symlink_is_refused_for_every_kind_of_open(ws, way, flags):
    (ws / "link").symlink_to(ws / "d")
    with pytest.raises(SymlinkRefused):
        beneath.open_file(ws, ws / "link", flags)


def test_a_path_not_inside_the_root_is_refused(ws, way):
    with pytest.raises(SymlinkRefused, match="is not inside"):
        beneath.open_file(ws, ws.parent / "out" / "f.txt", os.O_RDONLY)
    with pytest.raises(SymlinkRefused, match="is not inside"):
        beneath.open_file(ws, ws / ".." / "out" / "f.txt", os.O_RDONLY)


def test_open_dir_makes_the_missing_directories_and_names_them(ws, way):
    fd, made = beneath.open_dir(ws, ws / "d" / "x" / "y", make=True)
    os.close(fd)
    assert made == [ws / "d" / "x", ws / "d" / "x" / "y"] and (ws / "d/x/y").is_dir()
    fd, made = beneath.open_dir(ws, ws / "d" / "x" / "y", make=True)
    os.close(fd)
    assert made == []


def test_lstat_reports_a_final_link_as_a_link_and_refuses_one_on_the_way(ws, way):
    (ws / "link").symlink_to(ws / "d")
    assert beneath.lstat(ws, ws / "link").st_mode & 0o170000 == 0o120000
    assert beneath.lstat(ws, ws).st_ino == ws.stat().st_ino
    with pytest.raises(SymlinkRefused):
        beneath.lstat(ws, ws / "link" / "f.txt")


def test_remove_dir_does_not_follow_a_link(ws, way):
    (ws.parent / "out" / "empty").mkdir()
    swap_for_link(ws)
    with pytest.raises(SymlinkRefused):
        beneath.remove_dir(ws, ws / "d" / "empty")
    assert (ws.parent / "out" / "empty").is_dir()


def test_root_for_is_the_innermost_root_holding_the_path_else_slash(ws):
    inner = ws / "d"
    assert beneath.root_for(ws / "d" / "f.txt", [ws, inner]) == inner
    assert beneath.root_for(ws / "d" / "f.txt", [ws]) == ws
    assert beneath.root_for(ws.parent / "out", [ws]) == Path("/")
    assert beneath.root_for(ws / "dx", [ws / "d"]) == Path("/")  # a prefix is not a parent


def test_a_root_swapped_for_a_link_is_refused(ws, way):
    (ws / "d").rename(ws / "d.real")
    (ws / "d").symlink_to(ws.parent / "out")  # a project root inside the workspace, swapped
    with pytest.raises(SymlinkRefused, match=r"leads out of .*/ws/d through the symlink .*/ws/d "):
        beneath.open_file(ws / "d", ws / "d" / "f.txt", os.O_RDONLY)
    with pytest.raises(SymlinkRefused):
        beneath.open_dir(ws / "d", ws / "d", make=True)
