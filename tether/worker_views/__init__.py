"""A vibe worker's own copy of the workspace: a copy-on-write view, and what it changed.

Two workers, or a worker and the agent, writing the same files at once leave a tree no one
meant; and nothing showed what a worker changed. An isolated worker works on a view of the
workspace as it is when its run starts - uncommitted, untracked and ignored files included
(its dependencies and build outputs too) - and what it changed comes back as a staged
change the agent accepts or discards (tether.tools.vibe_workers stages it for `resolve`).

Alternatives: a git worktree checks out only what is committed (no uncommitted edits, no
`node_modules`, no venv), runs the repository's post-checkout hook, and took 52 ms for a
2,000-file repository. A copy costs time and space in proportion to the tree. An overlay
mount costs neither: the workspace is its lower layer, untouched; every write lands in the
upper layer, which is exactly the change. So:

- "overlay": the worker process starts in a private mount namespace where an overlay is
  mounted over the workspace's own path - so absolute paths (a venv's scripts, a build's
  config) keep working - and `cd`s into it. Nothing is ever mounted outside it. As root,
  the worker's actor (a process of its own, one per worker) moves its thread into a
  private namespace once and mounts there with two syscalls (`mount_here`, ~0.3 ms; the
  `mount` program took 12-20 ms of a spawn); unprivileged, the worker's command is
  wrapped (`wrap`: util-linux `unshare -U -r -m`, then `mount`, Linux 5.11+). Used where
  a probe mount works.
- "copy": otherwise, `cp -a --reflink=auto` (a clone where the filesystem can) into the
  view's directory, done by the worker's own process before it execs the worker, so a
  spawn does not wait for it; the worker works in the copy (another path).

In a sandbox place (tether.places.sandbox) the view is what bwrap binds as the workspace,
at its path: the root overlay (bwrap starts in the actor's namespace) or a copy (`fill`).

The change is read after the run: the overlay's upper layer (whiteouts are deletions, an
opaque directory hides what was below it), or the copy compared with the workspace. Files
under `.git` and files git ignores (caches, build outputs) are left out and counted. A
workspace file whose ctime is after that of a stamp file made with the view changed under
the worker: it is marked `conflict`. Where timestamps are coarse (no multigrain
timestamps: before Linux 6.13, or another filesystem), a change within the same clock
tick (1-4 ms) as the view's making can pass unnoticed; `>=` instead would flag files
written just before the spawn. The staged hash catches every change made after staging.

The overlay's lower layer is the live workspace: a file the agent changes while the
worker runs shows through until the worker writes it (overlayfs reads the lower layer as
it is); a copy does not see it. Either way such a file is a conflict when it is staged.

No git command runs but `git check-ignore` (no hooks, no fsmonitor: core.fsmonitor off).
Each view is a directory under the runtime's private state dir named after the process
that made it (`tether.scratch.reap` removes those of dead processes); `remove` deletes it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tether.private_dirs import default_state_dir, ensure_private_dir
from tether.scratch import reap
from tether.worker_views.changes import (
    GIT_TIMEOUT,
    MAX_CHANGE_BYTES,
    OPAQUE_XATTRS,
    Change,
    FileChange,
    collect,
    in_git_work_tree,
    summary_lines,
    unchanged,
)
from tether.worker_views.view import View, ViewError

__all__ = [  # (the parts' names too: everything is used as tether.worker_views.<name>)
    "GIT_TIMEOUT",
    "KINDS",
    "MAX_CHANGE_BYTES",
    "OPAQUE_XATTRS",
    "SUBDIR",
    "Change",
    "FileChange",
    "View",
    "ViewError",
    "choose_kind",
    "collect",
    "fill",
    "in_git_work_tree",
    "make",
    "mount_here",
    "overlay_mode",
    "remove",
    "summary_lines",
    "unchanged",
    "unmount_here",
    "wrap",
]

KINDS = ("overlay", "overlay-userns", "copy")  # what a spawn asks for (choose_kind)
SUBDIR = "views"  # under the runtime's private directory: one directory per view
UNSHARE = shutil.which("unshare")
SETPRIV = shutil.which("setpriv")
PROBE_TIMEOUT = 5.0
UNSAFE_IN_OPTIONS = (",", ":", "\\")  # overlay mount options cannot carry these unescaped

CLONE_NEWNS = 0x00020000  # <sched.h>
MS_REC, MS_PRIVATE, MNT_DETACH = 0x4000, 1 << 18, 2  # <sys/mount.h>
_private_threads: set[int] = set()  # threads of this process in a mount namespace of their own

# sh scripts run by the worker's process before it execs the worker ("$@")
_MOUNT = 'mount -t overlay tether-view -o "$1" "$2" && cd "$2" && shift 2 && exec "$@"'
_CD = 'cd "$1" && shift && exec "$@"'
_COPY = 'cp -a --reflink=auto -T "$1" "$2" && : > "$3" && cd "$2" && shift 3 && exec "$@"'


# --- which kind works here -----------------------------------------------------------------
@functools.cache
def overlay_mode(state: Path | None = None) -> str:
    """How an overlay view can be mounted here: "root", "userns", or "" (none: a copy is
    made). Probed once per process with a real mount of a scratch directory (~10 ms)."""
    if not sys.platform.startswith("linux") or UNSHARE is None:
        return ""
    modes = ["root", "userns"] if os.geteuid() == 0 else ["userns"]
    parent = _views_dir(state)
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix=f"{os.getpid()}-probe-", dir=parent) as d:
            lower = Path(d) / "lower"
            lower.mkdir()
            (lower / "probe").write_text("ok")
            view = _overlay_view(str(lower), Path(d) / "view", mode == "userns")
            argv = wrap(view, ["cat", "probe"])
            try:
                out = subprocess.run(
                    argv, cwd=lower, capture_output=True, timeout=PROBE_TIMEOUT, check=False
                )
            except (OSError, subprocess.TimeoutExpired):
                continue
            finally:
                _chmod_work_dirs(Path(d))
            if out.returncode == 0 and out.stdout == b"ok":
                return mode
    return ""


def choose_kind(workspace: str, state: Path | None = None, sandboxed: bool = False) -> str:
    """The view kind for `workspace`: "overlay" where it works, else "copy". Raises
    ViewError when no view of it can be made here. `state`: the runtime's state dir.
    sandboxed: bwrap binds the view as the workspace: the root overlay (mounted where bwrap
    starts) or a copy (`fill`); the userns overlay wraps the command, there bwrap itself."""
    _check_outside(_views_dir(state), workspace)
    safe = not any(c in workspace for c in UNSAFE_IN_OPTIONS)
    mode = overlay_mode(state) if safe else ""
    if sandboxed and mode == "userns":
        return "copy"
    return {"root": "overlay", "userns": "overlay-userns"}.get(mode, "copy")


# --- making and removing ---------------------------------------------------------------------
def make(workspace: str, kind: str) -> View:
    """A new view of `workspace` (made empty here; filled by the worker's process, `wrap`).
    `kind`: as `choose_kind` said (the host probes once; a worker's actor does not)."""
    if kind not in KINDS:
        raise ViewError(f"unknown view kind {kind!r}; kinds: {', '.join(KINDS)}")
    parent = _views_dir()
    _check_outside(parent, workspace)
    reap(parent)
    base = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-view-", dir=parent))
    if kind != "copy":
        return _overlay_view(workspace, base, kind == "overlay-userns")
    made = _stamp(base / "made")
    return View(
        "copy", workspace, str(base), str(base / "copy"), "", str(made), str(base / "copied")
    )


def _stamp(path: Path) -> Path:
    path.touch()
    # querying its ctime makes the next change of any file get a later one, on filesystems
    # with multigrain timestamps (Linux 6.13+): measured, 0 in 2,000 writes right after
    # were not later; unqueried, one in the same tick had the same ctime
    os.stat(path)
    return path


def _overlay_view(workspace: str, base: Path, userns: bool) -> View:
    base.mkdir(exist_ok=True)
    for d in ("upper", "work"):
        (base / d).mkdir()
    made = _stamp(base / "made")
    return View(
        "overlay", workspace, str(base), workspace, str(base / "upper"), str(made), "", userns
    )


def wrap(view: View, argv: list[str], again: bool = False) -> list[str]:
    """The command that runs `argv` inside `view` (start it with cwd = the workspace).
    `again`: a later run on the same view (a copy is made only once; an overlay is mounted
    again on the same upper layer, so the worker builds on what it did)."""
    if view.kind == "copy":
        if again:
            return ["sh", "-c", _CD, "tether-view", view.root, *argv]
        return ["sh", "-c", _COPY, "tether-view", view.workspace, view.root, view.copied, *argv]
    assert UNSHARE is not None
    if view.userns:
        # a user namespace changes credentials, which clears the parent-death signal
        # (prctl(2)): set it again inside, so the worker still dies with its actor
        inner = [SETPRIV, "--pdeathsig", "KILL", "--"] if SETPRIV else []
        ns = [UNSHARE, "-U", "-r", "-m", "--propagation", "private", "--", *inner]
    else:
        ns = [UNSHARE, "-m", "--propagation", "private", "--"]
    return [*ns, "sh", "-c", _MOUNT, "tether-view", _options(view), view.workspace, *argv]


def fill(view: View) -> None:
    """Make a copy view's copy now (a sandboxed worker's: the sandbox binds it at the
    workspace's path, so it must exist before bwrap starts; on the host `wrap` has the
    worker's own process make it). The script is `wrap`'s, its command `true`."""
    argv = ["sh", "-c", _COPY, "tether-view", view.workspace, view.root, view.copied, "true"]
    done = subprocess.run(argv, cwd=view.workspace, capture_output=True, check=False)
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip()[-400:]
        raise ViewError(f"cannot copy the workspace {view.workspace} for the view: {said}")


def mount_here(view: View) -> bool:
    """Mount the overlay view in the calling thread's own mount namespace (made on first
    use, its mounts private: nothing propagates out), so a process this thread starts
    sees it. False when it cannot be done here (not root, not an overlay): then `wrap`.
    unshare(CLONE_NEWNS) moves only the calling thread (it unshares its fs_struct too),
    so the thread that starts the worker must be the one that mounted - the actor's."""
    if view.kind != "overlay" or view.userns or os.geteuid() != 0:
        return False
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if threading.get_ident() not in _private_threads:
        if libc.unshare(CLONE_NEWNS) != 0:
            return False
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            return False
        _private_threads.add(threading.get_ident())
    options = _options(view)
    if libc.mount(b"tether-view", view.workspace.encode(), b"overlay", 0, options.encode()) != 0:
        why = os.strerror(ctypes.get_errno())
        raise ViewError(f"cannot mount the view of {view.workspace} ({options}): {why}")
    return True


def unmount_here(view: View) -> None:
    """Undo `mount_here` (lazily: a process still in the view keeps it until it ends)."""
    if threading.get_ident() in _private_threads:
        ctypes.CDLL(None, use_errno=True).umount2(view.workspace.encode(), MNT_DETACH)


def _options(view: View) -> str:
    options = f"lowerdir={view.workspace},upperdir={view.upper},workdir={Path(view.base) / 'work'}"
    if view.userns:
        return options + ",userxattr"
    # each change lands whole in the upper layer (a renamed directory is copied up, not
    # recorded as a redirect; no metadata-only copies): the layer is the change
    return options + ",redirect_dir=off,metacopy=off,index=off"


def remove(view: View | None) -> None:
    """Delete the view's directory (safe to repeat)."""
    if view is None:
        return
    base = Path(view.base)
    _chmod_work_dirs(base)
    shutil.rmtree(base, ignore_errors=True)


def _chmod_work_dirs(base: Path) -> None:
    # overlayfs leaves work/work mode 000; unprivileged, rmtree could not enter it
    for d in (base / "work" / "work", base / "view" / "work" / "work"):
        with contextlib.suppress(OSError):
            d.chmod(0o700)


def _views_dir(state: Path | None = None) -> Path:
    state = ensure_private_dir(state or default_state_dir())
    return ensure_private_dir(state / SUBDIR)


def _check_outside(parent: Path, workspace: str) -> None:
    if _inside(parent, workspace):
        raise ViewError(
            f"the runtime's state directory {parent} is inside the workspace {workspace}, so "
            "a view of it would contain itself; start the runtime with a state_dir outside "
            "the workspace, or spawn the worker with isolated false"
        )


def _inside(inner: Path | str, outer: Path | str) -> bool:
    inner, outer = Path(inner).resolve(), Path(outer).resolve()
    return inner == outer or outer in inner.parents
