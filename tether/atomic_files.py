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
Links are resolved once, in the check; after it every step works beneath its root
(`tether.beneath`): the target's directory is opened following no symlink at any
component, and the temp file, the second name, the rename and the unlink are made in that
directory's descriptor (openat, linkat, renameat, unlinkat). A directory swapped for a
symlink after the check is refused (SymlinkRefused), never written through.

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
from typing import BinaryIO, Protocol

from tether import beneath

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

    def __reduce__(
        self,
    ) -> tuple[type[CommitError], tuple[Path, str, tuple[tuple[Path, str], ...], int | None]]:
        # (OSError's own would rebuild it from (errno, ...))
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
    root: Path  # what `real` is opened beneath (`within`'s root holding it, else /)
    data: bytes | None  # None: delete
    mode: int | None  # None: a new file, kernel default
    existed: bool
    dir_fd: int | None = None  # real.parent, opened beneath root: every step is made in it
    temp: str | None = None  # names in dir_fd
    aside: str | None = None  # second name of the original
    snapshot: tuple[bytes, int] | None = None  # the original, when no hard link could be made
    swapped: bool = False


@dataclass
class _Tx:
    targets: list[_Target]
    made_dirs: list[tuple[Path, Path]] = field(default_factory=list)  # (root, directory)
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
        _run(tx, fault)
    finally:
        for t in tx.targets:
            if t.dir_fd is not None:
                os.close(t.dir_fd)


def _run(tx: _Tx, fault: Fault | None) -> None:
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
            _swap(tx, t)
    except BaseException as exc:
        unrestored = _rollback(tx)
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt and friends: the tree is restored, let it through
        code = exc.errno if isinstance(exc, OSError) else None
        raise CommitError(tx.current or Path(), _why(exc), unrestored, code) from exc
    _fsync_dirs(tx)
    for t in tx.targets:
        if t.aside is not None:
            _quietly(t, os.unlink, t.aside)


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
        if roots is not None and not any(real == r or r in real.parents for r in roots):
            shown = real if real == path else f"{path} -> {real}"
            raise CommitError(
                path, f"{shown} is outside {', '.join(map(str, roots))}; nothing is written there"
            )
        root = beneath.root_for(real, roots or ())
        try:
            st: os.stat_result | None = beneath.lstat(root, real)
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
        targets.append(_Target(i, path, real, root, data, mode, st is not None))
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


def open_regular(
    path: Path | str, follow: bool = False, root: Path | str | None = None
) -> BinaryIO:
    """`path` opened for reading, if it is a regular file; else NotRegularFile (or the
    OSError of the open: FileNotFoundError, ELOOP for a final symlink when not `follow`).

    A check by name and the open after it see two different files when the name changes in
    between: a FIFO swapped in would block the open, and the read, for ever. So the open
    never blocks (O_NONBLOCK), and the check is made on what was opened (fstat). A device
    cannot be swapped in by whoever cannot make one (mknod needs privilege; a link to
    /dev is refused by O_NOFOLLOW, or by the caller's resolved-path check when `follow`).

    `root` (a workspace file): opened beneath it with no symlink followed at any component
    (`tether.beneath`); `follow` then resolves links first and refuses a path whose links
    lead out of `root` (beneath.SymlinkRefused, an ELOOP), so an in-tree link still reads."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if root is None:
        fd = os.open(path, flags | (0 if follow else os.O_NOFOLLOW))
    else:
        real = os.path.realpath(path) if follow else os.path.abspath(path)
        r = os.path.realpath(root)
        if follow and real != r and not real.startswith(r.rstrip("/") + "/"):
            raise beneath.SymlinkRefused(
                path, root, f"{path} leads out of {root} through a symlink (to {real}); symlinks "
                "out of the workspace are not followed, so it was not opened"
            )  # fmt: skip
        fd = beneath.open_file(r, real, flags)
    return _regular(fd, path)


def _regular(fd: int, path: Path | str) -> BinaryIO:
    """The open `fd` as a file object if it is a regular file (else closed, NotRegularFile)."""
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


def _beside(t: _Target, tag: str, make: Callable[[str], object]) -> str:
    """A fresh name beside the target, in its directory (".tether-<random>-<name>.<tag>"),
    on which `make` succeeded."""
    name = t.real.name if len(os.fsencode(t.real.name)) <= 200 else t.real.name[:48]
    for _ in range(100):
        candidate = f".tether-{secrets.token_hex(5)}-{name}.{tag}"
        try:
            make(candidate)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(t.real.parent))


def _open_parent(tx: _Tx, t: _Target, make: bool) -> int:
    """The target's directory, opened beneath its root (made first when `make`): held for
    the whole commit, so no step after this one looks the path up again."""
    if t.dir_fd is None:
        t.dir_fd, made = beneath.open_dir(t.root, t.real.parent, make=make)
        tx.made_dirs += [(t.root, d) for d in made]
    return t.dir_fd


def _stage(tx: _Tx, t: _Target) -> None:
    assert t.data is not None
    dir_fd = _open_parent(tx, t, make=True)
    fds: list[int] = []

    def create(name: str) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        fds.append(os.open(name, flags, 0o666 if t.mode is None else 0o600, dir_fd=dir_fd))

    t.temp = _beside(t, "tmp", create)
    with open(fds[0], "wb", closefd=True) as f:
        f.write(t.data)
        f.flush()
        if t.mode is not None:
            os.fchmod(f.fileno(), t.mode)
        os.fsync(f.fileno())


# --- 3. swap ----------------------------------------------------------------------------------


def _swap(tx: _Tx, t: _Target) -> None:
    dir_fd = _open_parent(tx, t, make=False)
    name = t.real.name
    if t.existed:
        _keep_original(t, dir_fd)
    if t.temp is not None:
        os.replace(t.temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        t.temp = None
    else:
        os.unlink(name, dir_fd=dir_fd)
    t.swapped = True


def _keep_original(t: _Target, dir_fd: int) -> None:
    name = t.real.name
    try:
        t.aside = _beside(
            t, "orig",
            lambda n: os.link(name, n, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False),
        )  # fmt: skip
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.EOPNOTSUPP):
            raise
        if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise  # no second name for a link and no bytes to keep: refuse
        # this filesystem refuses hard links: keep the bytes instead
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW
        with _regular(os.open(name, flags, dir_fd=dir_fd), t.real) as f:  # never blocks
            t.snapshot = (f.read(), stat.S_IMODE(os.fstat(f.fileno()).st_mode))


def _fsync_dirs(tx: _Tx) -> None:
    fds = {t.dir_fd for t in tx.targets if t.dir_fd is not None}
    for fd in fds:
        _fsync_dir(".", fd)
    for root, d in tx.made_dirs:  # the entries of the directories this commit made
        try:
            parent, _ = beneath.open_dir(root, d.parent)
        except OSError:
            continue
        try:
            _fsync_dir(".", parent)
        finally:
            os.close(parent)


def _fsync_dir(name: str, dir_fd: int) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return
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
        fd, name = t.dir_fd, t.real.name
        if fd is None:
            continue  # its directory was never opened: nothing was done to it
        try:
            if t.swapped and t.aside is not None:
                os.replace(t.aside, name, src_dir_fd=fd, dst_dir_fd=fd)
                t.aside = None
            elif t.swapped and t.snapshot is not None:
                back = _beside(t, "tmp", functools.partial(_write_new, t))
                os.replace(back, name, src_dir_fd=fd, dst_dir_fd=fd)
            elif t.swapped:
                os.unlink(name, dir_fd=fd)  # it did not exist before
        except OSError as e:
            lost.append((t.given, _why(e)))
        for leftover in (t.temp, t.aside):
            if leftover is not None:
                _quietly(t, os.unlink, leftover)
    for root, d in reversed(tx.made_dirs):
        try:
            beneath.remove_dir(root, d)
        except OSError:
            pass
    _fsync_dirs(tx)
    return lost


def _write_new(t: _Target, name: str) -> None:
    assert t.snapshot is not None and t.dir_fd is not None
    data, mode = t.snapshot
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    with open(os.open(name, flags, 0o600, dir_fd=t.dir_fd), "wb", closefd=True) as f:
        f.write(data)
        os.fchmod(f.fileno(), mode)
        os.fsync(f.fileno())


class _InDir(Protocol):
    """A call on a name in a directory (os.unlink, os.rmdir)."""

    def __call__(self, path: str, /, *, dir_fd: int | None = None) -> None: ...


def _quietly(t: _Target, fn: _InDir, name: str) -> None:
    """`fn(name, dir_fd=...)` in the target's directory, errors ignored (a cleanup)."""
    try:
        fn(name, dir_fd=t.dir_fd)
    except OSError:
        pass
