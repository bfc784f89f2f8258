"""Habits from regex and text search that a pattern can never mean, caught before parsing,
and the hints an unparseable pattern's error carries (a specific error instead of a silent
zero-match search)."""

from __future__ import annotations

import re


class PatternError(ValueError):
    """A pattern we refuse to search; the message names the problem and the fix."""


SHOWN_CHARS = 160  # a pattern quoted in a message is cut to about this many characters


def shown(source: str, limit: int = SHOWN_CHARS) -> str:
    """`source` as quoted in a message: whole when short, else its head and tail around
    an ellipsis that says how much was left out (a 10,000-character pattern echoed back
    whole buries the sentence that says what is wrong)."""
    if len(source) <= limit:
        return source
    head = source[: limit * 2 // 3]
    tail = source[-(limit // 4) :]
    return f"{head} … [{len(source) - len(head) - len(tail):,} characters] … {tail}"


# Grammars in which `$name` is ordinary code (variables), so a lowercase `$x` is not a habit.
_DOLLAR_VARIABLES = frozenset(
    {"php", "perl", "bash", "fish", "powershell", "make", "ruby", "php_html"}
)

_REGEX_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\.\*|\.\+|\.\?"), "`.*` is regex"),
    (re.compile(r"\\[wdsbWDSB]"), "`\\w`/`\\d`/`\\s` are regex classes"),
    (re.compile(r"\(\?[:=!<]"), "`(?:` is a regex group"),
    (re.compile(r"\[\^"), "`[^...]` is a regex class"),
)


def check_habits(source: str, lang: str) -> None:
    """Errors for habits that can never mean what the model wanted, whatever the grammar."""
    glued = re.search(r"(?<![A-Za-z0-9_$])[A-Za-z0-9_]+\$+[A-Z_][A-Za-z0-9_]*", source)
    if glued:
        raise PatternError(
            f"`{glued.group(0)}` in the pattern glues a metavariable to other characters; a "
            f"metavariable matches a whole node, never part of an identifier. Match the whole "
            f"identifier with `$NAME` (e.g. `$HOOK($$$ARGS)`) and filter the results, or write "
            f"the full name literally."
        )
    if lang not in _DOLLAR_VARIABLES:
        lower = re.search(r"(?<![A-Za-z0-9_$])\$+([a-z][A-Za-z0-9_]*)", source)
        if lower:
            name = lower.group(1)
            raise PatternError(
                f"`{lower.group(0)}` is not a metavariable: metavariable names are UPPERCASE "
                f"letters, digits and `_`. Write `${name.upper()}` (or `$$${name.upper()}` for "
                f"a run of nodes, `$_` to match without binding)."
            )
    alt = re.fullmatch(r"\s*([\w.$]+)(\|[\w.$]+)+\s*", source)
    if alt:
        raise PatternError(
            f"`{shown(source.strip())}` looks like a regex alternation; a pattern is one piece of "
            f"code, not a choice. Search each alternative separately (one ast_grep call per "
            f"pattern). To search the bitwise-or expression itself, write it with spaces: "
            f"`{' | '.join(source.strip().split('|'))}`."
        )


def unparseable_hints(source: str) -> str:
    hints = [msg for rx, msg in _REGEX_HINTS if rx.search(source)]
    if hints:
        return (
            f" It looks like a regular expression ({'; '.join(hints)}): patterns are code, "
            f"not regex. Use `$X` for one node and `$$$` for any run of nodes, e.g. "
            f"`foo($$$)` instead of `foo(.*)`."
        )
    if "..." in source:
        return " Write `$$$` (or `$$$ARGS`) for 'anything here', not `...`."
    if re.search(r"(?<![\w)\]])\*(?![\w(])", source):
        return " `*` is not a wildcard here: write `$X` for one node, `$$$` for several."
    return _NO_HINT


_NO_HINT = " Check brackets and quotes; metavariables are `$NAME`, `$$$NAME` and `$_`."


def guesses_wildcards(source: str) -> bool:
    """Whether the pattern uses a regex or `...`/`*` wildcard habit (its parse may go
    through an ERROR node, but it never means that code)."""
    return unparseable_hints(source) != _NO_HINT


_OPEN, _CLOSE = "([{", ")]}"


def balanced(source: str) -> bool:
    """Brackets balanced outside quotes: a fragment read through an ERROR node must at
    least be whole (`foo(` or an extra `)` is a typo to report, not code to match)."""
    depth = [0, 0, 0]
    quote = ""
    escaped = False
    for c in source:
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
        elif c in "\"'`":
            quote = c
        elif c in _OPEN:
            depth[_OPEN.index(c)] += 1
        elif c in _CLOSE:
            depth[_CLOSE.index(c)] -= 1
            if depth[_CLOSE.index(c)] < 0:
                return False
    return not quote and depth == [0, 0, 0]
