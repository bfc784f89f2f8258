"""Commit new contents for several files, or leave every one of them as it was.

DESIGN.md invariant 2 (no write is partial) is needed by apply_patch, resolve (a staged
structural edit), lsp_rename and a server's `workspace/applyEdit`: a change that lands in
some files only leaves a tree that compiles under neither the old shape nor the new one.
This module is the one place that does it; it is a pure library (no actors, no tools).

How a commit goes:
1. Check every change before touching anything: a target that is a directory or not a
   regular file, a delete of a missing file, a path named twice, a path outside `within`
   all refuse the whole commit.
2. Stage: each new content goes to a fresh temporary file beside its target (created with
   O_EXCL under a random name, as `mkstemp` does, so two commits of one file never share a
   temp), written, given the target's mode (a new file gets 0o666 less the umask), fsynced.
   Missing parent directories are made.
3. Swap, in order: the original gets a second name first (a hard link beside it), then the
   temp is renamed over the target (or the target is unlinked, for a delete). Then the
   directories are fsynced and the second names dropped.
4. On any failure, every file already swapped is put back by renaming its second name over
   it, created files and directories are removed, temps are removed, and one `CommitError`
   names the file that failed and why (and any file that could not be put back).

Why a hard link and not a copy in memory: putting a file back is then a rename, which
needs no free space - and a full disk is the likeliest reason a commit fails halfway. The
original inode (mode, owner, links) comes back untouched. Where the filesystem refuses
hard links, the original bytes and mode are kept in memory instead.

Symlinks: a write goes *through* a symlink to the file it points at, and the link stays a
link (what an editor does; replacing the link with a regular copy would silently fork the
file). A link that points nowhere is refused. A delete removes the link itself, as `rm`
does. `within` is checked on the resolved path, so a link pointing out of it is refused.

Not a lock: two commits racing on one file each land whole (the last rename wins), but a
commit that fails and rolls back restores what *it* saw, which may undo the other's write.
"""

from __future__ import annotations

import errno
import functools
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["CommitError", "Delete", "Fault", "NotRegularFile", "Write", "commit", "open_regular"]


@dataclass(frozen=True)
class Write:
    """Make `path` hold `data` (created, with its parent directories, if missing).

    `mode`: permission bits; None keeps the target's own, or for a new file 0o666 less the
    umask (what `open(path, "w")` would give)."""

    path: Path | str
    data: bytes
    mode: int | None = None


@dataclass(frozen=True)
class Delete:
    """Remove the file (or symlink) `path`; it must exist."""

    path: Path | str


Change = Write | Delete
Fault = Callable[[str, int, Path], None]  # (phase "temp" | "rename", index, path): raise to fail


class CommitError(OSError):
    """A commit refused or failed. `path` is the file it was on (as the caller named it, made
    absolute), `reason` why; `unrestored` lists (path, why) for files that could not be put
    back (empty when every file is as it was before the commit). An OSError, so code that
    handles I/O failures handles it: `errno` is the underlying error's (None for a refusal),
    `strerror` the reason, `filename` the path."""

    def __init__(
        self,
        path: Path,
        reason: str,
        unrestored: Sequence[tuple[Path, str]] = (),
        errno_: int | None = None,
    ) -> None:
        super().__init__(errno_, reason, str(path))
        self.path, self.reason, self.unrestored = path, reason, tuple(unrestored)

    def __reduce__(self) -> tuple[Any, ...]:  # OSError's own would rebuild it from (errno, ...)
        return (type(self), (self.path, self.reason, self.unrestored, self.errno))

    def __str__(self) -> str:
        if not self.unrestored:
            return f"cannot write {self.path}: {self.reason}; every file was left as it was"
        lost = "; ".join(f"{p}: {why}" for p, why in self.unrestored)
        return (
            f"cannot write {self.path}: {self.reason}; {len(self.unrestored)} file(s) could "
            f"not be put back ({lost}): check them by hand"
        )


@dataclass
class _Target:
    index: int
    given: Path  # the path as the caller named it (made absolute): what errors name
    real: Path  # what is replaced: a write's target with symlinks resolved; a delete's entry
    data: bytes | None  # None: delete
    mode: int | None  # None: a new file, kernel default
    existed: bool
    temp: str | None = None
    aside: str | None = None  # second name of the original
    snapshot: tuple[bytes, int] | None = None  # the original, when no hard link could be made
    swapped: bool = False


