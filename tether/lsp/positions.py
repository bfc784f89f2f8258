"""`line` + `symbol` -> a position in the server's negotiated encoding, and back.

SPEC.md: positions are addressed by a 1-indexed line plus a substring on that line, never
by a column (a model asked for columns guesses, and a wrong guess silently names another
symbol). `symbol#2` picks the second occurrence on the line.

Occurrences are counted among whole-word matches first (for `load` on
`x = loader.load()` the match is `load` in `.load()`, not the start of `loader`); only when
the symbol never occurs as a whole word do raw substring matches count. A symbol whose
literal text ends in `#N` (e.g. a C `#2` in a string) is taken literally when it occurs.

LSP `Position.character` counts code units of the negotiated `positionEncoding`: UTF-16 by
default (LSP 3.17 "Position"), or UTF-8 / UTF-32 when client and server agreed on them.
Python `str` indexes are code points (= UTF-32 units).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OCCURRENCE = re.compile(r"^(?P<text>.+)#(?P<n>[1-9][0-9]*)$")
_WORD = re.compile(r"\w")


class PositionError(ValueError):
    """A line/symbol that does not name a position; the message says what to pass instead."""


@dataclass(frozen=True)
class SymbolSpan:
    line: int  # 0-based
    start: int  # code-point index of the first character of the match
    end: int  # code-point index past the match
    line_text: str


def split_occurrence(symbol: str) -> tuple[str, int]:
    m = _OCCURRENCE.match(symbol)
    if not m:
        return symbol, 1
    return m.group("text"), int(m.group("n"))


def _occurrences(line: str, text: str, whole_word: bool) -> list[int]:
    out, i = [], line.find(text)
    while i >= 0:
        if not whole_word or (
            (i == 0 or not _WORD.match(line[i - 1]) or not _WORD.match(text[0]))
            and (
                i + len(text) >= len(line)
                or not _WORD.match(line[i + len(text)])
                or not _WORD.match(text[-1])
            )
        ):
            out.append(i)
        i = line.find(text, i + 1)
    return out


def find_symbol(text: str, line: int, symbol: str | None, where: str = "the file") -> SymbolSpan:
    """Locate `symbol` on 1-based `line` of `text`; raises PositionError echoing the line."""
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise PositionError(f"line must be a 1-indexed line number, got {line!r}")
    head = text.split("\n", line)  # only the lines up to the one wanted
    if line > len(head) or (line == len(head) and head[-1] == "" and line > 1):
        total = len(text.splitlines())
        raise PositionError(
            f"line {line} is past the end of {where} ({total} lines); "
            "pass a line that exists (lines are 1-indexed)"
        )
    code = head[line - 1].rstrip("\r")
    if not symbol:
        raise PositionError(
            f"symbol is required: pass a substring of line {line} of {where} that names what "
            f"you mean, e.g. a function name. The line is: {code.strip()!r}"
        )
    literal_hits = _occurrences(code, symbol, whole_word=False)
    name, nth = (symbol, 1) if literal_hits else split_occurrence(symbol)
    hits = _occurrences(code, name, whole_word=True) or _occurrences(code, name, whole_word=False)
    if not hits:
        raise PositionError(
            f"symbol {name!r} is not on line {line} of {where}. The line is: {code.strip()!r} "
            "- pass a substring of that line, or check the line number"
        )
    if nth > len(hits):
        raise PositionError(
            f"symbol {name!r} occurs {len(hits)} time(s) on line {line} of {where}, "
            f"so #{nth} does not exist. The line is: {code.strip()!r}"
        )
    start = hits[nth - 1]
    return SymbolSpan(line - 1, start, start + len(name), code)


def units(s: str, encoding: str) -> int:
    """Length of `s` in code units of the LSP position encoding."""
    if encoding == "utf-8":
        return len(s.encode("utf-8"))
    if encoding == "utf-32":
        return len(s)
    return len(s.encode("utf-16-le")) // 2


def to_character(line_text: str, index: int, encoding: str = "utf-16") -> int:
    """Code-point index on a line -> LSP `character` in `encoding`."""
    if encoding == "utf-32":
        return index
    return units(line_text[:index], encoding)


def from_character(line_text: str, character: int, encoding: str = "utf-16") -> int:
    """LSP `character` in `encoding` -> code-point index (clamped to the line, mid-char rounds down)."""
    if encoding == "utf-32":
        return max(0, min(character, len(line_text)))
    if line_text.isascii():
        return max(0, min(character, len(line_text)))
    acc = 0
    for i, ch in enumerate(line_text):
        w = units(ch, encoding)
        if acc + w > character:
            return i
        acc += w
    return len(line_text)


def offset_of(text: str, line: int, character: int, encoding: str = "utf-16") -> int:
    """LSP (line, character) -> code-point offset into `text` (for applying edits).

    Lines are split on \\n only (LSP also accepts \\r\\n and \\r as line ends; a \\r before
    \\n stays part of the line here, which is harmless: positions never point past it).
    """
    starts = line_starts(text)
    if line >= len(starts):
        return len(text)
    begin = starts[line]
    end = text.find("\n", begin)
    end = len(text) if end < 0 else end
    return begin + from_character(text[begin:end], character, encoding)


def line_starts(text: str) -> list[int]:
    starts = [0]
    i = text.find("\n")
    while i >= 0:
        starts.append(i + 1)
        i = text.find("\n", i + 1)
    return starts
