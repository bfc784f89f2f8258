"""The invariants of DESIGN.md as pure checks, each on what one call or one file showed.

1. every call answered within its deadline (`late`), with no other call's reply
   (`foreign_tags`: every reply is checked for tags that belong to another call);
2. no partial write (`file_state`, `generations`: a scratch file is exactly one rendering,
   the version a successful write promised; a multi-file change landed in all or none);
3. no orphan process (checked by the harness after shutdown, `Runtime.left_behind`);
4. no tier violation (`tier_breach`: a read-only surface sees no write/exec tool, and a
   write/exec call from it is refused and changes nothing);
5. nothing written outside the working directory (`escaped`).

Each check returns the problem in words, or "" when there is none; the harness turns a
problem into a `Violation`. Keeping them pure is what lets the tests feed them a broken
input and see them fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tether.chaos.scratch import Parsed, parse
from tether.json_types import JSONValue

DEADLINE = "deadline"
CROSS_WIRED = "cross-wired reply"
PARTIAL_WRITE = "partial write"
ORPHAN = "orphan process"
TIER = "tier violation"
HUNG = "unanswered call"
WRONG = "wrong reply"  # answered, but not what the files say (e.g. a stale search)
CONFINEMENT = "write outside the workdir"
HARNESS = "harness error"  # a check that could not be made (counts: the run proves less)
INVARIANTS = (
    DEADLINE, HUNG, CROSS_WIRED, WRONG, PARTIAL_WRITE, ORPHAN, TIER, CONFINEMENT, HARNESS
)  # fmt: skip

# every tag a reply may carry: a scratch file's version tag, its tag function, a
# per-call token (eval cells, vibe briefs)
TAGS = re.compile(r"\b(?:c\d+|ro|plan)-\d+-v\d+\b|\btag_(?:c\d+|ro|plan)_\d+\b|\btok_\w+\b")


@dataclass(frozen=True)
class Violation:
    invariant: str
    run: str
    tool: str
    at: float  # s since the chaos run began
    detail: str

    def line(self) -> str:
        return f"[{self.invariant}] t={self.at:.1f}s {self.run} {self.tool}: {self.detail}"


def late(took: float, deadline: float, slack: float) -> str:
    if took <= deadline + slack:
        return ""
    return f"answered after {took:.1f} s; its deadline is {deadline:g} s (+{slack:g} s slack)"


def foreign_tags(text: str, mine: Iterable[str]) -> str:
    """Tags in a reply that belong to another call (another conversation's file, another
    version than the one expected, another call's token)."""
    allowed = set(mine)
    found = {m.group(0) for m in TAGS.finditer(text)}
    foreign = sorted(found - allowed)
    if not foreign:
        return ""
    return f"the reply carries {', '.join(foreign[:5])}, which belong(s) to another call"


def missing_tag(text: str, expected: str) -> str:
    return "" if expected in text else f"the reply does not name {expected!r}: {text[:120]!r}"


def search_matches(
    matches: Iterable[Mapping[str, JSONValue]], folder: str, files: int, generation: int
) -> tuple[str, str]:
    """An ast_grep for `GENERATION = $G` in one conversation's folder: (cross-wired, wrong).
    Every match in that folder, one per file, each at the generation last written."""
    found = list(matches)
    outside = sorted({str(m.get("path")) for m in found} - _under(found, folder))
    if outside:
        return f"matches outside {folder}/: {', '.join(outside[:3])}", ""
    captured = sorted(str(_captured(m, "G")) for m in found)
    if len(found) != files or set(captured) != {str(generation)}:
        return "", f"expected {files} matches at generation {generation}, got {captured}"
    return "", ""


def _captured(match: Mapping[str, JSONValue], name: str) -> JSONValue:
    captures = match.get("captures")
    return captures.get(name) if isinstance(captures, dict) else None


def _under(matches: list[Mapping[str, JSONValue]], folder: str) -> set[str]:
    return {str(m.get("path")) for m in matches if str(m.get("path")).startswith(folder + "/")}


def file_state(text: str, run: str, index: int, versions: Iterable[int], generation: int) -> str:
    """A scratch file after a write: exactly one rendering, of one of `versions`."""
    parsed = parse(text)
    if parsed is None:
        return f"the file is no complete version ({len(text)} bytes: torn or mixed)"
    allowed = set(versions)
    if (parsed.run, parsed.index) != (run, index):
        return f"the file now belongs to {parsed.run} file {parsed.index}"
    if parsed.version not in allowed:
        return f"the file has version {parsed.version}; expected one of {sorted(allowed)}"
    if parsed.generation != generation:
        return f"a write of one file changed its generation to {parsed.generation}"
    return ""


def generations(files: Iterable[Parsed | None], before: int, after: int, ok: bool) -> str:
    """A multi-file change (ast_edit + resolve): every file at `after` when it succeeded,
    every file at `before` or every file at `after` when it failed; never a mix."""
    found = [f.generation if f is not None else None for f in files]
    if None in found:
        return "a file is no complete version (torn)"
    seen = set(found)
    if ok and seen != {after}:
        return f"resolve accepted, but the generations are {found} (expected all {after})"
    if not ok and seen not in ({before}, {after}):
        return f"resolve failed and left generations {found}: part of the change landed"
    return ""


def tier_breach(tool: str, is_error: bool, refused: bool, before: str, after: str) -> str:
    """A write/exec call from a read-only surface: refused, and the file unchanged."""
    if not is_error:
        return f"{tool} was not refused on a read-only surface"
    if before != after:
        return f"{tool} was refused, yet the file changed"
    if not refused:
        return f"{tool} failed, but not as a tier refusal"
    return ""


def visible_breach(surface: str, tiers: dict[str, str]) -> str:
    """What a read-only surface sees: only read-tier tools."""
    wrong = sorted(name for name, tier in tiers.items() if tier != "read")
    return f"the {surface} surface shows {', '.join(wrong)}" if wrong else ""


def escaped(is_error: bool, exists: bool) -> str:
    """A write to a path outside the run's working directory: refused, nothing there."""
    if not is_error:
        return "a write outside the working directory was not refused"
    if exists:
        return "a write outside the working directory was refused, yet the file is there"
    return ""
