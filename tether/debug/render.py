"""What the model reads from a debug op's answer: short text, one fact per line.

Each `render_*` takes the payload the DebugSessionActor answered (plain dicts, see
`tether.debug.session`) and the workspace, and returns text. Paths are shown
workspace-relative.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


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


def frame_line(f: Mapping[str, Any], workspace: Path) -> str:
    where = f"{rel(str(f.get('file', '')), workspace)}:{f.get('line', '?')}"
    source = f" | {f['source']}" if f.get("source") else ""
    return f"  #{f.get('id')} {f.get('name', '')} at {where}{source}"


def variables_lines(block: Mapping[str, Any]) -> list[str]:
    rows = []
    for v in block.get("variables", []):
        kind = f" ({v['type']})" if v.get("type") else ""
        more = f" [reference {v['reference']}]" if v.get("reference") else ""
        rows.append(f"  {v.get('name')}{kind} = {v.get('value')}{more}")
    total = int(block.get("total", len(rows)))
    if total > len(rows):
        rows.append(f"  ... {total - len(rows)} more not shown (cap {len(rows)})")
    return rows


def render_outcome(p: Mapping[str, Any], workspace: Path) -> str:
    """A run-control op's outcome: stopped where and why, exited, or still running."""
    outcome = p.get("outcome")
    lines: list[str] = []
    if outcome == "stopped":
        frames = p.get("frames") or []
        top = frames[0] if frames else {}
        where = f"{rel(str(top.get('file', '')), workspace)}:{top.get('line', '?')}" if top else "?"
        reason = p.get("reason", "")
        lines.append(f"stopped at {where} ({reason}) in thread {p.get('thread_id')}")
        if p.get("breakpoint"):
            lines.append(f"  by the breakpoint at {_rel_spot(str(p['breakpoint']), workspace)}")
        if top.get("source"):
            lines.append(f"  {top.get('line')} | {top['source']}")
        for f in p.get("changed_since_launch") or []:
            lines.append(
                f"({rel(f, workspace)} changed since launch: the program runs the code it loaded, "
                "and the lines and text shown are that code; launch again to run the edit)"
            )
        exc = p.get("exception")
        if exc:
            lines.append(f"exception: {exc.get('type') or '?'}: {exc.get('message', '')}")
        if p.get("note"):
            lines.append(f"({p['note']})")
        lines.append(f"top frames ({len(frames)} of {p.get('total_frames', len(frames))}):")
        lines.extend(frame_line(f, workspace) for f in frames)
        loc = p.get("locals")
        if loc:
            lines.append(f"locals ({loc.get('scope') or 'top frame'}):")
            lines.extend(variables_lines(loc) or ["  (none)"])
    elif outcome == "exited":
        lines.append(f"the program exited with code {p.get('exit_code')}")
        tail = str(p.get("output_tail") or "")
        lines.append("output tail:\n" + tail if tail else "it printed nothing")
    elif outcome == "running":
        lines.append(
            f"still running after {p.get('waited')} s (no breakpoint hit, no exit yet); call "
            "pause to stop it where it is, status to look again, or terminate"
        )
    else:
        lines.append(str(dict(p)))
    if p.get("memory"):  # it ended (or stopped) at the session's memory ceiling
        lines.append(f"({p['memory']})")
    return "\n".join(lines)


def _rel_spot(spot: str, workspace: Path) -> str:
    path, sep, rest = spot.partition(":")
    return rel(path, workspace) + sep + rest if sep and path.startswith("/") else spot


def _what(b: Mapping[str, Any]) -> str:
    """A breakpoint's conditions, as the agent gave them."""
    parts = []
    if b.get("condition"):
        parts.append(f"if {b['condition']}")
    if b.get("hit_condition"):
        parts.append(f"hit {b['hit_condition']}")
    if b.get("log_message"):
        parts.append(f"logs {b['log_message']!r}, no stop")
    return f" ({'; '.join(parts)})" if parts else ""


def _state(b: Mapping[str, Any], sent: bool) -> str:
    why = f": {b['message']}" if b.get("message") else ""
    match b.get("state"):
        case "lost":
            return f"LOST its anchor, not set{why}; set it again where it belongs"
        case "refused" | "stale":
            return f"NOT set{why}"
        case "spent":
            return f"spent{why}"
    if not sent:
        return "set (verified when a program is launched)"
    if b.get("verified"):
        moved = b.get("actual_line") and b.get("actual_line") != b.get("line")
        said = f" ({b['message']})" if b.get("message") else ""
        return (f"verified, moved to line {b['actual_line']}" if moved else "verified") + said
    return f"NOT verified{why}"


def render_breakpoints(file: str, rows: list[Mapping[str, Any]], sent: bool) -> str:
    if not rows:
        return f"breakpoints in {file} cleared"
    changed = any(b.get("changed_since_launch") for b in rows)
    head = f"breakpoints in {file}:"
    if changed:
        head = (
            f"breakpoints in {file} (changed since launch: they stay on the code the program "
            "runs; the next launch moves each to where its text is then):"
        )
    out = [head]
    for b in rows:
        moved = b.get("actual_line") and b.get("actual_line") != b.get("line")
        shown = b.get("actual_line") if moved and b.get("verified") else b.get("line")
        src = f" | {b['source']}" if b.get("source") else " | (no such line)"
        came = (
            f" (moved from line {b['moved_from']}: its text moved)" if b.get("moved_from") else ""
        )
        out.append(f"  line {b.get('line')}{came}{_what(b)}: {_state(b, sent)}  [{shown}{src}]")
    return "\n".join(out)


