"""Staged structural edits and their all-or-nothing commit (SPEC.md "resolve").

An `ast_edit` stages a change: per file, the hash of the content it was computed from and
the new content. Nothing is written. `resolve accept` re-reads every file and compares it
with the hash captured at staging; any mismatch rejects the whole change and names the
files that moved (a rewrite applied to only some files leaves a tree that compiles under
neither shape). The writes are all or nothing (`tether.atomic_files`): every new content
goes to a temporary file beside its target first, then each is renamed over its target; if
any step fails, the files already replaced get their old content back.

Plain data and functions (no actors): the tool handler keeps a `Staging` per run in
`ctx.state["structural"]`, so edit ids belong to their run.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from tether import atomic_files


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


ABSENT = "absent"  # a StagedFile's old_hash for a file that must not exist (it creates it)


class ResolveError(Exception):
    """resolve refused or failed; the message says what happened and what to do next."""


@dataclass
class StagedFile:
    rel: str  # workspace-relative, for messages and data["written"]
    path: str  # absolute
    old_hash: str  # or ABSENT
    new: bytes | None  # None: delete the file
    replacements: int
    mode: int | None = None  # permission bits to write with; None keeps the file's own


@dataclass
class StagedEdit:
    edit_id: str
    pattern: str
    rewrite: str
    files: list[StagedFile]
    status: str = "staged"  # staged | accepted | discarded (or a stager's own, e.g. superseded)
    on_end: Callable[[StagedEdit], None] | None = None  # called once accepted or discarded
    again: str = "Run ast_edit again"  # how to stage the change anew (for the messages)


@dataclass
class Staging:
    """The staged edits of one run."""

    edits: dict[str, StagedEdit] = field(default_factory=dict)
    counter: int = 0

    def stage(self, pattern: str, rewrite: str, files: list[StagedFile]) -> StagedEdit:
        self.counter += 1
        edit = StagedEdit(f"edit_{self.counter}", pattern, rewrite, files)
        self.edits[edit.edit_id] = edit
        return edit

    def get(self, edit_id: str) -> StagedEdit:
        edit = self.edits.get(edit_id)
        if edit is None:
            open_ids = [e.edit_id for e in self.edits.values() if e.status == "staged"]
            known = ", ".join(open_ids) if open_ids else "none are staged"
            raise ResolveError(
                f"unknown edit_id {edit_id!r} for this run (staged: {known}). Edit ids come "
                f'from an ast_edit result of this conversation ("call resolve with edit_id ..."); '
                f"run ast_edit again to stage a new change."
            )
        if edit.status != "staged":
            raise ResolveError(
                f"{edit_id} was already {edit.status}; nothing to do. Run ast_edit again to "
                f"stage a new change."
            )
        return edit

    def discard(self, edit_id: str) -> StagedEdit:
        edit = self.get(edit_id)
        edit.status = "discarded"
        _ended(edit)
        return edit


def _ended(edit: StagedEdit) -> None:
    if edit.on_end is not None:
        edit.on_end(edit)


Fault = atomic_files.Fault  # (phase, index, path); raise to inject a failure


def moved_files(edit: StagedEdit) -> tuple[list[str], dict[str, bytes]]:
    """Files whose content differs from staging (or that vanished), and the current bytes."""
    moved: list[str] = []
    current: dict[str, bytes] = {}
    for f in edit.files:
        if f.old_hash == ABSENT:
            if os.path.lexists(f.path):
                moved.append(f.rel)
            continue
        try:
            with open(f.path, "rb") as fh:
                data = fh.read()
        except OSError:
            moved.append(f.rel)
            continue
        current[f.path] = data
        if digest(data) != f.old_hash:
            moved.append(f.rel)
    return moved, current


def commit(edit: StagedEdit, fault: Fault | None = None) -> list[str]:
    """Verify and write every file of `edit`, all or nothing. Returns the relative paths.

    Raises ResolveError when a file moved since staging (nothing written) or when a write
    failed (everything already written is restored, by `tether.atomic_files`).
    """
    moved, _current = moved_files(edit)
    if moved:
        raise ResolveError(
            f"{edit.edit_id} rejected: {len(moved)} file(s) changed since it was staged: "
            f"{', '.join(moved)}. Nothing was written. {edit.again} to stage the change "
            f"against the current files."
        )
    changes = [
        atomic_files.Delete(f.path) if f.new is None else atomic_files.Write(f.path, f.new, f.mode)
        for f in edit.files
    ]
    try:
        atomic_files.commit(changes, fault=fault)
    except atomic_files.CommitError as exc:
        rel = {os.path.abspath(f.path): f.rel for f in edit.files}
        where = rel.get(str(exc.path), str(exc.path))
        if exc.unrestored:
            lost = "; ".join(f"{rel.get(str(p), str(p))}: {why}" for p, why in exc.unrestored)
            raise ResolveError(
                f"{edit.edit_id} failed while writing {where} ({exc.reason}) and "
                f"{len(exc.unrestored)} file(s) could not be restored: {lost}. Check those "
                f"files by hand."
            ) from exc
        raise ResolveError(
            f"{edit.edit_id} failed while writing {where} ({exc.reason}); every file "
            f"was left as it was. The change is still staged: fix the cause (permissions, "
            f"disk space) and call resolve accept again, or discard it."
        ) from exc
    edit.status = "accepted"
    _ended(edit)
    return [f.rel for f in edit.files]
