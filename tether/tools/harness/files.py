"""What the file tools share: workspace-relative names, decoding, the regular-file check
with an error that helps, atomic writes, and parent directories made (and unmade)."""

from __future__ import annotations

import contextlib
import difflib
import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from tether import atomic_files
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


def _missing(ctx: ToolContext, path: Path, rel: str) -> ToolResult:
    parent = path.parent
    hint = ""
    if parent.is_dir():
        try:
            names = sorted(os.listdir(parent))
        except OSError:
            names = []
        close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
        if close:
            hint = " Similar names there: " + ", ".join(
                f"'{ctx.relative(parent / n)}'" for n in close
            )
    else:
        hint = f" Its directory '{ctx.relative(parent)}' does not exist either."
    return ToolResult.error(f"no such file: '{rel}'.{hint}")


def regular_file(ctx: ToolContext, path: Path, rel: str) -> ToolResult | None:
    """None if `path` is a regular file; else the error to return."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return _missing(ctx, path, rel)
    except OSError as e:
        return ToolResult.error(f"cannot access '{rel}': {e.strerror or e}")
    if stat.S_ISDIR(st.st_mode):
        try:
            entries = sorted(os.listdir(path))
        except OSError:
            entries = []
        shown = ", ".join(e + ("/" if (path / e).is_dir() else "") for e in entries[:50])
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
        f = atomic_files.open_regular(path)
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


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `path` whole: `tether.atomic_files` (temp file beside it, fsync,
    rename); raises its CommitError naming the file and why."""
    keep = None if mode is None else stat.S_IMODE(mode)
    atomic_files.commit([atomic_files.Write(path, data, keep)])


def suppress_os() -> contextlib.suppress:
    return contextlib.suppress(OSError)


def make_parents(path: Path, root: Path) -> list[Path]:
    """Create missing parent directories; returns the ones created (deepest last)."""
    missing: list[Path] = []
    parent = path.parent
    while not parent.exists() and parent != root and root in parent.parents:
        missing.append(parent)
        parent = parent.parent
    created: list[Path] = []
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            if d.is_dir():
                continue  # a concurrent write made it: not ours to roll back
            raise
        created.append(d)
    return created
