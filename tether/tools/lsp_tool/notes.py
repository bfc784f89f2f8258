"""The one rendering of a language server reply's `notes` (a cold start after an eviction,
a restart after the server hit its memory ceiling) in an lsp-backed result.

A note is said once, on the first reply after the event, whichever action that was: so
every result built from replies (navigation, hierarchy, status, reload, a write's folded
diagnostics) passes them through `noted`, or the note is consumed unseen. A reply that
reaches no model (a progress probe's status, `tether.serve.progress`) hands its notes to
`carry`: the run's next lsp-backed result tells them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Final, TypedDict

from tether.messages.language_server_ops import LanguageServerReply
from tether.tools.lsp_tool.ledger import Ledger
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

FAMILY: Final = "lsp"  # the run state's key of the lsp family (as tether.tools.lsp_tool.on_write's)


class LspState(TypedDict, total=False):
    """The family's per-run state, `ctx.state["lsp"]` (tether.serve.run_state reads it)."""

    ledger: Ledger  # (tether.tools.lsp_tool.on_write folds each write's diagnostics in)
    lock: threading.Lock  # held while the ledger is read or folded
    carried: list[str]  # notes heard where no model reads them, for the next lsp result


def carry(ctx: ToolContext, notes: Iterable[str]) -> None:
    """Keep `notes`, heard where no model reads them, for the run's next lsp result."""
    got = list(notes)
    if got:
        ctx.state.setdefault(FAMILY, LspState()).setdefault("carried", []).extend(got)


def noted(ctx: ToolContext, result: ToolResult, *replies: LanguageServerReply) -> ToolResult:
    """`result` with its replies' notes (and those carried for the run, when it heard a
    server at all) told to the model after the answer, as eval's are (`[note] ...` lines),
    and in `data["notes"]` (added to any there already)."""
    notes = [n for reply in replies for n in reply.notes]
    carried = ctx.state.get(FAMILY, {}).get("carried") if replies else None
    if carried:
        held = carried[:]
        del carried[: len(held)]  # (a probe may add more meanwhile: those stay for the next)
        notes = [*held, *notes]
    if not notes:
        return result
    text = "\n".join([result.text, *(f"[note] {n}" for n in notes)])
    data = result.data
    if isinstance(data, dict):
        data = {**data, "notes": [*data.get("notes", []), *notes]}
    return replace(result, text=text, data=data)
