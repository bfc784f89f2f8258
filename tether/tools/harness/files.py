"""What the file tools share: workspace-relative names, decoding, the regular-file check
with an error that helps, atomic writes.

Every look at a workspace path (stat, listing, open, write) goes beneath the workspace
root with no symlink followed at any component (`tether.beneath`): the guardrail resolved
the path's links and checked it is inside, and a directory swapped for a symlink after that
check is refused, not followed out of the workspace."""

from __future__ import annotations

import difflib
import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from tether import atomic_files, beneath
from tether.tools.guardrails import special_file
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext


def decode(raw: bytes, rel: str, verb: str) -> str | ToolResult:
    if b"\x00" in raw[:8192]:
        return ToolResult.error(f"'{rel}' is a binary file ({len(raw)} bytes); {verb} text only.")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return ToolResult.error(
            f"'{rel}' is not UTF-8 text (bad byte at offset {e.start}); {verb} UTF-8 text only."
        )


def root_of(ctx: ToolContext, path: Path) -> Path:
    """The root `path` (resolved, checked by the guardrail) is opened beneath: the workspace,
    or "/" for a host's extra root (then only the no-symlink rule applies)."""
    return beneath.root_for(path, [ctx.workdir])


def _listing(root: Path, path: Path, marked: int = 0) -> list[str] | None:
    """The names in directory `path`, read beneath `root` (the first `marked` of them with
    "/" when they are directories); None if it is not one."""
    try:
        fd = beneath.open_file(root, path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        names = sorted(os.listdir(fd))
        return [n + ("/" if i < marked and _is_dir(fd, n) else "") for i, n in enumerate(names)]
    except OSError:
        return []
    finally:
        os.close(fd)


def _is_dir(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _missing(ctx: ToolContext, path: Path, rel: str) -> ToolResult:
    parent = path.parent
    hint = ""
    names = _listing(root_of(ctx, path), parent)
    if names is not None:
        close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
        if close:
            hint = " Similar names there: " + ", ".join(
                f"'{ctx.relative(parent / n)}'" for n in close
            )
    else:
        hint = f" Its directory '{ctx.relative(parent)}' does not exist either."
    return ToolResult.error(f"no such file: '{rel}'.{hint}")


def lstat(ctx: ToolContext, path: Path) -> os.stat_result | None:
    """`path`'s lstat beneath the workspace (None: there is nothing there); raises
    SymlinkRefused when a component became a symlink since the guardrail's check."""
    try:
        return beneath.lstat(root_of(ctx, path), path)
    except FileNotFoundError:
        return None


def refused(rel: str, e: beneath.SymlinkRefused, verb: str = "read") -> ToolResult:
    return ToolResult.error(f"'{rel}' was not {verb}: {e.strerror}.")


def regular_file(ctx: ToolContext, path: Path, rel: str) -> ToolResult | None:
    """None if `path` is a regular file; else the error to return."""
    root = root_of(ctx, path)
    try:
        st = beneath.lstat(root, path)
    except FileNotFoundError:
        return _missing(ctx, path, rel)
    except beneath.SymlinkRefused as e:
        return refused(rel, e)
    except OSError as e:
        return ToolResult.error(f"cannot access '{rel}': {e.strerror or e}")
    if stat.S_ISLNK(st.st_mode):  # the guardrail resolved links: this one is new
        return ToolResult.error(
            f"'{rel}' became a symlink after it was checked, so it was not read; call again "
            "to have the link resolved and checked."
        )
    if stat.S_ISDIR(st.st_mode):
        entries = _listing(root, path, marked=50) or []
        shown = ", ".join(entries[:50])
        more = f" (and {len(entries) - 50} more)" if len(entries) > 50 else ""
        return ToolResult.error(
            f"'{rel}' is a directory, not a file. Its entries: {shown or '(empty)'}{more}. "
            "Read one of the files instead."
        )
    what = special_file(st.st_mode)
    if what is not None:  # the guardrail refused it already, unless it changed since
        return ToolResult.error(f"'{rel}' is {what}, not a regular file; give a regular file.")
    return None


def open_checked(ctx: ToolContext, path: Path, rel: str) -> tuple[BinaryIO, int] | ToolResult:
    """`path` open for reading and its size, once `regular_file` found a regular file there
    and the open file is one too (`atomic_files.open_regular`: a FIFO or a symlink swapped
    in after the check is refused, never waited on); else the error to return."""
    problem = regular_file(ctx, path, rel)
    if problem is not None:
        return problem
    try:
        f = atomic_files.open_regular(path, root=root_of(ctx, path))
    except beneath.SymlinkRefused as e:
        return refused(rel, e)
    except atomic_files.NotRegularFile as e:
        what = special_file(e.st_mode) or "a directory"
        return ToolResult.error(
            f"'{rel}' became {what} while it was being opened, so it was not read; "
            "give a regular file."
        )
    except FileNotFoundError:
        return _missing(ctx, path, rel)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return ToolResult.error(
                f"'{rel}' became a symlink while it was being opened, so it was not read; "
                "call again to have the link resolved and checked."
            )
        return ToolResult.error(f"cannot open '{rel}': {e.strerror or e}")
    return f, os.fstat(f.fileno()).st_size


def atomic_write(ctx: ToolContext, path: Path, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `path` whole, its missing directories made: `tether.atomic_files`
    (temp file beside it, fsync, rename, all beneath the workspace root); raises its
    CommitError naming the file and why (every directory it made is removed again)."""
    keep = None if mode is None else stat.S_IMODE(mode)
    atomic_files.commit([atomic_files.Write(path, data, keep)], within=[root_of(ctx, path)])
