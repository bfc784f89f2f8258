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
- the fragment's *first* word, a reserved word, read as a name: DEGENERATE (in JavaScript
  or PHP, where a reserved word may name a member, only a control word). That word
  says what the fragment is (`for`, `while`, `try`): C++ `for ($$$H) { $$$B }` has no
  error-free reading (a `for` header is no run of one kind), and as a struct member it is
  a field of type `for` with no error at all, which matched nothing. Such a reading is
  taken only when no rung reads the word as the keyword, even through an ERROR node;
- a metavariable that is not one whole node (`$` skipped, `S` an identifier): 1; one
  that is an ERROR node of its own: 1 for `$X`, 0 for `$$$X` (a run where the grammar
  wants one item is an ERROR in ast-grep too, and still the run);
- any other ERROR node of the parse, in the fragment or around it: ERROR_WEIGHT, so a
  reading through an ERROR node (a Kotlin character literal of several characters, as
  ast-grep accepts it) is taken only when no rung parses without one; but DEGENERATE for
  one of several punctuation tokens inside the fragment (C's `) {` in `for ($$$H) { $$$B
  }`), matched by a text no code's node has.

A reading that weighs DEGENERATE or more is refused, never searched (`pattern`).
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

# Grammars where a reserved word may name a property or member (`{ delete: $X }`,
# `$A.default`, PHP's `function list()`): there a first word read as a name is a
# reading the user may mean, unless the word begins a control statement.
KEYWORDS_NAME_MEMBERS = frozenset({"javascript", "typescript", "tsx", "php", "php_html"})
CONTROL_WORDS = frozenset({"for", "foreach", "while", "do", "if", "else", "switch", "try", "catch"})
_CLOSERS = (")", "]", "}", '"', "'", "`", "end")


@functools.cache
def is_keyword(lang: str, word: str) -> bool:
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
            if mv is None and _punctuation_only(n, src, start, end, ch):
                # read by its text, which no node of real code has (C's `) {` in `for
                # ($$$H) { $$$B }`): that reading can match nothing
                count += DEGENERATE
            elif mv is None:
                count += ERROR_WEIGHT  # inside the fragment or around it: not as written
            else:
                count += 0 if mv.multi else 1
        if n.has_error:
            stack.extend(n.children)
    return count


def _punctuation_only(error: Node, src: bytes, start: int, end: int, ch: str) -> bool:
    """Whether an ERROR node inside the fragment holds several tokens, all punctuation
    (no metavariable, no word, no literal)."""
    if error.start_byte < start or error.end_byte > end or error.child_count < 2:
        return False
    text = src[error.start_byte : error.end_byte].decode(errors="replace")
    return not any(c.isalnum() for c in text) and not (ch and ch in text)


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
    (not a node of the keyword's own kind, such as JavaScript's `super`). The first word
    of the fragment weighs DEGENERATE, unless it is inside an ERROR node and no control
    word: that reading is through the ERROR already (Solidity's `emit $E($$$A);` outside a
    function, which ast-grep matches so too), where `else` as a name never is."""
    first = len(src[start:end]) - len(src[start:end].lstrip())
    count = 0
    stack = [(root, False)]
    while stack:
        n, in_error = stack.pop()
        if n.end_byte <= start or n.start_byte >= end:
            continue
        if n.child_count == 0:
            text = src[n.start_byte : n.end_byte]
            if n.is_named and not n.is_error and n.type != text.decode(errors="replace"):
                if text.isalpha() and text.islower() and is_keyword(lang, text.decode()):
                    word = text.decode()
                    lead = n.start_byte == start + first and _names_nothing(lang, word)
                    lead = lead and (not in_error or word in CONTROL_WORDS)
                    count += DEGENERATE if lead else KEYWORD_AS_NAME
            continue
        stack.extend((c, in_error or n.is_error) for c in n.children)
    return count


def _names_nothing(lang: str, word: str) -> bool:
    """Whether reserved `word`, first in a fragment, is never the name the user meant."""
    return lang not in KEYWORDS_NAME_MEMBERS or word in CONTROL_WORDS


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
