"""`apply_patch`: a unified diff applied to every file it names, all or nothing.

Every hunk of every file is applied in memory first; only then are the files replaced
(temp files beside their targets, then renames). If replacing the third file fails, the
first two are restored (DESIGN.md invariant 2).
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.tools.harness import files
from tether.tools.harness.edit import MAX_EDIT_BYTES
from tether.tools.harness.files import (
    atomic_write,
    decode,
    make_parents,
    regular_file,
    suppress_os,
)
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext
from tether.tools.unidiff import FilePatch, PatchError, apply_hunks, parse_patch


@dataclass
class _Planned:
    rel: str
    path: Path
    new: bytes | None  # None: delete
    old: bytes | None  # None: did not exist
    mode: int | None


def apply_patch(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
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
            problem = regular_file(ctx, path, rel) if path.exists() else None
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
                rel=ctx.relative(path),
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
    decoded = decode(current, rel, "apply_patch changes")
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
            created_dirs += make_parents(s.path, root)
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
                    files.replace(s.path, aside)
                except BaseException:
                    with suppress_os():
                        os.unlink(aside)
                    raise
                done.append((s, aside))
            else:
                files.replace(temps[s.path], s.path)
                del temps[s.path]
                done.append((s, None))
    except BaseException:
        for s, moved in reversed(done):
            with suppress_os():
                if moved is not None:
                    files.replace(moved, s.path)
                elif s.old is None:
                    s.path.unlink()
                else:
                    atomic_write(s.path, s.old, s.mode)
        for tmp in temps.values():
            with suppress_os():
                os.unlink(tmp)
        for d in reversed(created_dirs):
            with suppress_os():
                d.rmdir()
        raise
    for _, moved in done:
        if moved is not None:
            with suppress_os():
                os.unlink(moved)
