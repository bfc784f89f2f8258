"""What a resumed conversation is told: what was kept across the server's restart, and
what is gone with the old server's processes.

`tether.serve.run_state.restore` puts the kept state back and says what came back
(`Restored`); this turns that into the note on the conversation's next result and one
note per tool whose resource did not survive, each said once (`conversations` keeps them
until then). A state file that was refused gets `refused_note` instead.
"""

from __future__ import annotations

from tether.serve.run_state import Restored

GONE = "interpreter variables, a debug session, running workers"
VIBE_TOOLS = ("vibe_spawn", "vibe_send", "vibe_wait", "vibe_kill", "vibe_list")


def resumed_notes(restored: Restored | None) -> tuple[str, dict[str, str]]:
    """The note for the conversation's next result, and one per tool for the next result
    of a tool whose resource did not survive (said once each)."""
    kept = ["its handle", "working directory"]
    per_tool: dict[str, str] = {}
    approvals = ""
    if restored is not None:
        if restored.edits:
            n = len(restored.edits)
            kept.append(
                f"{n} staged edit{'s' if n != 1 else ''} ({', '.join(restored.edits)}: resolve "
                "takes them as before, and refuses one whose files changed since)"
            )
        if restored.breakpoints:
            kept.append(f"{restored.breakpoints} breakpoint(s), set at the next launch")
        if restored.ledger_files:
            kept.append("the diagnostics ledger (what you were told is not new again)")
        kept.append("its card numbering")
        if restored.approved:
            cards = ", ".join(f"#{n}" for n in restored.approved)
            approvals = (
                f"; the approvals given before (cards {cards}) allowed those calls only: a new "
                "call asks again"
            )
        per_tool = {**restored.unsaid, **_gone_notes(restored)}
    general = (
        f"(this conversation was resumed by a restarted server: kept are {', '.join(kept)}; "
        f"gone is what lived in the old server's processes - {GONE} - and the next call that "
        f"needs one says so{approvals})"
    )
    return general, per_tool


def refused_note(why: str) -> str:
    return (
        f"(this conversation was resumed by a restarted server, but the state kept for it was "
        f"refused: {why}. Its staged edits, breakpoints and diagnostics ledger did not come "
        f"back - stage edits and set breakpoints again - and what lived in the old server's "
        f"processes is gone too: {GONE})"
    )


def _gone_notes(restored: Restored) -> dict[str, str]:
    held = restored.held
    notes: dict[str, str] = {}
    if held["kernels"]:
        notes["eval"] = (
            f"(the interpreter this conversation had before the server restarted "
            f"({', '.join(held['kernels'])}) is gone: its variables, imports and loaded data "
            "are lost; this cell ran in a new one, so rerun what it relies on)"
        )
    if held["debugged"]:
        kept = (
            f"; its {restored.breakpoints} breakpoint(s) are kept and set at the next launch"
            if restored.breakpoints
            else ""
        )
        notes["debug"] = (
            f"(the debug session this conversation had ended with the old server: launch the "
            f"program again{kept})"
        )
    if held["workers"]:
        gone = (
            f"(worker(s) {', '.join(held['workers'])} were running in the old server and are "
            "gone with it: spawn them again)"
        )
        notes.update({tool: gone for tool in VIBE_TOOLS})
    return notes
