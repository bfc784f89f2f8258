"""What the model reads from a debug op's answer: short text, one fact per line.

Each `render_*` takes the reply the DebugSessionActor answered, as the host read it back
(`tether.messages.debug_ops`), and the workspace, and returns text. Paths are shown
workspace-relative.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tether.debug.adapters import AdapterReport
from tether.messages.debug_ops import (
    BreakpointRow,
    ExceptionReport,
    Exited,
    FeatureReport,
    Frame,
    FunctionRow,
    Outcome,
    Running,
    Started,
    StatusReply,
    Stopped,
    Variable,
)


def rel(path: str, workspace: Path) -> str:
    if not path:
        return "?"
    try:
        return (
            os.path.relpath(path, workspace)
            if Path(path).is_absolute() and Path(path).is_relative_to(workspace)
            else path
        )
    except ValueError:
        return path


def frame_line(f: Frame, workspace: Path) -> str:
    where = f"{rel(f.file, workspace)}:{f.line}"
    source = f" | {f.source}" if f.source else ""
    return f"  #{f.id} {f.name} at {where}{source}"


def variables_lines(variables: list[Variable], total: int) -> list[str]:
    rows = []
    for v in variables:
        kind = f" ({v.type})" if v.type else ""
        more = f" [reference {v.reference}]" if v.reference else ""
        rows.append(f"  {v.name}{kind} = {v.value}{more}")
    if total > len(rows):
        rows.append(f"  ... {total - len(rows)} more not shown (cap {len(rows)})")
    return rows


def render_outcome(p: Outcome, workspace: Path) -> str:
    """A run-control op's outcome: stopped where and why, exited, or still running."""
    lines: list[str] = []
    if isinstance(p, Stopped):
        frames = p.frames
        top = frames[0] if frames else None
        where = f"{rel(top.file, workspace)}:{top.line}" if top else "?"
        lines.append(f"stopped at {where} ({p.reason}) in thread {p.thread_id}")
        if p.breakpoint:
            lines.append(f"  by the breakpoint at {_rel_spot(p.breakpoint, workspace)}")
        if top and top.source:
            lines.append(f"  {top.line} | {top.source}")
        for f in p.changed_since_launch:
            lines.append(
                f"({rel(f, workspace)} changed since launch: the program runs the code it loaded, "
                "and the lines and text shown are that code; launch again to run the edit)"
            )
        exc = p.exception
        if exc:
            lines.append(f"exception: {exc.type or '?'}: {exc.message}")
        if p.note:
            lines.append(f"({p.note})")
        lines.append(f"top frames ({len(frames)} of {p.total_frames}):")
        lines.extend(frame_line(f, workspace) for f in frames)
        loc = p.locals
        if loc:
            lines.append(f"locals ({loc.scope or 'top frame'}):")
            lines.extend(variables_lines(loc.variables, loc.total) or ["  (none)"])
    elif isinstance(p, Exited):
        lines.append(f"the program exited with code {p.exit_code}")
        tail = p.output_tail
        lines.append("output tail:\n" + tail if tail else "it printed nothing")
    else:
        lines.append(
            f"still running after {p.waited} s (no breakpoint hit, no exit yet); call "
            "pause to stop it where it is, status to look again, or terminate"
        )
    if not isinstance(p, Running) and p.memory:  # it ended (or stopped) at the memory ceiling
        lines.append(f"({p.memory})")
    return "\n".join(lines)


def _rel_spot(spot: str, workspace: Path) -> str:
    path, sep, rest = spot.partition(":")
    return rel(path, workspace) + sep + rest if sep and path.startswith("/") else spot


def _what(condition: str, hit_condition: str, log_message: str = "") -> str:
    """A breakpoint's conditions, as the agent gave them."""
    parts = []
    if condition:
        parts.append(f"if {condition}")
    if hit_condition:
        parts.append(f"hit {hit_condition}")
    if log_message:
        parts.append(f"logs {log_message!r}, no stop")
    return f" ({'; '.join(parts)})" if parts else ""


def _state(b: BreakpointRow | FunctionRow, sent: bool) -> str:
    why = f": {b.message}" if b.message else ""
    match b.state:
        case "lost":
            return f"LOST its anchor, not set{why}; set it again where it belongs"
        case "refused" | "stale":
            return f"NOT set{why}"
        case "spent":
            return f"spent{why}"
    if not sent:
        return "set (verified when a program is launched)"
    if b.verified:
        # (a line breakpoint's: where the adapter put it)
        actual = b.actual_line if isinstance(b, BreakpointRow) else None
        moved = actual and isinstance(b, BreakpointRow) and actual != b.line
        said = f" ({b.message})" if b.message else ""
        return (f"verified, moved to line {actual}" if moved else "verified") + said
    return f"NOT verified{why}"


