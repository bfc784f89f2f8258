"""tether.worker_views on its own: real overlay mounts (through `wrap`: unshare and mount,
as root and in a user namespace as nobody) and real copies, read back by `collect`."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether import worker_views
from tether.worker_views import View

CHANGES = (
    "rm a.txt && rm -r d && mkdir d && echo new > d/n && chmod +x b.txt && "
    "echo hi > new.txt && ln -s new.txt link2 && echo more >> keep/k && touch same.txt"
)


def workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "keep").mkdir()
    for rel, text in {
        "a.txt": "a\n",
        "b.txt": "b\n",
        "d/x": "x\n",
        "d/y": "y\n",
        "keep/k": "k\n",
        "same.txt": "same\n",
    }.items():
        (ws / rel).write_text(text)
    return ws


def run_in(view: View, command: str, user: list[str] | None = None) -> None:
    argv = [*(user or []), *worker_views.wrap(view, ["sh", "-c", command])]
    done = subprocess.run(argv, cwd=view.workspace, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def summary(view: View) -> tuple[list[str], list[str]]:
    change = worker_views.collect(view)
    return worker_views.summary_lines(change), change.left_out


EXPECTED = [
    "D a.txt (-1)",
    "M b.txt (mode 755)",
    "A d/n (+1)",
    "D d/x (-1)",
    "D d/y (-1)",
    "M keep/k (+1)",
    "A new.txt (+1)",
]


def test_overlay_as_root(tether_state_dir: Path, tmp_path: Path) -> None:
    if worker_views.overlay_mode(tether_state_dir) != "root":
        pytest.skip("needs root and a kernel that mounts overlays")
    ws = workspace(tmp_path)
    view = worker_views.make(str(ws), "overlay")
    run_in(view, CHANGES)
    assert summary(view) == (EXPECTED, ["link2"])  # a new symlink cannot be staged
    assert (ws / "a.txt").exists() and not (ws / "new.txt").exists()  # the workspace as it was
    assert "tether-view" not in Path("/proc/self/mountinfo").read_text()  # mounted only inside
    worker_views.remove(view)
    assert not Path(view.base).exists()


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A directory nobody can reach (pytest's tmp_path is under a 0700 directory)."""
    path = Path(tempfile.mkdtemp(prefix="tether-views-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_overlay_unprivileged_in_a_user_namespace(open_tmp: Path) -> None:
    if os.geteuid() != 0 or not worker_views.UNSHARE or not shutil.which("setpriv"):
        pytest.skip("runs the view as nobody: needs root to switch to it, unshare and setpriv")
    tmp_path = open_tmp
    nobody = pwd.getpwnam("nobody")
    ws = workspace(tmp_path)
    for d in (
        tmp_path,
        ws,
        *ws.rglob("*"),
    ):  # (before the view is made: a change after is a conflict)
        os.chown(d, nobody.pw_uid, nobody.pw_gid)
    base = tmp_path / "view"
    view = worker_views._overlay_view(str(ws), base, userns=True)
    for d in (base, base / "upper", base / "work"):
        os.chown(d, nobody.pw_uid, nobody.pw_gid)
    user = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    run_in(view, CHANGES, user)
    assert summary(view) == (EXPECTED, ["link2"])
    worker_views.remove(view)
    assert not base.exists()


def test_copy(tether_state_dir: Path, tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    view = worker_views.make(str(ws), "copy")
    run_in(view, CHANGES)
    assert summary(view) == (EXPECTED, ["link2"])
    assert (ws / "a.txt").exists() and not (ws / "new.txt").exists()
    worker_views.remove(view)
    assert not Path(view.base).exists()


def test_a_state_dir_inside_the_workspace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(worker_views.ViewError, match="inside the workspace"):
        worker_views.choose_kind(str(tmp_path), tmp_path / "state")
