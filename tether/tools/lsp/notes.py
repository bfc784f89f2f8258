"""The one rendering of a language server reply's `notes` (a cold start after an eviction,
a restart after the server hit its memory ceiling) in an lsp-backed result.

A note is said once, on the first reply after the event, whichever action that was: so
every result built from replies (navigation, hierarchy, status, reload, a write's folded
diagnostics) passes them through `noted`, or the note is consumed unseen.
"""

from __future__ import annotations

from dataclasses import replace

from tether.messages.language_server_ops import LanguageServerReply
from tether.tools.results import ToolResult


def noted(result: ToolResult, *replies: LanguageServerReply) -> ToolResult:
    """`result` with its replies' notes told to the model after the answer, as eval's are
    (`[note] ...` lines), and in `data["notes"]` (added to any there already)."""
    notes = [n for reply in replies for n in reply.notes]
    if not notes:
        return result
    text = "\n".join([result.text, *(f"[note] {n}" for n in notes)])
    data = result.data
    if isinstance(data, dict):
        data = {**data, "notes": [*data.get("notes", []), *notes]}
    return replace(result, text=text, data=data)