def render_breakpoints(file: str, rows: list[BreakpointRow], sent: bool) -> str:
    if not rows:
        return f"breakpoints in {file} cleared"
    changed = any(b.changed_since_launch for b in rows)
    head = f"breakpoints in {file}:"
    if changed:
        head = (
            f"breakpoints in {file} (changed since launch: they stay on the code the program "
            "runs; the next launch moves each to where its text is then):"
        )
    out = [head]
    for b in rows:
        moved = b.actual_line and b.actual_line != b.line
        shown = b.actual_line if moved and b.verified else b.line
        src = f" | {b.source}" if b.source else " | (no such line)"
        came = f" (moved from line {b.moved_from}: its text moved)" if b.moved_from else ""
        out.append(
            f"  line {b.line}{came}{_what(b.condition, b.hit_condition, b.log_message)}: {_state(b, sent)}  [{shown}{src}]"
        )
    return "\n".join(out)


def render_functions(rows: list[FunctionRow], sent: bool) -> str:
    if not rows:
        return "function breakpoints cleared"
    out = ["function breakpoints:"]
    for f in rows:
        out.append(f"  {f.name}{_what(f.condition, f.hit_condition)}: {_state(f, sent)}")
    return "\n".join(out)


def render_exceptions(report: ExceptionReport, sent: bool) -> str:
    asked = report.asked
    if asked is None:
        default = ", ".join(report.default) or "none"
        text = f"exceptions: the adapter's default ({default})"
    else:
        text = f"exceptions: stop on {', '.join(asked)}" if asked else "exceptions: stop on none"
    if not sent and asked:
        text += " (mapped to the adapter's filters when a program is launched)"
    return text + "".join(f"\n  {n}" for n in report.notes)


def render_all_breakpoints(p: StatusReply, workspace: Path) -> str:
    sent = p.state in ("running", "stopped")
    parts = [
        render_breakpoints(rel(f, workspace), rows, sent) for f, rows in p.breakpoints.items()
    ] or ["no line breakpoints"]
    if p.functions:
        parts.append(render_functions(p.functions, sent))
    parts.append(render_exceptions(p.exceptions, sent))
    return "\n".join(parts)


def render_launch(p: Started, workspace: Path) -> str:
    text = render_outcome(p.outcome, workspace)
    if p.breakpoints:
        text += "\n" + "\n".join(
            render_breakpoints(rel(f, workspace), rows, True) for f, rows in p.breakpoints.items()
        )
    if p.functions:
        text += "\n" + render_functions(p.functions, True)
    exc = p.exceptions
    if exc.asked is not None or exc.notes:
        text += "\n" + render_exceptions(exc, True)
    restored = p.restored_breakpoints
    if restored:
        spots = [
            f"{rel(f, workspace)}:{','.join(map(str, lines))}"
            for f, lines in restored.files.items()
        ]
        spots += [f"function {n}" for n in restored.functions]
        if restored.exceptions is not None:
            spots.append(f"exceptions {restored.exceptions}")
        where = ", ".join(spots)
        text += (
            f"\n(note: the debug session was restarted since your breakpoints were set "
            f"({restored.why}); they were set again before this start: {where})"
        )
    return text


def render_status(p: StatusReply, workspace: Path) -> str:
    state = p.state
    if state in ("none", "ended"):
        why = p.previous_end or p.end_reason
        head = "no debug session" + (f" (the last one ended: {why})" if why else "")
    else:
        head = f"debug session: {p.adapter} on {rel(p.program, workspace)}, {state}"
    lines = [head]
    if state == "stopped" and p.stopped:
        lines.append(render_outcome(p.stopped, workspace))
    if state == "exited":
        lines.append(f"exit code {p.exit_code}; call output to read what it printed")
    sent = state in ("running", "stopped")
    for f, rows in p.breakpoints.items():
        lines.append(render_breakpoints(rel(f, workspace), rows, sent))
    if p.functions:
        lines.append(render_functions(p.functions, sent))
    if p.exceptions.asked is not None:
        lines.append(render_exceptions(p.exceptions, sent))
    if p.ttl:
        lines.append(f"session TTL {p.ttl:g} s, up {p.uptime} s")
    return "\n".join(lines)


def render_adapters(rows: Sequence[AdapterReport]) -> str:
    out = []
    for r in rows:
        if r["usable"]:
            out.append(f"{r['adapter']}: usable ({r['binary']}; marker {r['marker']})")
        else:
            out.append(f"{r['adapter']}: not usable here: {r['why_not']}")
        if r["breakpoints"]:
            out.append("  breakpoints: " + _features_line(r["breakpoints"]))
    return "\n".join(out)


def _features_line(f: FeatureReport) -> str:
    """What an adapter does with breakpoints, and where that is known from."""
    hits = ", ".join(repr(h) for h in f["hit_condition"]) or "none"
    shown = [f"{k} ({v or 'always on'})" for k, v in f["exceptions"].items()]

    def yes(known: bool) -> str:
        return "yes" if known else "no"

    source = "capabilities in this run" if f["source"] == "capabilities" else "table row"
    return (
        f"condition {yes(f['condition'])}, hit_condition {hits}, "
        f"log_message {yes(f['log_message'])}, functions {yes(f['function'])}, "
        f"exceptions {', '.join(shown) or 'none'} (from its {source})"
    )
