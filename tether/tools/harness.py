"""Reference file tools of the harness: read, write, edit, apply_patch.

A host may replace them with its own; they exist so a run works out of the box, so the
eval bridge's `tool("read", ...)` has something to reach, and because they are the wrap
points of diagnostics-on-write (every successful write puts `data["written"]`, the
workspace-relative paths it changed, in its result).

Writes are atomic per file (temp file in the same directory, then rename) and
`apply_patch` is atomic across files: every hunk of every file is applied in memory
first, and only then are the files replaced; if replacing the third file fails, the first
two are restored. A patch lands whole or not at all (DESIGN.md invariant 2).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.tools.results import ToolResult
from tether.tools.spec import Needs, Tier, ToolContext, ToolSpec
from tether.tools.unidiff import FilePatch, PatchError, apply_hunks, parse_patch

FAMILY = "harness"

MAX_READ_LINES = 2000
MAX_READ_BYTES = 256 * 1024
MAX_LINE_CHARS = 2000
MAX_WRITE_BYTES = 10 * 1024 * 1024
MAX_EDIT_BYTES = 20 * 1024 * 1024  # edit and apply_patch hold the whole file in memory
COUNT_LINES_UP_TO = 32 * 1024 * 1024  # beyond this, read does not count the total lines

_replace = os.replace  # indirection so tests can inject a failure in the middle of a commit


# ---- shared helpers -------------------------------------------------------------------------


def _rel(ctx: ToolContext, path: Path) -> str:
    try:
        return path.relative_to(Path(ctx.workdir).resolve()).as_posix()
    except ValueError:
        return str(path)


def _decode(raw: bytes, rel: str, verb: str) -> str | ToolResult:
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
            hint = " Similar names there: " + ", ".join(f"'{_rel(ctx, parent / n)}'" for n in close)
    else:
        hint = f" Its directory '{_rel(ctx, parent)}' does not exist either."
    return ToolResult.error(f"no such file: '{rel}'.{hint}")


def _regular_file(ctx: ToolContext, path: Path, rel: str) -> ToolResult | None:
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
    if not stat.S_ISREG(st.st_mode):
        return ToolResult.error(f"'{rel}' is not a regular file (a pipe, socket or device).")
    return None


def _atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `path` through a temp file in the same directory and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tether-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(tmp, stat.S_IMODE(mode))
        _replace(tmp, path)
    except BaseException:
        with _suppress_os():
            os.unlink(tmp)
        raise


def _suppress_os() -> contextlib.suppress:
    return contextlib.suppress(OSError)


def _make_parents(path: Path, root: Path) -> list[Path]:
    """Create missing parent directories; returns the ones created (deepest last)."""
    missing: list[Path] = []
    parent = path.parent
    while not parent.exists() and parent != root and root in parent.parents:
        missing.append(parent)
        parent = parent.parent
    created: list[Path] = []
    for d in reversed(missing):
        d.mkdir()
        created.append(d)
    return created


# ---- read -----------------------------------------------------------------------------------

_CHUNK = 64 * 1024


def _bounded_lines(f: Any) -> Any:
    """The lines of a binary file, each cut to 64 KiB: a file that is one huge line (a
    minified bundle, a data dump) must not be loaded whole to show its first characters."""
    while True:
        line = f.readline(_CHUNK)
        if not line:
            return
        if not line.endswith(b"\n") and len(line) == _CHUNK:
            while True:  # skip the rest of this line
                rest = f.readline(_CHUNK)
                if not rest or rest.endswith(b"\n"):
                    break
        yield line


def _read(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    rel = args["path"]
    path = ctx.resolve_path(rel)
    problem = _regular_file(ctx, path, rel)
    if problem is not None:
        return problem
    start = int(args.get("start_line", 1))
    end = int(args["end_line"]) if "end_line" in args else None
    if end is not None and end < start:
        return ToolResult.error(
            f"end_line ({end}) is before start_line ({start}); give start_line <= end_line."
        )
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8192)
        if b"\x00" in head:
            return ToolResult.error(
                f"'{rel}' is a binary file ({size} bytes); read shows text only."
            )
        f.seek(0)
        shown: list[str] = []
        used = 0
        number = 0
        truncated = ""
        long_lines = 0
        for raw in _bounded_lines(f):
            number += 1
            if number < start:
                continue
            if end is not None and number > end:
                if size > COUNT_LINES_UP_TO:
                    break
                continue
            if truncated:
                if size > COUNT_LINES_UP_TO:
                    break
                continue
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + " [... line cut]"
                long_lines += 1
            entry = f"{number:>6}\t{line}"
            if len(shown) >= MAX_READ_LINES:
                truncated = "lines"
                continue
            if used + len(entry) + 1 > MAX_READ_BYTES and shown:
                truncated = "bytes"
                continue
            shown.append(entry)
            used += len(entry) + 1
        total = number if size <= COUNT_LINES_UP_TO or not truncated else None
    if number == 0:
        return ToolResult.ok(f"'{rel}' is empty.", data={"path": rel, "total_lines": 0})
    if start > number:
        return ToolResult.error(
            f"start_line {start} is past the end of '{rel}', which has {number} lines."
        )
    last = start + len(shown) - 1
    notes = []
    if truncated:
        cap = f"{MAX_READ_LINES} lines" if truncated == "lines" else f"{MAX_READ_BYTES // 1024} KiB"
        of = f" of {total}" if total is not None else ""
        notes.append(
            f"[showing lines {start}-{last}{of}: output is capped at {cap}; "
            f"call read with start_line={last + 1} for more]"
        )
    if long_lines:
        notes.append(f"[{long_lines} line(s) longer than {MAX_LINE_CHARS} characters were cut]")
    text = "\n".join(shown + notes)
    data = {
        "path": rel,
        "start_line": start,
        "end_line": last,
        "total_lines": total,
        "truncated": bool(truncated),
    }
    return ToolResult.ok(text, data=data)


# ---- write ----------------------------------------------------------------------------------


def _write(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    rel = args["path"]
    content: str = args["content"]
    path = ctx.resolve_path(rel)
    data = content.encode("utf-8", errors="surrogatepass")
    if len(data) > MAX_WRITE_BYTES:
        return ToolResult.error(
            f"content is {len(data)} bytes; write takes at most {MAX_WRITE_BYTES} bytes."
        )
    mode = None
    existed = path.exists() or path.is_symlink()
    if existed:
        if path.is_dir():
            return ToolResult.error(f"'{rel}' is a directory; give a file path to write.")
        problem = _regular_file(ctx, path, rel)
        if problem is not None:
            return problem
        mode = path.stat().st_mode
    root = Path(ctx.workdir).resolve()
    created = _make_parents(path, root)
    try:
        _atomic_write(path, data, mode)
    except BaseException:
        for d in reversed(created):
            with _suppress_os():
                d.rmdir()
        raise
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    verb = "overwrote" if existed else "created"
    written = _rel(ctx, path)
    return ToolResult.ok(
        f"{verb} '{written}' ({len(data)} bytes, {lines} lines).",
        data={"written": [written], "created": not existed},
    )


# ---- edit -----------------------------------------------------------------------------------


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _edit(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    rel = args["path"]
    old: str = args["old_string"]
    new: str = args["new_string"]
    replace_all = bool(args.get("replace_all", False))
    path = ctx.resolve_path(rel)
    problem = _regular_file(ctx, path, rel)
    if problem is not None:
        return problem
    if old == new:
        return ToolResult.error("old_string and new_string are the same; nothing to change.")
    if path.stat().st_size > MAX_EDIT_BYTES:
        return ToolResult.error(
            f"'{rel}' is {path.stat().st_size} bytes; edit changes files up to "
            f"{MAX_EDIT_BYTES // (1024 * 1024)} MiB. Use write to replace it whole."
        )
    raw = path.read_bytes()
    text = _decode(raw, rel, "edit changes")
    if isinstance(text, ToolResult):
        return text
    work, crlf = text, False
    if "\r\n" in text and "\r\n" not in old:
        # The model saw LF line endings in read; match against the same.
        work, crlf = text.replace("\r\n", "\n"), True
    starts = [m.start() for m in re.finditer(re.escape(old), work)]
    if not starts:
        return ToolResult.error(_no_match_message(rel, work, old))
    if len(starts) > 1 and not replace_all:
        return ToolResult.error(_many_matches_message(rel, work, old, starts))
    result = work.replace(old, new) if replace_all else work.replace(old, new, 1)
    if crlf:
        result = result.replace("\n", "\r\n")
    _atomic_write(path, result.encode("utf-8", errors="surrogatepass"), path.stat().st_mode)
    lines = ", ".join(str(_line_of(work, s)) for s in starts[:20])
    count = f"{len(starts)} occurrences" if len(starts) > 1 else "1 occurrence"
    written = _rel(ctx, path)
    return ToolResult.ok(
        f"replaced {count} in '{written}' (line {lines}).",
        data={"written": [written], "replacements": len(starts)},
    )


def _many_matches_message(rel: str, text: str, old: str, starts: list[int]) -> str:
    lines = text.split("\n")
    shown = []
    for s in starts[:10]:
        n = _line_of(text, s)
        shown.append(f"  line {n}: {lines[n - 1].strip()[:120]}")
    more = f"\n  ... and {len(starts) - 10} more" if len(starts) > 10 else ""
    return (
        f"old_string matches {len(starts)} times in '{rel}'; it must match exactly once.\n"
        "Candidates:\n" + "\n".join(shown) + more + "\n"
        "Add surrounding lines to old_string so it names one place, or set replace_all=true "
        "to change every occurrence."
    )


_LINE_PREFIX = re.compile(r"^\s*\d+\t", re.M)


def _no_match_message(rel: str, text: str, old: str) -> str:
    lines = text.split("\n")
    hints: list[str] = []
    if _LINE_PREFIX.search(old):
        hints.append(
            "old_string seems to contain the line-number prefix that read shows; "
            "leave the numbers and the tab out."
        )
    squashed = re.sub(r"\s+", " ", old).strip()
    if squashed and squashed in re.sub(r"\s+", " ", text):
        hints.append(
            "it matches if whitespace is ignored: copy indentation and line breaks exactly."
        )
    first = next((ln.strip() for ln in old.split("\n") if ln.strip()), "")
    candidates: list[str] = []
    if first:
        stripped = [ln.strip() for ln in lines]
        close = difflib.get_close_matches(first, stripped, n=5, cutoff=0.6)
        seen: set[int] = set()
        for c in close:
            for i, s in enumerate(stripped):
                if s == c and i not in seen:
                    seen.add(i)
                    candidates.append(f"  line {i + 1}: {lines[i].strip()[:120]}")
                    break
    msg = f"old_string was not found in '{rel}'; it must match the file exactly, once."
    if candidates:
        msg += "\nClosest lines:\n" + "\n".join(candidates)
    if hints:
        msg += "\n" + "\n".join(f"Hint: {h}" for h in hints)
    msg += "\nRead the file again and copy the text to replace exactly."
    return msg


# ---- apply_patch ----------------------------------------------------------------------------


@dataclass
class _Planned:
    rel: str
    path: Path
    new: bytes | None  # None: delete
    old: bytes | None  # None: did not exist
    mode: int | None


def _apply_patch(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    try:
        patches = parse_patch(args["patch"])
    except PatchError as e:
        return ToolResult.error(f"the patch cannot be parsed: {e}. Nothing was changed.")
    # Plan every file in memory; nothing touches the disk until all hunks applied.
    planned: dict[Path, _Planned] = {}
    order: list[Path] = []
    for fp in patches:
        rel = fp.target
        path = ctx.resolve_path(rel)
        if fp.old is not None and fp.new is not None and fp.old != fp.new:
            src = ctx.resolve_path(fp.old)
            if src != path:
                return ToolResult.error(
                    f"the patch renames '{fp.old}' to '{fp.new}', which apply_patch does not "
                    "support; delete the old file and create the new one. Nothing was changed."
                )
        prior = planned.get(path)
        if prior is not None:
            exists, current = prior.new is not None, prior.new
        else:
            problem = _regular_file(ctx, path, rel) if path.exists() else None
            if problem is not None:
                return _nothing_changed(problem)
            exists = path.is_file()
            if exists and path.stat().st_size > MAX_EDIT_BYTES:
                return ToolResult.error(
                    f"'{rel}' is larger than {MAX_EDIT_BYTES // (1024 * 1024)} MiB; apply_patch "
                    "changes smaller files only. Nothing was changed."
                )
            current = path.read_bytes() if exists else None
        try:
            new_bytes = _plan_one(rel, fp, exists, current)
        except PatchError as e:
            return ToolResult.error(
                f"{e}\nNothing was changed: a patch applies whole or not at all."
            )
        if prior is None:
            planned[path] = _Planned(
                rel=_rel(ctx, path),
                path=path,
                new=new_bytes,
                old=current,
                mode=path.stat().st_mode if exists else None,
            )
            order.append(path)
        else:
            prior.new = new_bytes
    steps = [planned[p] for p in order if planned[p].new != planned[p].old]
    _commit(ctx, steps)
    created = [s.rel for s in steps if s.old is None and s.new is not None]
    deleted = [s.rel for s in steps if s.new is None]
    modified = [s.rel for s in steps if s.old is not None and s.new is not None]
    parts = []
    for label, names in (("modified", modified), ("created", created), ("deleted", deleted)):
        if names:
            parts.append(f"{label} {', '.join(names)}")
    written = [s.rel for s in steps]
    summary = "; ".join(parts) or "no changes (the patch leaves every file as it was)"
    return ToolResult.ok(
        f"applied the patch to {len(steps)} file(s): {summary}.",
        data={"written": written, "created": created, "deleted": deleted, "modified": modified},
    )


def _nothing_changed(result: ToolResult) -> ToolResult:
    return ToolResult.error(result.text + " Nothing was changed.")


def _plan_one(rel: str, fp: FilePatch, exists: bool, current: bytes | None) -> bytes | None:
    if fp.old is None:  # create
        if exists:
            raise PatchError(
                f"the patch creates '{rel}', which already exists; patch it instead "
                "(--- a/path, +++ b/path)"
            )
        text = apply_hunks(rel, "", fp) if fp.hunks else ""
        return text.encode("utf-8")
    if not exists:
        raise PatchError(
            f"the patch changes '{rel}', which does not exist; to create it use '--- /dev/null'"
        )
    assert current is not None
    decoded = _decode(current, rel, "apply_patch changes")
    if isinstance(decoded, ToolResult):
        raise PatchError(decoded.text)
    if fp.new is None:  # delete
        if fp.hunks:
            rest = apply_hunks(rel, decoded, fp)
            if rest.strip():
                raise PatchError(
                    f"the patch deletes '{rel}' but its hunks do not remove all of its content"
                )
        return None
    if not fp.hunks:
        raise PatchError(f"the patch names '{rel}' but has no hunks for it")
    return apply_hunks(rel, decoded, fp).encode("utf-8", errors="surrogatepass")


def _commit(ctx: ToolContext, steps: list[_Planned]) -> None:
    """Replace every planned file, or restore every one already replaced and re-raise."""
    root = Path(ctx.workdir).resolve()
    created_dirs: list[Path] = []
    temps: dict[Path, str] = {}
    done: list[tuple[_Planned, str | None]] = []  # (step, aside path of a deleted file)
    try:
        for s in steps:  # stage: temp files beside their targets
            if s.new is None:
                continue
            created_dirs += _make_parents(s.path, root)
            fd, tmp = tempfile.mkstemp(
                prefix=f".{s.path.name}.", suffix=".tether-tmp", dir=s.path.parent
            )
            temps[s.path] = tmp
            with os.fdopen(fd, "wb") as f:
                f.write(s.new)
            if s.mode is not None:
                os.chmod(tmp, stat.S_IMODE(s.mode))
        for s in steps:  # swap in
            if s.new is None:
                fd, aside = tempfile.mkstemp(
                    prefix=f".{s.path.name}.", suffix=".tether-del", dir=s.path.parent
                )
                os.close(fd)
                try:
                    _replace(s.path, aside)
                except BaseException:
                    with _suppress_os():
                        os.unlink(aside)
                    raise
                done.append((s, aside))
            else:
                _replace(temps[s.path], s.path)
                del temps[s.path]
                done.append((s, None))
    except BaseException:
        for s, moved in reversed(done):
            with _suppress_os():
                if moved is not None:
                    _replace(moved, s.path)
                elif s.old is None:
                    s.path.unlink()
                else:
                    _atomic_write(s.path, s.old, s.mode)
        for tmp in temps.values():
            with _suppress_os():
                os.unlink(tmp)
        for d in reversed(created_dirs):
            with _suppress_os():
                d.rmdir()
        raise
    for _, moved in done:
        if moved is not None:
            with _suppress_os():
                os.unlink(moved)


# ---- specs ----------------------------------------------------------------------------------

_PATH = {
    "type": "string",
    "minLength": 1,
    "description": "workspace-relative path, e.g. 'src/app.py'",
}


def specs() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="read",
            tier=Tier.READ,
            description=(
                "Read a text file of the workspace. Lines come back numbered ('   12\\tcode'); "
                "the numbers are not part of the file. Use start_line/end_line for a range of "
                f"a large file; output is capped at {MAX_READ_LINES} lines or "
                f"{MAX_READ_BYTES // 1024} KiB and says how to read on. "
                'Example: read {"path": "src/app.py", "start_line": 40, "end_line": 80}'
            ),
            schema={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "start_line": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "first line to show, 1-indexed (default 1)",
                    },
                    "end_line": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "last line to show, inclusive (default: to the cap)",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            handler=_read,
            needs=frozenset({Needs.WORKDIR}),
            path_args=("path",),
        ),
        ToolSpec(
            name="write",
            tier=Tier.WRITE,
            description=(
                "Create a file or replace its whole content. Parent directories are created. "
                "To change part of an existing file prefer edit or apply_patch. "
                'Example: write {"path": "notes/todo.md", "content": "- fix login\\n"}'
            ),
            schema={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "content": {"type": "string", "description": "the complete new content"},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            handler=_write,
            needs=frozenset({Needs.WORKDIR}),
            path_args=("path",),
        ),
        ToolSpec(
            name="edit",
            tier=Tier.WRITE,
            description=(
                "Replace an exact piece of text in a file. old_string must match the file "
                "exactly (indentation included, without read's line numbers) and exactly once; "
                "include surrounding lines to make it unique, or set replace_all to change "
                "every occurrence. "
                'Example: edit {"path": "src/app.py", "old_string": "retries = 3", '
                '"new_string": "retries = 5"}'
            ),
            schema={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "old_string": {
                        "type": "string",
                        "minLength": 1,
                        "description": "the exact text to replace",
                    },
                    "new_string": {"type": "string", "description": "the text to put instead"},
                    "replace_all": {
                        "type": "boolean",
                        "description": "replace every occurrence (default false: exactly one)",
                    },
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": False,
            },
            handler=_edit,
            needs=frozenset({Needs.WORKDIR}),
            path_args=("path",),
        ),
        ToolSpec(
            name="apply_patch",
            tier=Tier.WRITE,
            description=(
                "Apply a unified diff to one or more files, all or nothing: if any hunk does "
                "not apply, no file is changed. Create a file with '--- /dev/null', delete one "
                "with '+++ /dev/null'. Paths are workspace-relative (a/ and b/ prefixes are "
                "accepted). Example patch:\n"
                "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n import os\n"
                "-retries = 3\n+retries = 5\n"
            ),
            schema={
                "type": "object",
                "properties": {
                    "patch": {
                        "type": "string",
                        "minLength": 1,
                        "description": "the unified diff text",
                        "examples": [
                            "--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
                        ],
                    },
                },
                "required": ["patch"],
                "additionalProperties": False,
            },
            handler=_apply_patch,
            needs=frozenset({Needs.WORKDIR}),
        ),
    ]
