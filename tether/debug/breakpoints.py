"""Breakpoints as agents ask for them: one syntax of ours, checked here, translated per adapter.

A line breakpoint is a line plus an optional `condition` (an expression of the program's
language, the adapter evaluates it), `hit_condition` and `log_message` (a logpoint: the
adapter writes the message, `{expression}` parts interpolated, and does not stop). A
function breakpoint is a function name plus condition and hit condition. Exception
breakpoints are `raised` and `uncaught`, mapped to the filters each adapter advertises.

Hit conditions (DAP leaves their syntax to each adapter, and the three differ): ours is
- `N` (or `== N`): stop on the Nth hit only;
- `>= N`: stop on the Nth hit and every one after it;
- `% N`: stop on every Nth hit (N, 2N, ...).
with N a whole number >= 1. debugpy and delve take all three in their own spelling; lldb-dap
takes only an ignore count (a number: N-1 hits ignored, then every hit stops), so `>= N` is
that number, `== N` is that number and the session removes the breakpoint at its first stop
(`AdapterRow.hit_equal_by_removal`), and `% N` is refused with what to use instead.

A breakpoint remembers the text of its line (`text`, its anchor). The running program runs
the code it loaded, so its breakpoints stay on their lines while it runs; at the next launch
each is moved to where its text now is (`relocate`), or reported as having lost its anchor
and not set - never left to stop on whatever code moved onto its old line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tether.json_types import JSONObject, JSONValue
from tether.messages.debug_ops import FeatureReport, FunctionSpec, LineSpec

HIT_SYNTAX = (
    "N (stop on the Nth hit only), '>= N' (the Nth hit and every one after it) or "
    "'% N' (every Nth hit), N a whole number >= 1; e.g. \"900\""
)
_HIT = re.compile(r"\s*(==|>=|%)?\s*(\d+)\s*")
EXCEPTION_KINDS = ("raised", "uncaught")
MAX_TEXT = 200  # characters of a line kept as its anchor


class BreakpointError(ValueError):
    """A breakpoint the agent asked for that cannot be (the message says what to do)."""


@dataclass(frozen=True)
class Hit:
    op: str  # "==" | ">=" | "%"
    n: int

    def __str__(self) -> str:
        return str(self.n) if self.op == "==" else f"{self.op} {self.n}"


def parse_hit(value: JSONValue) -> Hit | None:
    """Our hit-condition syntax ("" / None: no hit condition); BreakpointError if it is not."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise BreakpointError(f"hit_condition must be a string or a number: {HIT_SYNTAX}")
    m = _HIT.fullmatch(str(value))
    if not m:
        raise BreakpointError(f"hit_condition {value!r} is not ours: use {HIT_SYNTAX}")
    hit = Hit(m.group(1) or "==", int(m.group(2)))
    if hit.n < 1:
        raise BreakpointError(
            f"hit_condition {value!r}: hits are counted from 1, so N must be >= 1 ({HIT_SYNTAX})"
        )
    return hit


def translate_hit(hit: Hit, formats: Mapping[str, str], adapter: str) -> str:
    """`hit` in the adapter's own syntax; BreakpointError naming what it takes instead."""
    fmt = formats.get(hit.op)
    if fmt is None and not formats:
        raise BreakpointError(f"{adapter} takes no hit condition; use a condition instead")
    if fmt is None:
        takes = " or ".join(repr(str(Hit(op, 5))) for op in formats)
        raise BreakpointError(
            f"{adapter} cannot count hits as {str(hit)!r}; it takes {takes} (N=5 shown)"
        )
    return fmt.format(n=hit.n)


# --- what the agent asks for (tool arguments) -> plain specs (msgpack-able dicts) ------------
def line_specs(items: Sequence[JSONValue]) -> list[LineSpec]:
    """The `lines` of a `breakpoints` call (numbers, or objects with line / condition /
    hit_condition / log_message) as specs; BreakpointError naming the bad item."""
    specs: dict[int, LineSpec] = {}
    for item in items:
        spec = _line_spec(item)
        specs[spec["line"]] = spec  # one breakpoint per line: the last one asked for wins
    return list(specs.values())


def _line_spec(item: JSONValue) -> LineSpec:
    if isinstance(item, int) and not isinstance(item, bool):
        item = {"line": item}
    if not isinstance(item, dict):
        raise BreakpointError(
            f'a breakpoint is a line number or an object like {{"line": 12, "hit_condition": '
            f'"900"}}, not {item!r:.60}'
        )
    unknown = sorted(set(item) - {"line", "condition", "hit_condition", "log_message"})
    if unknown:
        raise BreakpointError(
            f"a line breakpoint takes line, condition, hit_condition, log_message; not "
            f"{', '.join(unknown)}"
        )
    line = item.get("line")
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise BreakpointError(f"a breakpoint needs line, a number >= 1 (got {line!r:.40})")
    return {
        "line": line,
        "condition": _text(item, "condition"),
        "hit_condition": _hit_text(item),
        "log_message": _text(item, "log_message"),
    }


