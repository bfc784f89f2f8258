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
        if top.get("source"):
            lines.append(f"  {top.get('line')} | {top['source']}")
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
    return "\n".join(lines)


def render_breakpoints(file: str, rows: list[Mapping[str, Any]], sent: bool) -> str:
    if not rows:
        return f"breakpoints in {file} cleared"
    out = [f"breakpoints in {file}:"]
    for b in rows:
        moved = b.get("actual_line") and b.get("actual_line") != b.get("line")
        if not sent:
            state = "set (verified when a program is launched)"
        elif b.get("verified"):
            state = f"verified, moved to line {b['actual_line']}" if moved else "verified"
        else:
            why = f": {b['message']}" if b.get("message") else ""
            state = f"NOT verified{why}"
        shown = b.get("actual_line") if moved else b.get("line")
        src = f" | {b['source']}" if b.get("source") else " | (no such line)"
        out.append(f"  line {b.get('line')}: {state}  [{shown}{src}]")
    return "\n".join(out)


def render_launch(p: Mapping[str, Any], workspace: Path) -> str:
    text = render_outcome(p, workspace)
    bps = p.get("breakpoints") or {}
    if bps:
        text += "\n" + "\n".join(
            render_breakpoints(rel(f, workspace), rows, True) for f, rows in bps.items()
        )
    restored = p.get("restored_breakpoints")
    if restored:
        where = ", ".join(
            f"{rel(f, workspace)}:{','.join(map(str, lines))}"
            for f, lines in restored["files"].items()
        )
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
    for f, rows in (p.get("breakpoints") or {}).items():
        lines.append(render_breakpoints(rel(f, workspace), rows, state in ("running", "stopped")))
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
    return "\n".join(out)
