"""The pattern compiler: a code fragment with metavariables -> a tree of pattern nodes.

A fragment is parsed by the same grammar as the code, inside a scaffold (SPEC.md
"ast_grep"): the ladder of contexts in `languages.CONTEXTS` is tried in order (statement,
expression, member rungs, declaration; then again with a closing `;`). A reading that
parses the fragment *as written* (`weigh.weigh` is 0) wins at once; else the reading
with the least repair (the first of those) is taken. Each rung is read with the grammar's
preferred metavariable character first and, when a metavariable is then no whole node,
with the other candidates (`languages.metavar_chars`). A missing closing bracket, or an
ERROR node in a fragment that is not whole or uses a regex habit, refuses a rung
outright (`weigh.hard_error`).

Members are the exception to "first": when the reading taken is a member rung, every
other member rung (class, interface, object type, trait, ...) that reads the fragment as
well is kept too (`Pattern.alternatives`), and the search matches each (SPEC.md).

How one rung's parse becomes pattern nodes (sequences, implicit `$$$`, the appended `;`)
is `reading`; this module walks the ladder and chooses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from tree_sitter import Node

from tether.structural.habits import PatternError, check_habits, shown, unparseable_hints
from tether.structural.languages import CLOSERS, Context, contexts_for, metavar_chars
from tether.structural.metavars import MetaVar, preprocess, terminate_runs
from tether.structural.reading import (
    MAX_DEPTH,
    Internal,
    Pattern,
    PNode,
    Terminal,
    read_in_context,
    required_children,
    terminals,
)
from tether.structural.weigh import DEGENERATE, is_keyword

__all__ = [
    "MAX_DEPTH",
    "Internal",
    "MetaVar",
    "PNode",
    "Pattern",
    "PatternError",
    "Terminal",
    "compile_pattern",
    "required_children",
    "shown",
    "terminals",
]


def _chars_for(lang: str, frag: str) -> tuple[str | None, ...]:
    """The metavariable characters to read `frag` with, best first: none needed when it
    has no `$`; never one the fragment already spells before a capital (`_FOO` in a
    Python pattern is a name, not a metavariable)."""
    if "$" not in frag:
        return (None,)
    usable = tuple(
        ch for ch in metavar_chars(lang)
        if ch == "$" or not re.search(rf"{re.escape(ch)}[A-Z_]", frag)
    )  # fmt: skip
    return usable


# How far the ladder fills the fragment's `$$$` runs with `;` of its own
# (`metavars.terminate_runs`): not at all; after a run that closes a block, when no rung
# reads the fragment as written (C#'s `while ($C) { $$$B }`); after one that closes
# parentheses too, when neither reads it so (`for ($$$H) { $$$B }`: the C family has no
# for loop whose header is one run; C++ and Java have an ERROR reading, which the CLI
# matches, but which binds `$$$H` to `int` and `$$$B` to the rest of the header).
AS_WRITTEN, BLOCKS = None, ""
# What fills a run that closes parentheses, tried in order: a C-style `for` header; a
# `for`-in one (C#'s `foreach ($$$H)`, which `;;` does not make a loop).
HEADER_FILLS = (";;", " in __tether_x")


@dataclass
class _Ladder:
    """One pattern's walk down the ladder: the best reading so far, and why rungs
    refused it (for the error when none reads it)."""

    lang: str
    frag: str
    chars: tuple[str | None, ...]
    best: Pattern | None = None
    best_ctx: Context | None = None
    best_closer: str = ""
    tried: list[str] = field(default_factory=list)
    first_err: tuple[Node, bytes, int, str] | None = None
    fill: str | None = AS_WRITTEN  # blocks filled, and what fills a header (see above)

    def read(self, ctx: Context, closer: str) -> Pattern | None:
        """The best reading of the fragment in one rung, over the metavariable chars."""
        best: Pattern | None = None
        for ch in self.chars:
            processed = preprocess(self.frag, ch) if ch else self.frag
            inserted: tuple[int, ...] = ()
            if self.fill is not None and ch is not None:
                processed, inserted = terminate_runs(processed, ch, self.fill)
            p, err, src = read_in_context(
                self.lang, processed, ctx, closer, ch, self.frag, inserted
            )
            if p is None:
                if err is not None and self.first_err is None:
                    self.first_err = (err, src, len(ctx.prefix.encode()), processed)
                continue
            if best is None or p.repairs < best.repairs:
                best = p
            if p.repairs == 0 or not p.char_matters:
                break  # the other characters only help a metavariable or an ERROR node
        if best is None:
            self.tried.append(ctx.name + (f" + '{closer}'" if closer else ""))
        return best

    def offer(self, p: Pattern, ctx: Context, closer: str) -> None:
        if self.best is None or p.repairs < self.best.repairs:
            self.best, self.best_ctx, self.best_closer = p, ctx, closer


def _with_members(
    ladder: _Ladder, taken: Pattern, ctx: Context, closer: str, rungs: tuple[Context, ...]
) -> Pattern:
    """`taken` (read in member rung `ctx`) with every other member rung that reads the
    fragment as well, each distinct reading once."""
    readings: dict[str, Pattern] = {repr(taken.roots): taken}
    for other in rungs:
        if not other.is_member or other == ctx:
            continue
        p = ladder.read(other, closer)
        if p is None or p.repairs > taken.repairs:
            continue
        key = repr(p.roots)
        if key in readings:
            first = readings[key]
            readings[key] = replace(first, same_in=(*first.same_in, p.context))
        else:
            readings[key] = p
    first, *others = readings.values()
    if not others:
        return first
    common = set(first.literals).intersection(*(set(o.literals) for o in others))
    literals = tuple(t for t in first.literals if t in common)
    return replace(first, alternatives=tuple(others), literals=literals)


def compile_pattern(source: str, lang: str) -> Pattern:
    """Compile `source` for grammar `lang`; PatternError says why a pattern is refused."""
    frag = source.strip()
    if not frag:
        raise PatternError("the pattern is empty: pass a code fragment such as `foo($X)`.")
    check_habits(frag, lang)
    chars = _chars_for(lang, frag)
    rungs = contexts_for(lang, frag)
    ladders = [_Ladder(lang, frag, chars)]
    if "$$$" in frag:
        ladders.append(_Ladder(lang, frag, chars, fill=BLOCKS))
    for closer in CLOSERS:
        for ladder in ladders:
            found = _walk(ladder, rungs, closer)
            if found is not None:
                return found
    # of equals, the one with blocks filled: the as-written reading that ties it reads the
    # block as a literal (C#'s `for ($$$H) { $$$B }` as an initializer, which no loop has)
    ladder = min(reversed(ladders), key=_least_repaired)
    for fill in HEADER_FILLS if "$$$" in frag else ():
        headers = _Ladder(lang, frag, chars, fill=fill)
        for closer in CLOSERS:
            found = _walk(headers, rungs, closer)
            if found is not None:
                return found
        ladder = min((ladder, headers), key=_least_repaired)
    best, rung = ladder.best, ladder.best_ctx
    if best is None or rung is None:
        raise _unparseable(ladders[0])
    if best.repairs >= DEGENERATE:
        raise _no_sound_reading(ladder)
    if rung.is_member:
        return _with_members(ladder, best, rung, ladder.best_closer, rungs)
    return best


def _least_repaired(ladder: _Ladder) -> float:
    return ladder.best.repairs if ladder.best is not None else float("inf")


def _walk(ladder: _Ladder, rungs: tuple[Context, ...], closer: str) -> Pattern | None:
    """Down the ladder with one closer: the first reading as written (with its other
    member rungs), or None with the best reading offered to `ladder`."""
    for ctx in rungs:
        p = ladder.read(ctx, closer)
        if p is None:
            continue
        if p.repairs == 0:
            return _with_members(ladder, p, ctx, closer, rungs) if ctx.is_member else p
        ladder.offer(p, ctx, closer)
    return None


def _no_sound_reading(ladder: _Ladder) -> PatternError:
    """Every context reads the fragment only in a shape no code has (weigh.DEGENERATE):
    searching it would find nothing and say nothing."""
    best = ladder.best
    assert best is not None
    first = re.match(r"\s*([a-z]+)", ladder.frag)
    if first and is_keyword(ladder.lang, first.group(1)):
        why = f"reads its first word `{first.group(1)}` as a name"
    else:
        why = "leaves pieces of it that no node of any code has"
    return PatternError(
        f"pattern `{shown(ladder.frag)}` has no reading as {ladder.lang} that code can match: "
        f"the closest ({best.context}) {why}, so it was not searched. Write the construct "
        f"whole, as the grammar has it: the whole statement (`if ($C) {{ $$$A }} else "
        f"{{ $$$B }}`, not `else {{ $$$B }}`), a loop header spelled out (`for ($INIT; $COND; "
        f"$STEP) {{ $$$B }}`), or only the part you need (`$A.$M($$$ARGS)`)."
    )


def _unparseable(ladder: _Ladder) -> PatternError:
    frag = ladder.frag
    where = ""
    if ladder.first_err is not None:
        node, src, offset, processed = ladder.first_err
        rel = max(0, node.start_byte - offset)
        line = processed.encode()[:rel].count(b"\n") + 1
        near = src[node.start_byte : node.end_byte][:40].decode(errors="replace").strip()
        what = f"missing `{node.type}`" if node.is_missing else f"near `{near}`"
        where = f" The parser stopped at pattern line {line} ({what})."
    return PatternError(
        f"pattern `{shown(frag)}` is not valid {ladder.lang} in any context tried "
        f"({', '.join(dict.fromkeys(ladder.tried))}), so it was not searched.{where}"
        f"{unparseable_hints(frag)}"
    )