def function_specs(items: Sequence[JSONValue]) -> list[FunctionSpec]:
    """The `functions` of a `breakpoints` call (names, or objects with name / condition /
    hit_condition) as specs."""
    out: dict[str, FunctionSpec] = {}
    for item in items:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not str(item.get("name") or "").strip():
            raise BreakpointError(
                f'a function breakpoint is a name or {{"name": "add", "condition": ...}}, '
                f"not {item!r:.60}"
            )
        unknown = sorted(set(item) - {"name", "condition", "hit_condition"})
        if unknown:
            raise BreakpointError(
                f"a function breakpoint takes name, condition, hit_condition; not "
                f"{', '.join(unknown)} (a logpoint is a line breakpoint's log_message)"
            )
        name = str(item["name"]).strip()
        out[name] = {
            "name": name,
            "condition": _text(item, "condition"),
            "hit_condition": _hit_text(item),
        }
    return list(out.values())


def exception_kinds(items: Sequence[JSONValue]) -> list[str]:
    kinds = [i for i in items if isinstance(i, str) and i in EXCEPTION_KINDS]
    bad = [i for i in items if not (isinstance(i, str) and i in EXCEPTION_KINDS)]
    if bad:
        raise BreakpointError(
            f"exceptions takes {' and/or '.join(EXCEPTION_KINDS)} (raised: every exception "
            f"when it is raised; uncaught: one nothing catches), not {', '.join(map(repr, bad))}"
        )
    return list(dict.fromkeys(kinds))


def _text(item: JSONObject, name: str) -> str:
    value = item.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BreakpointError(f"{name} must be a string, got {value!r:.40}")
    return value.strip()


def _hit_text(item: JSONObject) -> str:
    hit = parse_hit(item.get("hit_condition"))
    return str(hit) if hit else ""


# --- the session's breakpoints -----------------------------------------------------------
@dataclass
class Breakpoint:
    """A line breakpoint: what was asked (spec), where its text is, what the adapter said."""

    line: int
    condition: str = ""
    hit_condition: str = ""  # ours, normalised ("900", ">= 5", "% 3")
    log_message: str = ""
    text: str = ""  # the anchor: its line's text when it was set
    verified: bool = False
    actual_line: int | None = None
    message: str = ""
    id: int | None = None  # the adapter's id (stops name it in hitBreakpointIds)
    state: str = ""  # "" (active) | lost | refused | spent
    moved_from: int | None = None  # the line it was at before this launch moved it

    @classmethod
    def from_spec(cls, spec: LineSpec) -> Breakpoint:
        return cls(
            int(spec["line"]),
            str(spec.get("condition") or ""),
            str(spec.get("hit_condition") or ""),
            str(spec.get("log_message") or ""),
            str(spec.get("text") or ""),
        )

    def spec(self) -> LineSpec:
        return {
            "line": self.line,
            "condition": self.condition,
            "hit_condition": self.hit_condition,
            "log_message": self.log_message,
            "text": self.text,
        }

    @property
    def active(self) -> bool:
        return self.state == ""


@dataclass
class FunctionBreakpoint:
    name: str
    condition: str = ""
    hit_condition: str = ""
    verified: bool = False
    message: str = ""
    id: int | None = None
    state: str = ""  # "" | refused | spent

    @classmethod
    def from_spec(cls, spec: FunctionSpec) -> FunctionBreakpoint:
        return cls(
            str(spec["name"]),
            str(spec.get("condition") or ""),
            str(spec.get("hit_condition") or ""),
        )

    def spec(self) -> FunctionSpec:
        return {"name": self.name, "condition": self.condition, "hit_condition": self.hit_condition}