@dataclass
class _Tx:
    targets: list[_Target]
    made_dirs: list[Path] = field(default_factory=list)
    current: Path | None = None


def commit(
    changes: Iterable[Change],
    *,
    within: Sequence[Path | str] | None = None,
    fault: Fault | None = None,
) -> None:
    """Apply every change, or none; raises CommitError (see the module docstring).

    `within`: directories every target must be inside, after resolving symlinks and `..`.
    `fault`: a test hook called before each step; whatever it raises fails the commit there.
    """
    tx = _Tx(_check(list(changes), within))
    try:
        for t in tx.targets:
            tx.current = t.given
            if t.data is not None:
                if fault:
                    fault("temp", t.index, t.given)
                _stage(tx, t)
        for t in tx.targets:
            tx.current = t.given
            if fault:
                fault("rename", t.index, t.given)
            _swap(t)
    except BaseException as exc:
        unrestored = _rollback(tx)
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt and friends: the tree is restored, let it through
        code = exc.errno if isinstance(exc, OSError) else None
        raise CommitError(tx.current or Path(), _why(exc), unrestored, code) from exc
    _fsync_dirs(tx)
    for t in tx.targets:
        if t.aside is not None:
            _quietly(os.unlink, t.aside)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}"


# --- 1. check ---------------------------------------------------------------------------------


def _check(changes: list[Change], within: Sequence[Path | str] | None) -> list[_Target]:
    roots = [Path(os.path.realpath(w)) for w in within] if within is not None else None
    seen: dict[Path, Path] = {}
    targets = []
    for i, ch in enumerate(changes):
        path = Path(os.path.abspath(ch.path))
        if isinstance(ch, Write):
            real = Path(os.path.realpath(path))
            if path.is_symlink() and not real.exists():
                raise CommitError(
                    path, f"it is a symlink to {real}, which does not exist; write {real} "
                    "itself or remove the link"
                )  # fmt: skip
        else:
            real = Path(os.path.realpath(path.parent)) / path.name
        try:
            st: os.stat_result | None = os.lstat(real)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise CommitError(path, _why(e), (), e.errno) from e
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise CommitError(path, "it is a directory; only files can be written or deleted")
        if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise CommitError(path, "it is not a regular file (a pipe, socket or device)")
        if st is None and isinstance(ch, Delete):
            raise CommitError(path, "it does not exist, so it cannot be deleted")
        if roots is not None and not any(real == r or r in real.parents for r in roots):
            shown = real if real == path else f"{path} -> {real}"
            raise CommitError(
                path, f"{shown} is outside {', '.join(map(str, roots))}; nothing is written there"
            )
        if real in seen:
            raise CommitError(
                path, f"it is named twice in one commit (as {seen[real]} and {path}); merge the "
                "two changes into one"
            )  # fmt: skip
        seen[real] = path
        data = ch.data if isinstance(ch, Write) else None
        mode = ch.mode if isinstance(ch, Write) else None
        if mode is None and st is not None:
            mode = stat.S_IMODE(st.st_mode)
        targets.append(_Target(i, path, real, data, mode, st is not None))
    return targets


# --- reading a file that is what it was checked to be ------------------------------------


