"""The shapes of IPython idioms, shared by the Python and JavaScript rewriters.

A line that begins a statement (see `cell_lines`) is an idiom when it reads as one of

    %name args        a line magic            x = %name args   its value, bound
    !command          a shell command         x = !command     its stdout lines, bound
    !!command         its stdout lines        %%name args      a cell magic (first line only)

This module only reads the shape; what each idiom becomes is the language's business
(`magics_python`, `magics_javascript`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tether.kernels.cell_lines import indentation

Kind = Literal["line", "cell", "shell", "shell_lines"]

_TARGET = r"(?P<target>[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*"
_ASSIGNED = re.compile(_TARGET + r"(?P<sigil>!!?|%)(?P<rest>\S.*)$")
_MAGIC_NAME = re.compile(r"(?P<name>[A-Za-z_]\w*)(?:\s+(?P<args>.*))?$", re.DOTALL)


class MagicError(ValueError):
    """An idiom eval cannot run: the message names the line and says what to write instead."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Rewritten:
    """A cell in plain code, with what the rewrite wants the caller to know."""

    code: str
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MagicLine:
    """One idiom on one line: `%name args`, `!command`, optionally bound to `target`."""

    number: int  # 1-based line number in the cell
    indent: str
    kind: Kind
    name: str  # the magic's name; "" for shell commands
    args: str
    target: str | None = None

    @property
    def shown(self) -> str:
        """How the idiom reads in an error message."""
        sigil = {"line": "%", "cell": "%%", "shell": "!", "shell_lines": "!!"}[self.kind]
        return f"{sigil}{self.name}" if self.name else f"{sigil}{self.args.split(' ')[0]}"

    def error(self, problem: str, instead: str) -> MagicError:
        return MagicError(f"line {self.number}: {self.shown}: {problem}; {instead}")


def parse_magic_line(line: str, number: int = 1) -> MagicLine | None:
    """The idiom on `line` (which begins a statement), or None when it is plain code."""
    text = line.strip()
    assigned = _ASSIGNED.match(text)
    target = None
    if assigned:
        target = assigned["target"]
        text = assigned["sigil"] + assigned["rest"]
    magic = _read(text, number, indentation(line), target)
    if magic is not None and target is not None and magic.kind == "cell":
        return None  # `x = %%y` is not an idiom
    return magic


def _read(text: str, number: int, indent: str, target: str | None) -> MagicLine | None:
    if text.startswith("!!") and len(text) > 2:
        return MagicLine(number, indent, "shell_lines", "", text[2:].strip(), target)
    if text.startswith("!") and text[1:].strip() and text[1] != "=":
        return MagicLine(number, indent, "shell", "", text[1:].strip(), target)
    for sigil, kind in (("%%", "cell"), ("%", "line")):
        if text.startswith(sigil):
            named = _MAGIC_NAME.match(text[len(sigil) :])
            if not named:
                return None
            args = (named["args"] or "").strip()
            return MagicLine(number, indent, kind, named["name"], args, target)  # type: ignore[arg-type]
    return None


def split_options(
    magic: MagicLine, text: str, flags: dict[str, bool]
) -> tuple[dict[str, str], str]:
    """Leading `-x [value]` options of `text` (`flags` maps each known one to whether it
    takes a value), and the rest of the text as written."""
    found: dict[str, str] = {}
    rest = text.strip()
    while rest.startswith("-"):
        option, _, after = rest.partition(" ")
        if option not in flags:
            known = ", ".join(sorted(flags)) or "none"
            raise magic.error(f"unknown option {option!r}", f"known options: {known}")
        value = ""
        if flags[option]:
            value, _, after = after.strip().partition(" ")
            if not value:
                raise magic.error(f"option {option} needs a value", f"write {option} N")
        found[option] = value
        rest = after.strip()
    return found, rest


def single_path(magic: MagicLine, text: str) -> str:
    """One path argument, quoted the shell way when it has spaces."""
    try:
        parts = shlex.split(text)
    except ValueError as error:
        raise magic.error(f"cannot read the path ({error})", "quote it once") from None
    if len(parts) != 1:
        raise magic.error(f"expected one path, got {len(parts)}", "quote a path with spaces")
    return parts[0]


def positive_int(magic: MagicLine, option: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise magic.error(
            f"{option} wants a positive whole number, got {value!r}", f"write {option} 10"
        )
    return int(value)


def replace_magic_lines(
    lines: list[str],
    rows: list[int],
    translate: Callable[[MagicLine], tuple[str, str | None]],
) -> tuple[list[str], list[str]]:
    """`lines` with each idiom at `rows` replaced by its translation (one line for one line,
    so line numbers in tracebacks still match the cell), and the notes the translations made.
    A cell magic below the first line is refused: IPython reads it only there."""
    out = list(lines)
    notes: list[str] = []
    for row in rows:
        magic = parse_magic_line(lines[row], row + 1)
        assert magic is not None  # rows hold only lines that parse
        if magic.kind == "cell":
            raise magic.error(
                "a cell magic works only on the first line of a cell",
                "move it to the top, or split the cell into two eval calls",
            )
        code, note = translate(magic)
        ending = "\n" if lines[row].endswith("\n") else ""
        out[row] = magic.indent + code + ending
        if note:
            notes.append(f"line {magic.number}: {note}")
    return out, notes


LANGUAGES = {
    "python": "python", "python3": "python", "py": "python",
    "javascript": "javascript", "js": "javascript", "typescript": "javascript",
    "ts": "javascript", "deno": "javascript",
}  # fmt: skip


def language_of(language: str) -> str:
    """ "python" or "javascript" (Deno's kernel runs TypeScript too) for a language name."""
    try:
        return LANGUAGES[language.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown language {language!r}: eval runs python or javascript") from None