@dataclass
class Features:
    """What one adapter does with breakpoints: its capabilities where it advertised them,
    else the table's row (delve before 1.26 takes hitCondition without saying so)."""

    adapter: str
    condition: bool
    hit_formats: Mapping[str, str]
    hit_equal_by_removal: bool
    log_message: bool
    function: bool
    exceptions: Mapping[str, str]  # ours -> the adapter's filter ("" = always on, built in)
    exception_help: str = ""
    source: str = "table"  # table | capabilities

    def dap_breakpoint(self, bp: Breakpoint | FunctionBreakpoint) -> JSONObject:
        """The DAP SourceBreakpoint / FunctionBreakpoint for `bp` (BreakpointError when this
        adapter cannot do part of it)."""
        out: JSONObject = {"line": bp.line} if isinstance(bp, Breakpoint) else {"name": bp.name}
        if bp.condition:
            if not self.condition:
                raise BreakpointError(f"{self.adapter} has no conditional breakpoints")
            out["condition"] = bp.condition
        if bp.hit_condition:
            hit = parse_hit(bp.hit_condition)
            assert hit is not None
            out["hitCondition"] = translate_hit(hit, self.hit_formats, self.adapter)
        if isinstance(bp, Breakpoint) and bp.log_message:
            if not self.log_message:
                raise BreakpointError(f"{self.adapter} has no logpoints (log_message)")
            out["logMessage"] = bp.log_message
        return out

    def exception_filters(self, kinds: Sequence[str]) -> tuple[list[str], list[str]]:
        """The adapter's filters for our kinds, and a note per kind it cannot stop on."""
        filters, notes = [], []
        for kind in kinds:
            got = self.exceptions.get(kind)
            if got is None:
                notes.append(f"{kind}: {self.adapter} cannot stop there ({self.exception_help})")
            elif got == "":
                notes.append(f"{kind}: {self.adapter} always stops there (built in)")
            else:
                filters.append(got)
        return filters, notes

    def report(self) -> FeatureReport:
        return {
            "condition": self.condition,
            "hit_condition": [str(Hit(op, 1)).replace("1", "N") for op in self.hit_formats],
            "log_message": self.log_message,
            "function": self.function,
            "exceptions": dict(self.exceptions),
            "source": self.source,
        }


# --- anchors --------------------------------------------------------------------------------
def read_lines(path: str) -> list[str] | None:
    """The file's lines (None when unreadable)."""
    try:
        return Path(path).read_bytes().decode("utf-8", "replace").splitlines()
    except OSError:
        return None


def anchor_of(lines: Sequence[str] | None, line: int) -> str:
    if lines is None or not 1 <= line <= len(lines):
        return ""
    return lines[line - 1].strip()[:MAX_TEXT]


def relocate(
    line: int, text: str, now: Sequence[str], before: Sequence[str] | None = None
) -> tuple[int | None, str]:
    """Where a breakpoint set at `line` on `text` is in the file as it is `now`: (line, "")
    or (None, why its anchor is lost). `before` is the file as it was when the line was
    last right (a diff maps lines exactly, through repeated text); without it, the nearest
    line with the same text, if no other is as near."""
    if not text:  # set on a blank line or past the end: no text to follow, the adapter decides
        if line > len(now) or not now[line - 1].strip():
            return line, ""
        return None, f"line {line} was blank (or not there) when it was set and is code now"
    if before is not None:
        mapped = map_line(before, now, line)
        if mapped is not None and anchor_of(now, mapped) == text:
            return mapped, ""
    if anchor_of(now, line) == text:
        return line, ""
    same = [n for n, s in enumerate(now, 1) if s.strip()[:MAX_TEXT] == text]
    if not same:
        return None, f"its line's text ({text!r:.80}) is no longer in the file"
    same.sort(key=lambda n: abs(n - line))
    if len(same) > 1 and abs(same[0] - line) == abs(same[1] - line):
        return None, f"its text ({text!r:.60}) is at lines {same[0]} and {same[1]} now: which one?"
    return same[0], ""


def map_line(before: Sequence[str], now: Sequence[str], line: int) -> int | None:
    """`line` of `before` in `now`, where the diff keeps it unchanged (None otherwise)."""
    matcher = difflib.SequenceMatcher(None, list(before), list(now), autojunk=False)
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal" and i1 < line <= i2:
            return j1 + (line - i1)
    return None


@dataclass
class Snapshot:
    """A file as the program loaded it (read at launch): the lines a stop's line numbers
    and the breakpoints sent while it runs are about."""

    lines: list[str] = field(default_factory=list)
    digest: bytes = b""

    @classmethod
    def read(cls, path: str) -> Snapshot | None:
        try:
            data = Path(path).read_bytes()
        except OSError:
            return None
        return cls(data.decode("utf-8", "replace").splitlines(), _digest(data))

    def changed(self, path: str) -> bool:
        try:
            return _digest(Path(path).read_bytes()) != self.digest
        except OSError:
            return True


def _digest(data: bytes) -> bytes:
    import hashlib

    return hashlib.blake2b(data, digest_size=16).digest()
