"""How far a scaffold's parse of a pattern fragment is from what was written.

The ladder (`pattern.compile_pattern`) parses the fragment in several contexts and keeps
the reading that needed the least error recovery. A bare count of ERROR and MISSING
nodes picked nonsense: C++ `if (a) { $$$B }` has a MISSING `;` after `$$$B` in the
statement rung (the grammar wants a statement there), and none as a struct member (a
field of type `if`), so the member won and matched nothing. The weights:

- a MISSING node: 1, but 0 right after a `$$$` metavariable (it stands for statements
  that carry their own terminators) or at the end of a node that is only a metavariable
  (`$S` in C's `if ($C) $S` stands for a whole statement);
- a reserved word read as a name (`if` as a type or a function): 1, so the rung that
  reads it as the keyword wins a tie with it (it comes first: statements before members);
- the fragment's *first* word, a reserved word, read as a name: DEGENERATE. That word
  says what the fragment is (`for`, `while`, `try`): C++ `for ($$$H) { $$$B }` has no
  error-free reading (a `for` header is no run of one kind), and as a struct member it is
  a field of type `for` with no error at all, which matched nothing. Such a reading is
  taken only when no rung reads the word as the keyword, even through an ERROR node;
- a metavariable that is not one whole node (`$` skipped, `S` an identifier): 1; one
  that is an ERROR node of its own: 1 for `$X`, 0 for `$$$X` (a run where the grammar
  wants one item is an ERROR in ast-grep too, and still the run);
- any other ERROR node of the parse, in the fragment or around it: ERROR_WEIGHT, so a
  reading through an ERROR node (a Kotlin character literal of several characters, as
  ast-grep accepts it) is taken only when no rung parses without one.
"""

from __future__ import annotations

import functools
import re

from tree_sitter import Node

from tether.structural.habits import balanced, guesses_wildcards
from tether.structural.languages import contexts_for, get_language, get_parser
from tether.structural.metavars import extract_metavar, metavar_regexes

ERROR_WEIGHT = 10
KEYWORD_AS_NAME = 1
DEGENERATE = 1000  # more than any count of ERROR nodes a fragment's parse has
_CLOSERS = (")", "]", "}", '"', "'", "`", "end")


@functools.cache
def _is_keyword(lang: str, word: str) -> bool:
    """Whether `word` is a reserved word of the grammar: a keyword token (an anonymous
    kind spelled so) that cannot stand alone as a statement. tree-sitter reads a keyword
    as a name wherever the keyword is not valid, so that test says nothing; alone, `if` or
    `for` wants more, while Python's `print` (a Python 2 statement, and a name) or
    JavaScript's `get` is whole."""
    if get_language(lang).id_for_node_kind(word, False) in (None, 0):
        return False
    ctx = contexts_for(lang)[0]
    return get_parser(lang).parse((ctx.prefix + word + ctx.suffix).encode()).root_node.has_error


def hard_error(node: Node, src: bytes, ch: str | None, fragment: str) -> Node | None:
    """The first error that refuses a context outright: a MISSING closing bracket or
    quote (an unfinished fragment), or an ERROR node when the fragment is not whole
    (unbalanced brackets) or uses a regex/wildcard habit. An ERROR node that is exactly
    one metavariable is no error at all."""
    soft_errors = balanced(fragment) and not guesses_wildcards(fragment)
    stack = [node]
    while stack:
        n = stack.pop()
        if n.is_error:
            text = src[n.start_byte : n.end_byte].decode(errors="replace")
            if ch is not None and extract_metavar(text, ch) is not None:
                continue
            if not soft_errors:
                return n
        if n.is_missing and n.type in _CLOSERS:
            return n
        if n.has_error:
            stack.extend(reversed(n.children))
    return None


def weigh(
    lang: str, root: Node, start: int, end: int, src: bytes, ch: str | None
) -> tuple[int, bool]:
    """The repairs the parse of the fragment [start, end) of `src` needed (see above), and
    whether another metavariable character might need fewer (a metavariable was no whole
    node, or an ERROR node is in the parse)."""
    errors = _error_weight(root, start, end, src, ch or "")
    broken = _broken_metavars(root, start, end, src, ch) if ch is not None else 0
    count = errors + broken + _keywords_as_names(lang, root, start, end, src)
    return count, broken > 0 or errors >= ERROR_WEIGHT


def _error_weight(root: Node, start: int, end: int, src: bytes, ch: str) -> int:
    count = 0
    stack = [root]
    while stack:
        n = stack.pop()
        if n.end_byte < start or n.start_byte > end:
            continue
        if n.is_missing:
            count += 0 if _after_ellipsis(n, src, ch) or _ends_metavar(n, src, ch) else 1
        elif n.is_error:
            mv = extract_metavar(src[n.start_byte : n.end_byte].decode(errors="replace"), ch)
            if mv is None:
                count += ERROR_WEIGHT  # inside the fragment or around it: not as written
            else:
                count += 0 if mv.multi else 1
        if n.has_error:
            stack.extend(n.children)
    return count


def _after_ellipsis(missing: Node, src: bytes, ch: str) -> bool:
    """Whether the text just before an invented node is a `$$$` metavariable."""
    if not ch:
        return False
    before = src[: missing.start_byte].rstrip().decode(errors="replace")
    m = re.search(rf"{re.escape(ch * 3)}[A-Z0-9_]*$", before)
    return m is not None


def _ends_metavar(missing: Node, src: bytes, ch: str) -> bool:
    """Whether an invented node closes a node that is only a metavariable (C's `$S` +
    MISSING `;` in `if ($C) $S`): the compiler reads that node as the metavariable, which
    then stands for a whole statement, its terminator and all."""
    parent = missing.parent
    if not ch or parent is None:
        return False
    return (
        extract_metavar(src[parent.start_byte : parent.end_byte].decode(errors="replace"), ch)
        is not None
    )


def _keywords_as_names(lang: str, root: Node, start: int, end: int, src: bytes) -> int:
    """Named leaves inside the fragment whose text is a reserved word of the grammar
    (not a node of the keyword's own kind, such as JavaScript's `super`); the first word
    of the fragment weighs DEGENERATE."""
    first = len(src[start:end]) - len(src[start:end].lstrip())
    count = 0
    stack = [root]
    while stack:
        n = stack.pop()
        if n.end_byte <= start or n.start_byte >= end:
            continue
        if n.child_count == 0:
            text = src[n.start_byte : n.end_byte]
            if n.is_named and not n.is_error and n.type != text.decode(errors="replace"):
                if text.isalpha() and text.islower() and _is_keyword(lang, text.decode()):
                    count += DEGENERATE if n.start_byte == start + first else KEYWORD_AS_NAME
            continue
        stack.extend(n.children)
    return count


def _broken_metavars(root: Node, start: int, end: int, src: bytes, ch: str) -> int:
    """Metavariables of the fragment that are not one whole node."""
    multi, single = metavar_regexes(ch)
    text = src[start:end].decode(errors="replace")
    spans = [m.span() for m in multi.finditer(text)]
    spans += [
        m.span() for m in single.finditer(text) if not any(s <= m.start() < e for s, e in spans)
    ]
    count = 0
    for s, e in spans:
        bs = start + len(text[:s].encode())
        be = bs + len(text[s:e].encode())
        node = root.descendant_for_byte_range(bs, be)
        if node is None or node.start_byte != bs or node.end_byte != be:
            count += 1
    return count