def render_functions(rows: list[Mapping[str, Any]], sent: bool) -> str:
    if not rows:
        return "function breakpoints cleared"
    out = ["function breakpoints:"]
    for f in rows:
        out.append(f"  {f.get('name')}{_what(f)}: {_state(f, sent)}")
    return "\n".join(out)


def render_exceptions(report: Mapping[str, Any], sent: bool) -> str:
    asked = report.get("asked")
    if asked is None:
        default = ", ".join(report.get("default") or []) or "none"
        text = f"exceptions: the adapter's default ({default})"
    else:
        text = f"exceptions: stop on {', '.join(asked)}" if asked else "exceptions: stop on none"
    if not sent and asked:
        text += " (mapped to the adapter's filters when a program is launched)"
    notes = report.get("notes") or []
    return text + "".join(f"\n  {n}" for n in notes)


def render_all_breakpoints(p: Mapping[str, Any], workspace: Path) -> str:
    sent = p.get("state") in ("running", "stopped")
    parts = [
        render_breakpoints(rel(f, workspace), rows, sent)
        for f, rows in (p.get("breakpoints") or {}).items()
    ] or ["no line breakpoints"]
    if p.get("functions"):
        parts.append(render_functions(p["functions"], sent))
    parts.append(render_exceptions(p.get("exceptions") or {}, sent))
    return "\n".join(parts)


def render_launch(p: Mapping[str, Any], workspace: Path) -> str:
    text = render_outcome(p, workspace)
    bps = p.get("breakpoints") or {}
    if bps:
        text += "\n" + "\n".join(
            render_breakpoints(rel(f, workspace), rows, True) for f, rows in bps.items()
        )
    if p.get("functions"):
        text += "\n" + render_functions(p["functions"], True)
    exc = p.get("exceptions") or {}
    if exc.get("asked") is not None or exc.get("notes"):
        text += "\n" + render_exceptions(exc, True)
    restored = p.get("restored_breakpoints")
    if restored:
        spots = [
            f"{rel(f, workspace)}:{','.join(map(str, lines))}"
            for f, lines in (restored.get("files") or {}).items()
        ]
        spots += [f"function {n}" for n in restored.get("functions") or []]
        if restored.get("exceptions") is not None:
            spots.append(f"exceptions {restored['exceptions']}")
        where = ", ".join(spots)
        text += (
            f"\n(note: the debug session was restarted since your breakpoints were set "
            f"({restored['why']}); they were set again before this start: {where})"
        )
    return text


def render_status(p: Mapping[str, Any], workspace: Path) -> str:
    state = p.get("state")
    if state in ("none", "ended"):
        why = p.get("previous_end") or p.get("end_reason")
        head = "no debug session" + (f" (the last one ended: {why})" if why else "")
    else:
        head = f"debug session: {p.get('adapter')} on {rel(str(p.get('program', '')), workspace)}, {state}"
    lines = [head]
    if state == "stopped" and p.get("stopped"):
        lines.append(render_outcome(p["stopped"], workspace))
    if state == "exited":
        lines.append(f"exit code {p.get('exit_code')}; call output to read what it printed")
    sent = state in ("running", "stopped")
    for f, rows in (p.get("breakpoints") or {}).items():
        lines.append(render_breakpoints(rel(f, workspace), rows, sent))
    if p.get("functions"):
        lines.append(render_functions(p["functions"], sent))
    exc = p.get("exceptions") or {}
    if exc.get("asked") is not None:
        lines.append(render_exceptions(exc, sent))
    if p.get("ttl"):
        lines.append(f"session TTL {p['ttl']:g} s, up {p.get('uptime')} s")
    return "\n".join(lines)


def render_adapters(rows: Sequence[Mapping[str, Any]]) -> str:
    out = []
    for r in rows:
        if r["usable"]:
            out.append(f"{r['adapter']}: usable ({r['binary']}; marker {r['marker']})")
        else:
            out.append(f"{r['adapter']}: not usable here: {r['why_not']}")
        if r.get("breakpoints"):
            out.append("  breakpoints: " + _features_line(r["breakpoints"]))
    return "\n".join(out)


def _features_line(f: Mapping[str, Any]) -> str:
    """What an adapter does with breakpoints, and where that is known from."""
    hits = ", ".join(repr(h) for h in f.get("hit_condition") or []) or "none"
    exc = f.get("exceptions") or {}
    shown = [f"{k} ({v or 'always on'})" for k, v in exc.items()]
    yes = lambda k: "yes" if f.get(k) else "no"  # noqa: E731
    return (
        f"condition {yes('condition')}, hit_condition {hits}, log_message {yes('log_message')}, "
        f"functions {yes('function')}, exceptions {', '.join(shown) or 'none'} "
        f"(from its {'capabilities in this run' if f.get('source') == 'capabilities' else 'table row'})"
    )
