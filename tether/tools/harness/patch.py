"""`apply_patch`: a unified diff applied to every file it names, all or nothing.

Every hunk of every file is applied in memory first; only then are the files replaced, in
one `tether.atomic_files.commit`: if replacing the third file fails, the first two are
restored (DESIGN.md invariant 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tether import atomic_files, beneath
from tether.json_types import JSONObject
from tether.tools.harness.edit import MAX_EDIT_BYTES
from tether.tools.harness.files import decode, lstat, open_checked, refused, root_of
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext
from tether.tools.unidiff import FilePatch, PatchError, apply_hunks, parse_patch


@dataclass
class _Planned:
    rel: str
    path: Path
    new: bytes | None  # None: delete
    old: bytes | None  # None: did not exist


def _current(ctx: ToolContext, path: Path, rel: str) -> bytes | None | ToolResult:
    """The bytes of the file the patch changes (None: there is none yet), or the error."""
    try:
        if lstat(ctx, path) is None:
            return None
    except beneath.SymlinkRefused as e:
        return _nothing_changed(refused(rel, e))
    opened = open_checked(ctx, path, rel)
    if isinstance(opened, ToolResult):
        return _nothing_changed(opened)
    with opened[0] as f:
        if opened[1] > MAX_EDIT_BYTES:
            return ToolResult.error(
                f"'{rel}' is larger than {MAX_EDIT_BYTES // (1024 * 1024)} MiB; apply_patch "
                "changes smaller files only. Nothing was changed."
            )
        return f.read()


def apply_patch(ctx: ToolContext, args: JSONObject) -> ToolResult:
    try:
        patches = parse_patch(str(args["patch"]))  # (a string: validated)
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
            got = _current(ctx, path, rel)
            if isinstance(got, ToolResult):
                return got
            exists, current = got is not None, got
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
            )
            order.append(path)
        else:
            prior.new = new_bytes
    steps = [planned[p] for p in order if planned[p].new != planned[p].old]
    if not steps:
        return ToolResult.error(
            "the patch changes nothing: its '+' lines equal the '-' lines they replace in "
            f"{', '.join(planned[p].rel for p in order)}. Nothing was changed; put the new text "
            "on the '+' lines."
        )
    try:
        atomic_files.commit(
            [
                atomic_files.Delete(s.path) if s.new is None else atomic_files.Write(s.path, s.new)
                for s in steps
            ],
            within=sorted({root_of(ctx, s.path) for s in steps}),
        )
    except atomic_files.CommitError as e:
        return _not_written(ctx, e)
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


def _not_written(ctx: ToolContext, e: atomic_files.CommitError) -> ToolResult:
    text = f"apply_patch could not write '{ctx.relative(e.path)}': {e.reason}."
    if e.unrestored:
        lost = ", ".join(f"'{ctx.relative(p)}' ({why})" for p, why in e.unrestored)
        return ToolResult.error(f"{text} These files could not be put back: {lost}; check them.")
    return ToolResult.error(f"{text} Nothing was changed: every file is as it was.")


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
