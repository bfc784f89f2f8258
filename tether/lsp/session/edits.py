"""Workspace edits: a rename's, and the server's own (`workspace/applyEdit`).

An edit is applied all or nothing, confined to directories (DESIGN.md invariant 5), and
every file it touched is re-synced. Each applied edit bumps `epoch`, and `edited_at`
remembers the epoch that last changed a path: a rename computed before a server edit
landed in one of its files is stale (`stale`).

A server-initiated edit is applied only while a call a run made at write tier is served
(a `Rename` with `write_tier`, sent by lsp_rename alone), and only inside the server's
root and that call's workspace: the actor is shared by every run on its root. Otherwise
it is refused whole and the server told why (`applied: false`).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from tether.json_types import JSONObject, JSONValue
from tether.lsp import workspace_edit
from tether.lsp.jsonrpc import Capabilities
from tether.lsp.session.readiness import Readiness
from tether.lsp.session.table import OpTable
from tether.lsp.session.texts import Texts
from tether.messages.language_server_ops import Rename


def inside_both(a: list[Path], b: list[Path]) -> list[Path]:
    """The directories inside some directory of `a` and some of `b` (of two nested trees,
    the deeper one), symlinks and `..` resolved."""
    out = []
    for x in (Path(os.path.realpath(d)) for d in a):
        for y in (Path(os.path.realpath(d)) for d in b):
            if x == y or y in x.parents:
                out.append(x)
            elif x in y.parents:
                out.append(y)
    return out


class Edits:
    def __init__(
        self,
        root: Path,
        caps: Capabilities,
        texts: Texts,
        table: OpTable,
        readiness: Readiness,
        messages: deque[str],
    ) -> None:
        self.root, self.caps, self.texts = root, caps, texts
        self.table, self.readiness = table, readiness
        self.messages = messages  # the session's notes for status (refusals go there)
        self.epoch = 0  # WorkspaceEdits this session wrote
        self.edited_at: dict[Path, int] = {}  # path -> the epoch that last wrote it

    def apply(self, edit: JSONObject, confine: list[str] | None = None) -> workspace_edit.Plan:
        """Apply a WorkspaceEdit all or nothing and re-sync every touched file.

        `confine`: directories every touched path must be inside (the run's workspace;
        the server's root when None); an edit reaching outside, after resolving symlinks and
        `..`, is refused whole.
        """
        return self._apply_within(edit, [Path(c) for c in confine] if confine else [self.root])

    def stale(self, paths: Iterable[Path], since: int) -> list[str]:
        """The paths an edit after epoch `since` changed."""
        return sorted(str(p) for p in paths if self.edited_at.get(p, since) > since)

    def _apply_within(self, edit: JSONObject, within: list[Path]) -> workspace_edit.Plan:
        def version_of(p: Path) -> int | None:
            d = self.texts.docs.get(p)
            return d.version if d else None

        workspace_edit.confine(edit, within)
        plan = workspace_edit.plan(edit, self.caps.position_encoding, version_of)
        workspace_edit.commit(plan, within)
        self.epoch += 1
        for p in plan.final:
            self.edited_at[p] = self.epoch
        touched = [p for p in plan.touched if p in plan.final]
        self.texts.changed(touched, set(plan.created) | {b for _, b in plan.renamed})
        return plan

    def from_server(self, edit: JSONValue) -> tuple[bool, str]:
        """A server-initiated `workspace/applyEdit`: (applied, why not)."""
        writers = [
            (o, o.request)
            for o in self.table.ops.values()
            if isinstance(o.request, Rename)
            and o.request.write_tier
            and not self.readiness.waiting(o)
        ]
        if not writers:
            return self._refused(
                "tether applies a server's edits only during a write-tier call of a run "
                "(lsp_rename), and none is in progress; nothing was written",
            )
        within = [Path(os.path.realpath(self.root))]
        for _, rename in writers:
            within = inside_both(within, [Path(c) for c in rename.confine] or [self.root])
        if not within:
            return self._refused(
                f"the workspace of the write-tier call is outside {self.root}; nothing was written"
            )
        if not isinstance(edit, dict):
            return self._refused(f"the edit is not a WorkspaceEdit object: {edit!r:.80}")
        try:
            plan = self._apply_within(edit, within)
        except workspace_edit.EditError as e:
            return self._refused(f"{e}; nothing was written")
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            return self._refused(f"malformed WorkspaceEdit ({type(e).__name__}: {e})")
        for o, _ in writers:  # their answers say what the server changed on their watch
            o.server_edits += [str(p) for p in plan.final]
        return True, ""

    def _refused(self, why: str) -> tuple[bool, str]:
        self.messages.append(f"refused a workspace/applyEdit from the server: {why}"[:300])
        return False, why
