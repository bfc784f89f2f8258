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
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tether.private_dirs import default_state_dir, ensure_private_dir
from tether.scratch import reap

KINDS = ("overlay", "overlay-userns", "copy")  # what a spawn asks for (choose_kind)
SUBDIR = "views"  # under the runtime's private directory: one directory per view
UNSHARE = shutil.which("unshare")
SETPRIV = shutil.which("setpriv")
PROBE_TIMEOUT = 5.0
GIT_TIMEOUT = 10.0
MAX_CHANGE_BYTES = 64 * 1024 * 1024  # a change is read into memory to be staged
OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")
UNSAFE_IN_OPTIONS = (",", ":", "\\")  # overlay mount options cannot carry these unescaped

CLONE_NEWNS = 0x00020000  # <sched.h>
MS_REC, MS_PRIVATE, MNT_DETACH = 0x4000, 1 << 18, 2  # <sys/mount.h>
_private_threads: set[int] = set()  # threads of this process in a mount namespace of their own

# sh scripts run by the worker's process before it execs the worker ("$@")
_MOUNT = 'mount -t overlay tether-view -o "$1" "$2" && cd "$2" && shift 2 && exec "$@"'
_CD = 'cd "$1" && shift && exec "$@"'
_COPY = 'cp -a --reflink=auto -T "$1" "$2" && : > "$3" && cd "$2" && shift 3 && exec "$@"'


class ViewError(Exception):
    """The view cannot be made or read; the message says why and what to do."""


@dataclass(frozen=True)
class View:
    """One worker's view. Plain data: it travels in the worker actor's snapshot."""

    kind: str  # "overlay" | "copy"
    workspace: str
    base: str  # the view's own directory (everything below is removed with it)
    root: str  # where the worker works: the workspace's path (overlay) or the copy
    upper: str  # overlay: the upper layer ("" for a copy)
    made: str  # a file whose ctime is when the view was made
    copied: str  # copy: a file whose ctime is when the copy was done ("" for an overlay)
    userns: bool = False  # overlay: mounted in a user namespace (unprivileged)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> View:
        return cls(**data)


@dataclass(frozen=True)
class FileChange:
    rel: str  # workspace-relative, "/"-separated
    new: bytes | None  # None: the worker deleted it
    mode: int | None  # permission bits for a new file or a changed mode; None: keep
    old: bytes | None  # the workspace's content now (None: absent), for the summary
    conflict: bool  # the workspace's file changed after the view was made


@dataclass(frozen=True)
class Change:
    files: list[FileChange]
    left_out: list[str]  # changed paths not brought back (.git, ignored, symlinks)


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


def in_git_work_tree(workspace: str | Path) -> bool:
    """Whether `workspace` is inside a git work tree (a `.git` here or above): looked up
    without running git (whose fsmonitor hook would run)."""
    here = Path(workspace).resolve()
    return any((d / ".git").exists() for d in (here, *here.parents))


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


def remove(view: View | dict[str, Any] | None) -> None:
    """Delete the view's directory (safe to repeat)."""
    if view is None:
        return
    base = Path(view.base if isinstance(view, View) else view["base"])
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


# --- what the worker changed -----------------------------------------------------------------
def collect(view: View) -> Change:
    """The worker's change, read from the view (call it once the worker's run ended)."""
    if not Path(view.base).is_dir():
        raise ViewError(f"the view {view.base} is gone; nothing to collect")
    found = _from_upper(view) if view.kind == "overlay" else _from_copy(view)
    since = os.lstat(view.made).st_ctime_ns
    left_out = sorted(rel for rel in found if rel == ".git" or rel.startswith(".git/"))
    candidates = {rel: v for rel, v in found.items() if rel not in left_out}
    ignored = _git_ignored(view.workspace, list(candidates))
    left_out += sorted(ignored)
    files: list[FileChange] = []
    total = 0
    for rel in sorted(set(candidates) - ignored):
        where = candidates[rel]
        change = _file_change(view.workspace, rel, where, since)
        if change is None:
            continue
        if isinstance(change, str):  # a symlink: atomic_files writes through links
            left_out.append(rel)
            continue
        total += len(change.new or b"")
        if total > MAX_CHANGE_BYTES:
            raise ViewError(
                f"the worker's change is over {MAX_CHANGE_BYTES // 2**20} MiB (at {rel}); it is "
                "not staged. Ask the worker to keep large outputs in ignored paths"
            )
        files.append(change)
    return Change(files, left_out)


def unchanged(view: View) -> bool:
    """Whether an overlay view's upper layer is empty: the worker wrote nothing (cheap, so
    the actor can tell at the end of a run; a copy has to be compared, `collect`)."""
    if view.kind != "overlay":
        return False
    try:
        with os.scandir(view.upper) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def _from_upper(view: View) -> dict[str, str | None]:
    """rel -> the file holding its new content, or None for a deletion."""
    found: dict[str, str | None] = {}
    upper = Path(view.upper)

    def walk(d: Path, rel: str) -> None:
        with os.scandir(d) as entries:
            for e in entries:
                r = f"{rel}{e.name}"
                st = e.stat(follow_symlinks=False)
                if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout: deleted
                    _deleted_below(view.workspace, r, found)
                elif stat.S_ISDIR(st.st_mode):
                    if _opaque(e.path):  # made anew: what was below it is gone
                        _deleted_below(view.workspace, r, found)
                    walk(Path(e.path), r + "/")
                else:
                    found[r] = e.path

    walk(upper, "")
    return found


