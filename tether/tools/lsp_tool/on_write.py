"""Diagnostics on write: the wrappers around write / edit / apply_patch / resolve.

Before a file's first wrapped write its existing diagnostics are recorded (the baseline);
after the write the written files are synced + saved through their servers and only NEW
diagnostics are folded into the tool's result, judged by the run's ledger
(`ctx.state["lsp"]`): key (severity, code, message), position excluded, counted per file,
forgotten when gone. A file not checked within the cap is reported "pending".
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Final

from tether.json_types import JSONObject, JSONValue
from tether.lsp.limits import size_text
from tether.lsp.servers import Resolution, rows_for
from tether.messages.calls import ErrorCode, ResourceError
from tether.messages.language_server_ops import (
    DiagnosticRecord,
    Diagnostics,
    DiagnosticsReply,
    Sync,
)
from tether.tools.lsp_tool import render
from tether.tools.lsp_tool.ledger import Ledger
from tether.tools.lsp_tool.model_records import Lines, ModelDiagnostic, relative, severe
from tether.tools.lsp_tool.notes import LspState, noted
from tether.tools.lsp_tool.targets import ask, limits, resolve_cached
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

FAMILY: Final = "lsp"
WRITE_CAP = 2.5  # s: hard cap on waiting for fresh diagnostics after a write


def _state(ctx: ToolContext) -> LspState:
    st = ctx.state.setdefault(FAMILY, LspState())
    st.setdefault("ledger", Ledger())
    st.setdefault("lock", threading.Lock())
    return st


def _patch_targets(patch: str) -> list[str]:
    try:
        from tether.tools.unidiff import parse_patch

        return [fp.target for fp in parse_patch(patch) if getattr(fp, "target", None)]
    except Exception:  # noqa: BLE001 - a baseline is best effort; the write reports its own errors
        return []


def _candidates(tool: str, args: Mapping[str, JSONValue]) -> list[str]:
    path, patch = args.get("path"), args.get("patch")
    if tool in ("write", "edit") and isinstance(path, str):
        return [path]
    if tool == "apply_patch" and isinstance(patch, str):
        return _patch_targets(patch)
    return []


def _staged_targets(ctx: ToolContext, args: Mapping[str, JSONValue]) -> list[str]:
    """The files a `resolve accept` will write (the structural family's staged edit)."""
    if args.get("action") != "accept":
        return []
    try:
        staging, edit_id = ctx.state.get("structural", {}).get("staging"), args.get("edit_id")
        if staging is None or not isinstance(edit_id, str):  # (edit ids are strings)
            return []
        edit = staging.edits.get(edit_id)
        return [f.rel for f in edit.files] if edit is not None else []
    except Exception:  # noqa: BLE001 - a baseline is best effort
        return []


def _group(
    ctx: ToolContext, rels: list[str], skipped: list[str] | None = None
) -> dict[str, tuple[Resolution, list[Path]]]:
    """The files by the server that answers for them; a file over the size limit is left
    out (and named in `skipped`): giving it to the server would stall it for everyone."""
    groups: dict[str, tuple[Resolution, list[Path]]] = {}
    limit = limits(ctx).max_file_bytes
    for rel in rels:
        try:
            path = ctx.resolve_path(rel)
        except Exception:  # noqa: BLE001 - not ours to judge here
            continue
        size = path.stat().st_size if path.is_file() else 0  # a deleted file is synced too
        if size > limit and rows_for(path):
            if skipped is not None:
                skipped.append(f"{rel} ({size_text(size)})")
            continue
        for row in rows_for(path):
            r = resolve_cached(row, path, ctx.workdir)
            if r.usable:
                groups.setdefault(r.key, (r, []))[1].append(path)
                break
    return groups


def _baseline(ctx: ToolContext, rels: list[str], heard: list[DiagnosticsReply]) -> set[str]:
    """Before a file's first wrapped write: record what it already had, reporting nothing
    (but its replies go to `heard`: a baseline can be a server's first answer, whose notes
    the write's result must carry). Returns the files whose server had not checked them
    within the cap, or said nothing of them: what they had before the write is not known."""
    unknown: set[str] = set()
    st = _state(ctx)
    ledger = st["ledger"]
    fresh = [r for r in rels if not ledger.known(r) and (ctx.workdir / r).is_file()]
    for key, (_res, paths) in _group(ctx, fresh).items():
        for p in paths:
            try:
                op = Diagnostics(str(p), WRITE_CAP)
                found = ask(ctx, key, op, DiagnosticsReply, WRITE_CAP + 20.0)
            except ResourceError:
                continue
            heard.append(found)
            if found.pending:
                unknown.add(relative(ctx, p))
                continue
            raw = next(iter(found.files.values()), None)
            if raw is None:  # (the server has said nothing of it yet: not known either)
                unknown.add(relative(ctx, p))
                continue
            with st["lock"]:
                ledger.baseline(relative(ctx, p), severe(raw))
    return unknown


def _diagnose_written(
    ctx: ToolContext,
    written: list[str],
    created: Sequence[str] = (),
    heard: list[DiagnosticsReply] | None = None,
    unknown: Collection[str] = (),
) -> tuple[list[ModelDiagnostic], list[str], list[str], str]:
    """Sync + save the written files through their servers; (new diagnostics, pending,
    baselined, note). The servers' replies are added to `heard` (for their notes).
    `unknown`: files whose diagnostics before the write were not known (`_baseline`'s
    answer): what they have now becomes their baseline (`baselined`), and the note says
    none of it is reported as new."""
    st = _state(ctx)
    ledger = st["ledger"]
    found: list[DiagnosticRecord] = []  # new ones, as the servers gave them
    pending: list[str] = []
    baselined: list[str] = []
    notes: list[str] = []
    lines = Lines(ctx)
    skipped: list[str] = []
    groups = _group(ctx, written, skipped)
    if skipped:
        notes.append(
            f"no diagnostics for {', '.join(skipped)}: over the "
            f"{size_text(limits(ctx).max_file_bytes)} limit for files given to a language server"
        )
    for key, (res, paths) in groups.items():
        try:
            synced = ask(
                ctx,
                key,
                Sync(
                    paths=[str(p) for p in paths],
                    created=[str(p) for p in paths if relative(ctx, p) in created],
                    cap=WRITE_CAP,
                ),
                DiagnosticsReply,
                WRITE_CAP + res.row.startup_timeout + 2.0,
            )
        except ResourceError as e:
            if e.code == ErrorCode.DEADLINE:
                pending += [relative(ctx, p) for p in paths]
            else:
                notes.append(f"diagnostics unavailable ({res.row.name}): {e.message}")
            continue
        if heard is not None:
            heard.append(synced)
        pending += [relative(ctx, p) for p in synced.pending]
        with st["lock"]:
            for p in synced.deleted:
                ledger.forget(relative(ctx, p))
            for p, raw in synced.files.items():
                rel, now = relative(ctx, p), severe(raw or [])
                if rel not in unknown or ledger.known(rel):
                    found += ledger.fold(rel, now)
                    continue
                ledger.baseline(rel, now)
                if now:
                    baselined.append(rel)
                    notes.append(
                        f"{rel}: its diagnostics before this write were not ready in "
                        f"time, so none of the {len(now)} it has now is reported as new"
                    )
            for p, before, now in synced.changed():
                rel = relative(ctx, p)
                if os.path.isabs(rel):
                    continue  # outside the workspace: not the agent's to fix
                after = severe(now)
                if not ledger.known(rel):
                    if before is None:  # never seen before this write: no way to say "new"
                        ledger.baseline(rel, after)
                        continue
                    ledger.baseline(rel, severe(before))
                found += ledger.fold(rel, after)
    new: list[ModelDiagnostic] = []
    for d in found:
        d["path"] = relative(ctx, d["path"]) if os.path.isabs(d["path"]) else d["path"]
        new.append({**d, "text": lines(d["path"], int(d["line"]))})
    order = {rel: i for i, rel in enumerate(written)}
    new.sort(key=lambda d: (order.get(d["path"], len(order)), d["path"], d["line"]))
    return new, pending, baselined, "; ".join(notes)


# a write tool's wrapper (tether.tools.families.Wrapper): the call's context and arguments,
# and the write itself to run
Wrap = Callable[[ToolContext, JSONObject, Callable[[], ToolResult]], ToolResult]


def _wrapper(tool: str) -> Wrap:
    def wrap(ctx: ToolContext, args: JSONObject, run: Callable[[], ToolResult]) -> ToolResult:
        cands = _candidates(tool, args) or (_staged_targets(ctx, args) if tool == "resolve" else [])
        heard: list[DiagnosticsReply] = []  # every server reply: their notes end the result
        unknown = _baseline(ctx, cands, heard) if cands else set()
        res = run()
        if res.is_error or not isinstance(res.data, dict):
            return noted(ctx, res, *heard)
        written = [w for w in res.data.get("written") or [] if isinstance(w, str)]
        if not written:
            return noted(ctx, res, *heard)
        made = res.data.get("created")
        created = written if made is True else [c for c in made or [] if isinstance(c, str)]
        new, pending, baselined, note = _diagnose_written(ctx, written, created, heard, unknown)
        if not new and not pending and not note:
            return noted(ctx, res, *heard)
        block = render.folded(new, pending)
        if note:
            block = (block + "\n" if block else "") + f"({note})"
        data = dict(res.data)
        data["diagnostics"] = {"new": new[: render.CAPS["folded"]], "total_new": len(new),
                               "pending": pending, "baselined": baselined}  # fmt: skip
        folded = ToolResult(
            text=f"{res.text}\n\n{block}", is_error=False, data=data, images=res.images
        )
        return noted(ctx, folded, *heard)

    wrap.__name__ = f"lsp_diagnostics_on_{tool}"
    return wrap


def wrappers() -> dict[str, Wrap]:
    return {t: _wrapper(t) for t in ("write", "edit", "apply_patch", "resolve")}
