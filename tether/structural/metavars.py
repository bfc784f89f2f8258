"""Metavariables as ast-grep spells them: `$NAME` binds one named node, `$$NAME` one node
of any kind, `$_` binds nothing, `$$$NAME` / `$$$` a (lazy) run of siblings. Names are
UPPERCASE, digits and `_`. Before parsing, `$` is replaced by a metavariable character the
grammar reads inside a name (as ast-grep's `pre_process_pattern`); a node whose whole text
spells a metavariable is one, an ERROR node included."""

from __future__ import annotations

import re


class MetaVar:
    __slots__ = ("name", "multi", "named")

    def __init__(self, name: str | None, multi: bool, named: bool = True):
        self.name = name  # None: anonymous ($_, $$$, implicit)
        self.multi = multi
        self.named = named

    def __repr__(self) -> str:
        sig = "$$$" if self.multi else ("$" if self.named else "$$")
        return f"{sig}{self.name or '_'}"


_NAME = r"[A-Z_][A-Z0-9_]*"


def metavar_regexes(ch: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    c = re.escape(ch)
    multi = re.compile(rf"{c}{c}{c}({_NAME})?")
    single = re.compile(rf"({c}{c}?)({_NAME})")
    return multi, single


def extract_metavar(text: str, ch: str) -> MetaVar | None:
    """The metavariable a node's whole text spells, if any (ast-grep `extract_meta_var`)."""
    if not text or text[0] != ch:
        return None
    multi, single = metavar_regexes(ch)
    m = multi.fullmatch(text)
    if m:
        name = m.group(1)
        return MetaVar(None if not name or name.startswith("_") else name, multi=True)
    m = single.fullmatch(text)
    if m:
        name = m.group(2)
        return MetaVar(
            None if name.startswith("_") else name, multi=False, named=len(m.group(1)) == 1
        )
    return None


def preprocess(source: str, ch: str) -> str:
    """Replace `$` by the grammar's metavariable character where it starts a metavariable."""
    if ch == "$":
        return source
    out: list[str] = []
    dollars = 0
    for c in source:
        if c == "$":
            dollars += 1
            continue
        if dollars:
            replace = c.isupper() or c == "_" or dollars == 3
            out.append((ch if replace else "$") * dollars)
            dollars = 0
        out.append(c)
    if dollars:
        out.append((ch if dollars == 3 else "$") * dollars)
    return "".join(out)


def terminate_runs(processed: str, ch: str, header: str = "") -> tuple[str, tuple[int, ...]]:
    """`processed` with a `;` after each `$$$` run that closes a `{ }` block (and `header`
    after one that closes parentheses), and the byte offsets of every character put in.

    C#'s grammar reads `{ $$$B }` as an initializer, Dart's as a set literal: a name is no
    statement there without its `;` (where C and Java invent a MISSING one). C's reads
    `for ($$$H)` as no for loop at all: a header is `init; cond; step`, no run of one kind.
    What is put in is ours: the compiler reads `$$$B;` as the run and drops the nodes made
    only of it."""
    multi, _ = metavar_regexes(ch)
    out: list[str] = []
    offsets: list[int] = []
    pos = 0
    for m in multi.finditer(processed):
        after = processed[m.end() :].lstrip()[:1]
        fill = ";" if after == "}" else header if after == ")" else ""
        if not fill:
            continue
        out.append(processed[pos : m.end()])
        at = len("".join(out).encode())
        offsets.extend(range(at, at + len(fill.encode())))
        out.append(fill)
        pos = m.end()
    out.append(processed[pos:])
    return "".join(out), tuple(offsets)