class NotRegularFile(OSError):
    """`open_regular` found something other than a regular file; `st_mode` says what."""

    def __init__(self, path: Path | str, st_mode: int) -> None:
        if stat.S_ISDIR(st_mode):
            super().__init__(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        else:
            super().__init__(
                errno.EINVAL, "not a regular file (a FIFO, socket or device)", str(path)
            )
        self.st_mode = st_mode


def open_regular(path: Path | str, follow: bool = False) -> BinaryIO:
    """`path` opened for reading, if it is a regular file; else NotRegularFile (or the
    OSError of the open: FileNotFoundError, ELOOP for a final symlink when not `follow`).

    A check by name and the open after it see two different files when the name changes in
    between: a FIFO swapped in would block the open, and the read, for ever. So the open
    never blocks (O_NONBLOCK), and the check is made on what was opened (fstat). A device
    cannot be swapped in by whoever cannot make one (mknod needs privilege; a link to
    /dev is refused by O_NOFOLLOW, or by the caller's resolved-path check when `follow`)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, st.st_mode)
        os.set_blocking(fd, True)  # (no effect on a regular file; for the file object's sake)
        return open(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


# --- 2. stage ---------------------------------------------------------------------------------


def _beside(real: Path, tag: str, make: Callable[[str], object]) -> str:
    """A fresh name beside `real` (".tether-<random>-<name>.<tag>") on which `make` succeeded."""
    name = real.name if len(os.fsencode(real.name)) <= 200 else real.name[:48]
    for _ in range(100):
        candidate = str(real.with_name(f".tether-{secrets.token_hex(5)}-{name}.{tag}"))
        try:
            make(candidate)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(real.parent))


def _stage(tx: _Tx, t: _Target) -> None:
    assert t.data is not None
    tx.made_dirs += _make_parents(t.real.parent)
    fds: list[int] = []

    def create(name: str) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        fds.append(os.open(name, flags, 0o666 if t.mode is None else 0o600))

    t.temp = _beside(t.real, "tmp", create)
    with open(fds[0], "wb", closefd=True) as f:
        f.write(t.data)
        f.flush()
        if t.mode is not None:
            os.fchmod(f.fileno(), t.mode)
        os.fsync(f.fileno())


def _make_parents(d: Path) -> list[Path]:
    """Create the missing directories down to `d`; returns those made (outermost first)."""
    missing: list[Path] = []
    while not d.exists() and d != d.parent:
        missing.append(d)
        d = d.parent
    made = []
    for m in reversed(missing):
        try:
            m.mkdir()
        except FileExistsError:
            if m.is_dir():
                continue  # a concurrent commit made it: not ours to remove
            raise
        made.append(m)
    return made


# --- 3. swap ----------------------------------------------------------------------------------


def _swap(t: _Target) -> None:
    if t.existed:
        _keep_original(t)
    if t.temp is not None:
        os.replace(t.temp, t.real)
        t.temp = None
    else:
        os.unlink(t.real)
    t.swapped = True


def _keep_original(t: _Target) -> None:
    try:
        t.aside = _beside(t.real, "orig", lambda n: os.link(t.real, n, follow_symlinks=False))
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.EOPNOTSUPP):
            raise
        if t.real.is_symlink():
            raise  # no second name for a link and no bytes to keep: refuse
        # this filesystem refuses hard links: keep the bytes instead
        with open_regular(t.real) as f:  # (never blocks on a FIFO swapped in since _check)
            t.snapshot = (f.read(), stat.S_IMODE(os.fstat(f.fileno()).st_mode))


def _fsync_dirs(tx: _Tx) -> None:
    dirs = {t.real.parent for t in tx.targets} | {d.parent for d in tx.made_dirs}
    for d in sorted(dirs):
        try:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            os.fsync(fd)
        except OSError:
            pass  # some filesystems cannot fsync a directory (EINVAL); the renames are done
        finally:
            os.close(fd)


# --- 4. roll back -----------------------------------------------------------------------------


def _rollback(tx: _Tx) -> list[tuple[Path, str]]:
    """Put every swapped file back, remove what this commit made; returns what failed."""
    lost: list[tuple[Path, str]] = []
    for t in reversed(tx.targets):
        try:
            if t.swapped and t.aside is not None:
                os.replace(t.aside, t.real)
                t.aside = None
            elif t.swapped and t.snapshot is not None:
                back = _beside(t.real, "tmp", functools.partial(_write_new, snapshot=t.snapshot))
                os.replace(back, t.real)
            elif t.swapped:
                os.unlink(t.real)  # it did not exist before
        except OSError as e:
            lost.append((t.given, _why(e)))
        for leftover in (t.temp, t.aside):
            if leftover is not None:
                _quietly(os.unlink, leftover)
    for d in reversed(tx.made_dirs):
        _quietly(os.rmdir, d)
    _fsync_dirs(tx)
    return lost


def _write_new(name: str, snapshot: tuple[bytes, int]) -> None:
    data, mode = snapshot
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    with open(fd, "wb", closefd=True) as f:
        f.write(data)
        os.fchmod(f.fileno(), mode)
        os.fsync(f.fileno())


def _quietly(fn: Callable[[str | Path], None], path: str | Path) -> None:
    try:
        fn(path)
    except OSError:
        pass