def _opaque(path: str) -> bool:
    for name in OPAQUE_XATTRS:
        with contextlib.suppress(OSError):
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
    return False


def _deleted_below(workspace: str, rel: str, found: dict[str, str | None]) -> None:
    """Every file of the workspace at or below `rel` counts as deleted (until a file of
    the upper layer says otherwise)."""
    top = Path(workspace, rel)
    if top.is_symlink() or top.is_file():
        found.setdefault(rel, None)
        return
    for dirpath, dirnames, filenames in os.walk(top):
        for name in filenames + [d for d in dirnames if Path(dirpath, d).is_symlink()]:
            r = str(Path(dirpath, name).relative_to(workspace)).replace(os.sep, "/")
            found.setdefault(r, None)


def _from_copy(view: View) -> dict[str, str | None]:
    """The copy against the workspace: files written in the copy after it was made (ctime
    from the copy's stamp on), and workspace files missing from the copy that were there
    before the view was made (deleted by the worker; a file made later is not its doing)."""
    if not Path(view.copied).exists():
        raise ViewError("the copy of the workspace was never finished (cp failed or was killed)")
    copied = os.lstat(view.copied).st_ctime_ns
    made = os.lstat(view.made).st_ctime_ns
    found: dict[str, str | None] = {}
    root, workspace = Path(view.root), Path(view.workspace)
    for rel, st in _files(root):
        if st.st_ctime_ns >= copied:
            found[rel] = str(root / rel)
    for rel, st in _files(workspace):
        if st.st_ctime_ns <= made and not os.path.lexists(root / rel):
            found[rel] = None
    return found


def _files(top: Path) -> list[tuple[str, os.stat_result]]:
    out: list[tuple[str, os.stat_result]] = []
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath == str(top) and ".git" in dirnames:
            dirnames.remove(".git")  # left out anyway; a big repository's objects cost time
        for name in filenames + [d for d in dirnames if Path(dirpath, d).is_symlink()]:
            p = Path(dirpath, name)
            out.append((str(p.relative_to(top)).replace(os.sep, "/"), p.lstat()))
    return out


def _file_change(
    workspace: str, rel: str, where: str | None, since: int
) -> FileChange | str | None:
    """The change of one path (None: no change after all; "symlink": not stageable)."""
    target = Path(workspace, rel)
    try:
        now = target.lstat()
    except OSError:
        now = None
    if now is not None and stat.S_ISLNK(now.st_mode) and where is not None:
        return "symlink"
    old = target.read_bytes() if now is not None and stat.S_ISREG(now.st_mode) else None
    conflict = now is not None and now.st_ctime_ns > since
    if where is None:
        if now is None:
            return None
        return FileChange(rel, None, None, old, conflict)
    st = os.lstat(where)
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    if not stat.S_ISREG(st.st_mode):
        return None
    new = Path(where).read_bytes()
    mode = stat.S_IMODE(st.st_mode)
    same_mode = now is not None and stat.S_IMODE(now.st_mode) == mode
    if old == new and same_mode:
        return None
    return FileChange(rel, new, None if same_mode else mode, old, conflict)


def _git_ignored(workspace: str, rels: list[str]) -> set[str]:
    """Which of `rels` git ignores (an empty set outside a git work tree)."""
    if not rels or not in_git_work_tree(workspace):
        return set()
    argv = ["git", "-c", "core.fsmonitor=false", "check-ignore", "-z", "--stdin"]
    try:
        out = subprocess.run(
            argv,
            cwd=workspace,
            input="\0".join(rels).encode(),
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return set()
    if out.returncode not in (0, 1):
        return set()
    return {p for p in out.stdout.decode("utf-8", "replace").split("\0") if p}


def summary_lines(change: Change) -> list[str]:
    """One line per file: `M path (+a -b)`, `A path (+n)`, `D path (-n)`."""
    lines = []
    for f in change.files:
        old = f.old.decode("utf-8", "replace").splitlines() if f.old is not None else []
        new = f.new.decode("utf-8", "replace").splitlines() if f.new is not None else []
        added, removed = _line_counts(old, new)
        letter = "D" if f.new is None else ("A" if f.old is None else "M")
        counts = " ".join(
            c for c in (f"+{added}" if added else "", f"-{removed}" if removed else "") if c
        )
        mode = f"mode {f.mode:o}" if f.mode is not None and f.old is not None else ""
        flag = " ⚠ changed in the workspace since the worker started" if f.conflict else ""
        shown = ", ".join(x for x in (counts, mode) if x)
        lines.append(f"{letter} {f.rel}" + (f" ({shown})" if shown else "") + flag)
    return lines


def _line_counts(old: list[str], new: list[str]) -> tuple[int, int]:
    import difflib

    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed
