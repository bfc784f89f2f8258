"""Open a path beneath a root without following a symlink at any component.

The problem: a tool checks a path (resolved, inside the workspace), then opens it. Between
the two, whoever can write in the workspace (a cell, a worker) can swap a directory of the
path for a symlink to somewhere else; an ordinary open follows it, and a bridged
`tool('read')` reads a file outside the workspace (issue 22). O_NOFOLLOW guards the last
component only.

The choice: callers resolve symlinks *first* (the guardrail's `resolve()`, `realpath` in
`atomic_files`) and check the resolved path is inside the root; then the resolved path is
opened here following no symlink at all. So a symlink inside the workspace works as it
always did (it was resolved before the check: a link to `src/lib` reads `src/lib`), and a
symlink that appears after the check, at any component, is refused with `SymlinkRefused`
instead of followed. Following in-tree links at open time instead (RESOLVE_BENEATH alone)
would refuse the absolute in-tree links the check accepts, and would need a symlink
resolver of our own in the fallback.

How: openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS relative to a descriptor of the
root (Linux >= 5.6, through ctypes: the standard library has no binding). Where the
kernel lacks it or a seccomp filter refuses it (ENOSYS, EPERM), a walk does the same: each
directory opened with openat(dir, name, O_PATH | O_NOFOLLOW | O_DIRECTORY), the last
component with O_NOFOLLOW and the wanted flags. The root is a resolved path (callers
`realpath` it when they check against it) and is itself opened from / the same way, so a
root swapped for a link (a project root inside the workspace, say) is refused too.
Callers that go on working in a directory (`atomic_files`: temp file, hard link, rename)
hold its descriptor from `open_dir` and use the *at calls (`dir_fd=`), so nothing they do
follows a later swap.

A leaf: standard library only.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from pathlib import Path

__all__ = ["SymlinkRefused", "lstat", "open_dir", "open_file", "remove_dir", "root_for"]

_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
RESOLVE_NO_SYMLINKS = 0x04  # linux/openat2.h
RESOLVE_BENEATH = 0x08
# openat2 is 437 on every architecture that has it (added after the tables were unified)
_SYS_OPENAT2 = 437
_openat2_works = platform.machine() in ("x86_64", "aarch64")  # False once refused (seccomp)
_LIBC = ctypes.CDLL(None, use_errno=True)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class SymlinkRefused(OSError):
    """`path` was not opened: a component of it is a symlink (errno ELOOP). The message
    names the path and the link, and says whether the link leads out of the root."""

    def __init__(self, path: Path | str, root: Path | str, reason: str | None = None) -> None:
        super().__init__(errno.ELOOP, reason or _why_refused(Path(path), Path(root)), str(path))

    def __str__(self) -> str:
        return str(self.strerror)


def real_path(path: str) -> str:
    """`os.path.realpath(path)`, in three system calls where the path exists: the kernel
    resolves it (an O_PATH open, which reads nothing and never blocks, even on a FIFO) and
    /proc names what it reached; Python's realpath lstats every component (~4x slower). A
    path that does not exist (yet), or no /proc, falls back to realpath."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return os.path.realpath(path)
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    finally:
        os.close(fd)


def root_for(path: Path | str, roots: list[Path] | tuple[Path, ...]) -> Path:
    """The innermost of `roots` (realpath'd here) holding `path` lexically; "/" when none
    does (a path the caller checked against roots it alone knows: then only the no-symlink
    rule applies, which still keeps a swap after the check from being followed)."""
    p = os.path.abspath(path)
    best = Path("/")
    for r in roots:
        real = Path(real_path(str(r)))
        if (p == str(real) or p.startswith(str(real).rstrip("/") + "/")) and len(real.parts) > len(
            best.parts
        ):
            best = real
    return best


def open_file(root: Path | str, path: Path | str, flags: int, mode: int = 0o666) -> int:
    """A descriptor of `path` (inside `root`), opened with `flags`, no symlink followed at
    any component: the last included (with O_PATH, a final symlink is refused too).
    SymlinkRefused when one is met; otherwise the open's own OSError."""
    parts = _parts(root, path)
    try:
        fd = _openat2(root, parts, flags, mode)
        if fd is None:
            fd = _walk(Path(root), parts, flags, mode, None)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EXDEV):
            raise SymlinkRefused(path, root) from e
        raise
    if flags & os.O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise SymlinkRefused(path, root)
    return fd


def open_dir(root: Path | str, path: Path | str, make: bool = False) -> tuple[int, list[Path]]:
    """An O_PATH descriptor of the directory `path` (inside `root`), for the *at calls,
    and the directories made on the way (outermost first; only with `make`, which creates
    the missing ones as `mkdir -p` does, each beneath the one before)."""
    made: list[Path] = []
    try:
        return open_file(root, path, _DIR), made
    except FileNotFoundError:
        if not make:
            raise
    try:
        return _walk(Path(root), _parts(root, path), _DIR, 0, made), made
    except OSError as e:
        for d in reversed(made):
            try:
                remove_dir(root, d)
            except OSError:
                pass
        if e.errno in (errno.ELOOP, errno.EXDEV):
            raise SymlinkRefused(path, root) from e
        raise


def lstat(root: Path | str, path: Path | str) -> os.stat_result:
    """`os.lstat(path)` with no symlink followed on the way to it (a final link is
    reported as the link, S_ISLNK)."""
    p = Path(os.path.abspath(path))
    if p == Path(os.path.abspath(root)):
        return os.stat(root)
    fd, _ = open_dir(root, p.parent)
    try:
        return os.stat(p.name, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def remove_dir(root: Path | str, path: Path | str) -> None:
    """`os.rmdir(path)` with no symlink followed on the way to it."""
    p = Path(os.path.abspath(path))
    fd, _ = open_dir(root, p.parent)
    try:
        os.rmdir(p.name, dir_fd=fd)
    finally:
        os.close(fd)


def _parts(root: Path | str, path: Path | str) -> list[str]:
    """`path` relative to `root`, as names (no `.` or `..`: it is normalized first)."""
    r, p = os.path.abspath(root), os.path.abspath(path)
    if p == r:
        return []
    prefix = r.rstrip("/") + "/"
    if not p.startswith(prefix):
        raise SymlinkRefused(
            path, root, f"{path} is not inside {root}; only paths beneath it are opened"
        )
    return p[len(prefix) :].split("/")


def _openat2(root: Path | str, parts: list[str], flags: int, mode: int) -> int | None:
    """The descriptor, or None when openat2 is not available here (then walk). The root
    is opened from / the same way: a root swapped for a symlink is refused too."""
    if not _openat2_works:
        return None
    slash = os.open("/", _DIR)
    try:
        rfd = _openat2_at(slash, _parts("/", root), _DIR, 0)
    finally:
        os.close(slash)
    if rfd is None:
        return None
    try:
        return _openat2_at(rfd, parts, flags, mode)
    finally:
        os.close(rfd)


def _openat2_at(dir_fd: int, parts: list[str], flags: int, mode: int) -> int | None:
    global _openat2_works
    how = _OpenHow(
        flags | os.O_CLOEXEC,
        mode if flags & os.O_CREAT else 0,  # (a mode without O_CREAT is EINVAL)
        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
    )
    name = os.fsencode("/".join(parts) or ".")
    for _ in range(3):  # EAGAIN: a concurrent rename made the kernel unsure; retry
        fd = _LIBC.syscall(
            ctypes.c_long(_SYS_OPENAT2), ctypes.c_long(dir_fd), ctypes.c_char_p(name),
            ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)),
        )  # fmt: skip
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        if code == errno.EAGAIN:
            continue
        if code in (errno.ENOSYS, errno.EPERM, errno.E2BIG):
            _openat2_works = False  # an old kernel, or a seccomp filter: walk from now on
            return None
        raise OSError(code, os.strerror(code), "/".join(parts))
    return None


def _walk(root: Path, parts: list[str], flags: int, mode: int, made: list[Path] | None) -> int:
    """openat one component at a time, each O_NOFOLLOW: a symlink anywhere is ELOOP, the
    root's own path included (from /). With `made` (a list), missing directories below the
    root are created and appended to it."""
    fd = os.open("/", _DIR)
    here = Path("/")
    try:
        for name in _parts("/", root):
            here = here / name
            nxt = _step(fd, name, here, _DIR, 0, None)
            os.close(fd)
            fd = nxt
        for i, name in enumerate(parts):
            here = here / name
            if i < len(parts) - 1 or made is not None:
                nxt = _step(fd, name, here, _DIR, 0, made)
            else:
                nxt = _step(fd, name, here, flags, mode, None)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _step(fd: int, name: str, here: Path, flags: int, mode: int, made: list[Path] | None) -> int:
    """openat(fd, name, flags | O_NOFOLLOW); a link met where a directory is wanted is
    ELOOP, as openat2 says (O_PATH | O_NOFOLLOW opens the link itself: ENOTDIR)."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, mode, dir_fd=fd)
    except FileNotFoundError:
        if made is None:
            raise
        try:
            os.mkdir(name, dir_fd=fd)
            made.append(here)
        except FileExistsError:
            pass  # a concurrent writer made it: not ours to remove
        return os.open(name, flags, mode, dir_fd=fd)
    except NotADirectoryError:
        if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(here)) from None
        raise


def _why_refused(path: Path, root: Path) -> str:
    """The refusal's words, from a look (lstat, for the message only) at what is there now."""
    link = root if os.path.islink(root) else None
    try:
        here = root
        for name in [] if link else _parts(root, path):
            here = here / name
            if stat.S_ISLNK(os.lstat(here).st_mode):
                link = here
                break
    except OSError:
        pass
    if link is None:
        return (
            f"{path} passed through a symlink while it was being opened (a directory or the "
            "file was swapped for a link after the path was checked); symlinks out of the "
            "workspace are not followed, so it was not opened. Call again"
        )
    target = Path(os.path.realpath(link))
    if target != root and root not in target.parents:
        return (
            f"{path} leads out of {root} through the symlink {link} (-> {target}); symlinks "
            "out of the workspace are not followed, so it was not opened"
        )
    return (
        f"{path} passes through {link}, a symlink (-> {target}) that was not there when the "
        "path was checked; symlinks out of the workspace are not followed, and a checked path "
        "is opened following none, so it was not opened. Call again to have the link "
        "resolved and checked"
    )
