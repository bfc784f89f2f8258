"""An isolated vibe worker's change, staged for `resolve` like an ast_edit's.

When a run of an isolated worker ends (done, failed or stopped at a cap), what it changed
in its view (tether.worker_views) is read once and staged in the run's structural staging
(tether.structural.staging): an `edit_id` that `resolve` accepts whole or not at all -
refused if a file changed since it was staged - or discards. Each file's expected content
is the workspace's at staging; a file the workspace changed after the worker's view was
made is a conflict, staged so that accept refuses it (its expected hash matches nothing)
and named in the summary. Accepting or discarding ends the worker's view (`on_end`); a
rerun (vibe_send) supersedes the change staged before it, and stages its own, which
holds everything the worker did on that view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from tether import worker_views
from tether.structural.staging import ABSENT, StagedEdit, StagedFile, digest
from tether.tools.spec import RunState
from tether.tools.structural import run_staging

CONFLICT = "conflict: changed in the workspace after the worker's view was made"
LEFT_OUT_SHOWN = 5  # paths named in the summary of what was left out


class ChangeData(TypedDict):
    """A change as the tools' data show it (vibe_wait, vibe_list)."""

    edit_id: str | None
    files: list[str]  # the diff summary, one line per file
    left_out: int
    conflicts: list[str]
    error: str | None


@dataclass
class StagedChange:
    """What vibe_wait shows of a worker's change."""

    run: int
    edit: StagedEdit | None = None
    lines: list[str] = field(default_factory=list)  # the diff summary, one line per file
    left_out: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def edit_id(self) -> str | None:
        return self.edit.edit_id if self.edit is not None else None

    def describe(self) -> str:
        if self.error:
            return f"Its change could not be staged: {self.error}"
        if self.edit is None:
            text = "It changed no file of the workspace."
        else:
            n = len(self.edit.files)
            text = (
                f"Its change is staged as {self.edit_id} ({n} file{'s' if n != 1 else ''}), "
                f"nothing is written yet: resolve "
                f'{{"edit_id": "{self.edit_id}", "action": "accept"}} writes it into the '
                'workspace (all or nothing), "discard" drops it.\n' + "\n".join(self.lines)
            )
            if self.conflicts:
                text += (
                    f"\n⚠ {len(self.conflicts)} file(s) changed in the workspace after the "
                    f"worker started ({', '.join(self.conflicts)}): accept will be refused; "
                    "discard it, or vibe_send the worker what changed"
                )
        if self.left_out:
            shown = ", ".join(self.left_out[:LEFT_OUT_SHOWN])
            more = (
                f" and {len(self.left_out) - LEFT_OUT_SHOWN} more"
                if len(self.left_out) > LEFT_OUT_SHOWN
                else ""
            )
            text += f"\nLeft out (under .git, ignored by git, or symlinks): {shown}{more}"
        return text

    def data(self) -> ChangeData:
        return {
            "edit_id": self.edit_id,
            "files": self.lines,
            "left_out": len(self.left_out),
            "conflicts": self.conflicts,
            "error": self.error or None,
        }


def stage(
    state: RunState,
    worker_id: str,
    label: str,
    run: int,
    view: worker_views.View,
    on_end: Callable[[StagedEdit], None],
) -> StagedChange:
    """Read the change of the view and stage it in the run's staging (`state`: run.state)."""
    staged = StagedChange(run)
    try:
        change = worker_views.collect(view)
    except (worker_views.ViewError, OSError) as exc:
        staged.error = str(exc)
        return staged
    staged.left_out = change.left_out
    if not change.files:
        return staged
    workspace = Path(view.workspace)
    files = [
        StagedFile(
            f.rel,
            str(workspace / f.rel),
            CONFLICT if f.conflict else (ABSENT if f.old is None else digest(f.old)),
            f.new,
            1,
            f.mode,
        )
        for f in change.files
    ]
    staged.lines = worker_views.summary_lines(change)
    staged.conflicts = [f.rel for f in change.files if f.conflict]
    staging, lock = run_staging(state)
    with lock:
        edit = staging.stage(f"vibe worker {worker_id} ({label}), run {run}", "", files)
        edit.on_end = on_end
        edit.again = f"Ask the worker again (vibe_send {worker_id})"
    staged.edit = edit
    return staged


def supersede(state: RunState, staged: StagedChange | None) -> None:
    """A new run of the worker replaces the change staged from its last run."""
    if staged is None or staged.edit is None:
        return
    _staging, lock = run_staging(state)
    with lock:
        if staged.edit.status == "staged":
            staged.edit.status = "superseded by the worker's next run"
