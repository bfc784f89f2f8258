"""What a vibe worker changed in its view: read once its run ended, ready to be staged.

A part of `tether.worker_views`. The overlay's upper layer says it (whiteouts are
deletions, an opaque directory hides what was below it), or the copy compared with the
workspace; files under `.git` and files git ignores are left out and counted, and a
workspace file changed after the view was made is a `conflict`.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tether.worker_views.view import View, ViewError

GIT_TIMEOUT = 10.0
MAX_CHANGE_BYTES = 64 * 1024 * 1024  # a change is read into memory to be staged
OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")


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


def in_git_work_tree(workspace: str | Path) -> bool:
    """Whether `workspace` is inside a git work tree (a `.git` here or above): looked up
    without running git (whose fsmonitor hook would run)."""
    here = Path(workspace).resolve()
    return any((d / ".git").exists() for d in (here, *here.parents))


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

    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed
