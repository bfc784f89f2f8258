"""The pattern compiler: a code fragment with metavariables -> a tree of pattern nodes.

A fragment is parsed by the same grammar as the code, inside a scaffold (SPEC.md
"ast_grep"): the ladder of contexts in `languages.CONTEXTS` is tried in order (statement,
expression, class member, declaration; then again with a closing `;`) and the first
context that parses the fragment *as written* wins: no ERROR or MISSING (invented) node
inside the fragment, every metavariable a whole node (`_repairs`). Only when no context
does is the one with the fewest repairs taken (an ERROR node outside a metavariable, or a
missing closing bracket, still refuses a context outright). A fragment that covers
several sibling nodes (two statements) becomes a *sequence* pattern, matched against
consecutive siblings. A zero-width node left by error recovery (the empty body of
`def $F($$$A):`) becomes an implicit `$$$`.

Metavariables follow ast-grep: `$NAME` binds one named node, `$$NAME` one node of any
kind, `$_` binds nothing, `$$$NAME` / `$$$` a (lazy) run of siblings. Names are UPPERCASE,
digits and `_`. Before parsing, `$` is replaced by the grammar's probed metavariable
character where `$` is not an identifier character (as ast-grep's `pre_process_pattern`).

Regex and text habits get a specific error instead of a silent zero-match search.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tree_sitter import Node

from tether.structural import languages
from tether.structural.languages import CLOSERS, Context, contexts_for, get_parser


class PatternError(ValueError):
    """A pattern we refuse to search; the message names the problem and the fix."""


SHOWN_CHARS = 160  # a pattern quoted in a message is cut to about this many characters
MAX_DEPTH = 120  # pattern nesting levels (the compiler and matcher recurse per level)


def shown(source: str, limit: int = SHOWN_CHARS) -> str:
    """`source` as quoted in a message: whole when short, else its head and tail around
    an ellipsis that says how much was left out (a 10,000-character pattern echoed back
    whole buries the sentence that says what is wrong)."""
    if len(source) <= limit:
        return source
    head = source[: limit * 2 // 3]
    tail = source[-(limit // 4) :]
    return f"{head} … [{len(source) - len(head) - len(tail):,} characters] … {tail}"


def _depth(node: Node) -> int:
    """Nesting depth below `node` (iterative: a deep pattern is the case being checked)."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        if d <= MAX_DEPTH + 1:
            stack.extend((c, d + 1) for c in n.children)
    return deepest


# --- pattern nodes -----------------------------------------------------------------------


class MetaVar:
    __slots__ = ("name", "multi", "named")

    def __init__(self, name: str | None, multi: bool, named: bool = True):
        self.name = name  # None: anonymous ($_, $$$, implicit)
        self.multi = multi
        self.named = named

    def __repr__(self) -> str:
        sig = "$$$" if self.multi else ("$" if self.named else "$$")
        return f"{sig}{self.name or '_'}"


class Terminal:
    __slots__ = ("kind_id", "kind", "text", "named")

    def __init__(self, kind_id: int, kind: str, text: bytes, named: bool):
        self.kind_id = kind_id
        self.kind = kind
        self.text = text
        self.named = named

    def __repr__(self) -> str:
        return self.text.decode(errors="replace") if self.named else repr(self.kind)


class Internal:
    __slots__ = ("kind_id", "kind", "children")

    def __init__(self, kind_id: int, kind: str, children: tuple[PNode, ...]):
        self.kind_id = kind_id
        self.kind = kind
        self.children = children

    def __repr__(self) -> str:
        return f"({self.kind} {' '.join(map(repr, self.children))})"


PNode = MetaVar | Terminal | Internal


@dataclass
class Pattern:
    lang: str
    source: str  # as the model wrote it
    roots: tuple[PNode, ...]  # one node, or a sequence of siblings
    context: str  # the scaffold that accepted it
    metavars: frozenset[str] = field(default_factory=frozenset)
    literals: tuple[bytes, ...] = ()  # texts every match contains verbatim (prefilter)
    repairs: int = 0  # error recovery the accepting parse needed (0: parsed as written)

    @property
    def is_sequence(self) -> bool:
        return len(self.roots) > 1


# --- metavariables -----------------------------------------------------------------------

_NAME = r"[A-Z_][A-Z0-9_]*"


def _metavar_regexes(ch: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    c = re.escape(ch)
    multi = re.compile(rf"{c}{c}{c}({_NAME})?")
    single = re.compile(rf"({c}{c}?)({_NAME})")
    return multi, single


def extract_metavar(text: str, ch: str) -> MetaVar | None:
    """The metavariable a node's whole text spells, if any (ast-grep `extract_meta_var`)."""
    if not text or text[0] != ch:
        return None
    multi, single = _metavar_regexes(ch)
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


# --- habits ------------------------------------------------------------------------------

# Grammars in which `$name` is ordinary code (variables), so a lowercase `$x` is not a habit.
_DOLLAR_VARIABLES = frozenset({"php", "perl", "bash", "fish", "powershell", "make", "ruby"})

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


def _unparseable_hints(source: str) -> str:
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
    return " Check brackets and quotes; metavariables are `$NAME`, `$$$NAME` and `$_`."


# --- compile -----------------------------------------------------------------------------


def _first_error(node: Node, src: bytes = b"", ch: str | None = None) -> Node | None:
    """The first ERROR node, or a MISSING closing bracket/quote (an unfinished fragment).

    An ERROR node that is exactly one metavariable is not an error: `$$$B` where the
    grammar wants an item (Rust's `impl X { $$$B }`) becomes a metavariable all the same.
    """
    stack = [node]
    while stack:
        n = stack.pop()
        if n.is_error:
            text = src[n.start_byte : n.end_byte].decode(errors="replace")
            if ch is not None and extract_metavar(text, ch) is not None:
                continue
            return n
        if n.is_missing and n.type in (")", "]", "}", '"', "'", "`", "end"):
            return n
        if n.has_error:
            stack.extend(reversed(n.children))
    return None


def _locate(root: Node, start: int, end: int, src: bytes = b"") -> list[Node] | None:
    """The node (or run of sibling nodes) that spans exactly [start, end) of the scaffold.

    A node that also takes the line break after the fragment counts as spanning it: a C
    `#define` or `#include` line ends with its newline, and without this the pattern would
    fall apart into a sequence of its pieces (matching function-like macros too)."""
    node = root
    while True:
        inner = None
        for c in node.children:
            if c.start_byte <= start and c.end_byte >= end and c.end_byte > c.start_byte:
                inner = c
                break
        if inner is None:
            break
        node = inner
    if node.start_byte == start and node != root:
        if node.end_byte == end or (src and not src[end : node.end_byte].strip(b" \t\r\n")):
            return [node]
    kids = [
        c for c in node.children if c.end_byte > start and c.start_byte < end and not c.is_missing
    ]
    if kids and kids[0].start_byte == start and kids[-1].end_byte == end:
        return kids
    return None


def _repairs(root: Node, start: int, end: int, src: bytes, ch: str | None) -> int:
    """How much error recovery the parse of the fragment [start, end) needed: ERROR and
    MISSING (invented) nodes inside it, and metavariables that are not a whole node. A
    rung with repairs parsed something else than what was written (`async $M() {}` as a
    call then a block): the ladder goes on to the next rung."""
    count = 0
    stack = [root]
    while stack:
        n = stack.pop()
        if n.end_byte < start or n.start_byte > end:
            continue
        if n.is_missing:
            count += 1
        elif n.is_error and n.start_byte >= start and n.end_byte <= end:
            # `$$$P` where the grammar wants one parameter or statement is an ERROR node
            # in ast-grep too, and still the whole run; a single `$M` in ERROR is not
            mv = extract_metavar(src[n.start_byte : n.end_byte].decode(errors="replace"), ch or "")
            count += 0 if mv is not None and mv.multi else 1
        if n.has_error:
            stack.extend(n.children)
    if ch is not None:
        multi, single = _metavar_regexes(ch)
        text = src[start:end].decode(errors="replace")
        spans = [m.span() for m in multi.finditer(text)]
        spans += [m.span() for m in single.finditer(text) if not _inside(m.span(), spans)]
        for s, e in spans:
            bs = start + len(text[:s].encode())
            be = bs + len(text[s:e].encode())
            node = root.descendant_for_byte_range(bs, be)
            if node is None or node.start_byte != bs or node.end_byte != be:
                count += 1
    return count


def _inside(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(s <= span[0] and span[1] <= e for s, e in spans)


# Grammars whose keyword tokens are spelled exactly as their kind (no case-insensitive
# keywords), so a keyword of the pattern can serve the text prefilter too.
CASE_SENSITIVE_KEYWORDS = frozenset(
    {"python", "javascript", "typescript", "tsx", "go", "rust", "c", "cpp", "java",
     "kotlin", "dart", "swift", "ruby", "csharp", "scala", "lua", "bash", "php"}
)  # fmt: skip


def required_children(p: Internal) -> Iterator[PNode]:
    """The children of `p` a match must contain: not the `$$$` metavariables, and not the
    punctuation right after one, which the matcher skips (ast-grep's `skipped_anonymous`)."""
    after_ellipsis = False
    for c in p.children:
        if isinstance(c, MetaVar) and c.multi:
            after_ellipsis = True
            continue
        if after_ellipsis and isinstance(c, Terminal) and not c.named:
            continue
        after_ellipsis = False
        yield c


def terminals(p: PNode, depth: int = 0) -> list[tuple[Terminal, int]]:
    """The terminals every match must contain, with their depth below `p`."""
    out: list[tuple[Terminal, int]] = []
    if isinstance(p, Terminal):
        out.append((p, depth))
    elif isinstance(p, Internal):
        for c in required_children(p):
            out.extend(terminals(c, depth + 1))
    return out


def _literals(roots: tuple[PNode, ...], lang: str) -> tuple[bytes, ...]:
    """Texts every match contains verbatim: named leaves, and (where keywords are case
    sensitive) keyword tokens. Longest first."""
    found: set[bytes] = set()
    for root in roots:
        for t, _ in terminals(root):
            if not t.text:
                continue
            if t.named:
                found.add(t.text)
            elif lang in CASE_SENSITIVE_KEYWORDS and t.text == t.kind.encode():
                if t.text.isalpha():
                    found.add(t.text)
    return tuple(sorted(found, key=lambda b: (-len(b), b)))


class _Converter:
    def __init__(self, src: bytes, ch: str | None):
        self.src = src
        self.ch = ch
        self.names: set[str] = set()

    def _spells_metavar(self, n: Node) -> bool:
        text = self.src[n.start_byte : n.end_byte].decode(errors="replace")
        return self.ch is not None and extract_metavar(text, self.ch) is not None

    def convert(self, n: Node) -> PNode:
        text = self.src[n.start_byte : n.end_byte]
        if self.ch is not None:
            mv = extract_metavar(text.decode(errors="replace"), self.ch)
            if mv is not None:
                if mv.name:
                    self.names.add(mv.name)
                return mv
        if n.child_count == 0:
            if n.start_byte == n.end_byte and n.is_named:
                return MetaVar(None, multi=True)  # zero-width from error recovery: implicit $$$
            return Terminal(n.kind_id, n.type, text, n.is_named)
        kids = tuple(
            self.convert(c)
            for c in n.children
            if not c.is_missing and (not c.is_extra or (c.is_error and self._spells_metavar(c)))
        )
        if not kids and n.start_byte == n.end_byte:
            return MetaVar(None, multi=True)
        return Internal(n.kind_id, n.type, kids)


def _try_context(
    lang: str, frag: str, ctx: Context, closer: str, ch: str | None, original: str = ""
) -> tuple[Pattern | None, Node | None, bytes]:
    src = (ctx.prefix + frag + closer + ctx.suffix).encode()
    start = len(ctx.prefix.encode())
    end = start + len((frag + closer).encode())
    tree = get_parser(lang).parse(src)
    err = _first_error(tree.root_node, src, ch)
    if err is not None:
        return None, err, src
    nodes = _locate(tree.root_node, start, end, src)
    if nodes is None:
        return None, None, src
    if max(_depth(n) for n in nodes) > MAX_DEPTH:
        raise PatternError(
            f"pattern `{shown(original or frag)}` nests too deep (its syntax tree has "
            f"more than {MAX_DEPTH} levels, the most a pattern may have); match the outer levels and put a metavariable where "
            f"the inner ones are (e.g. `f(g($X))` instead of spelling every level out)."
        )
    conv = _Converter(src, ch)
    roots = tuple(conv.convert(n) for n in nodes if not n.is_extra)
    if not roots:
        return None, None, src
    if len(roots) == 1 and isinstance(roots[0], MetaVar) and not roots[0].multi:
        raise PatternError(
            f"a pattern that is only a metavariable (`{shown(original or frag)}`) matches every node of every "
            f"file; give it some code around the metavariable, e.g. `$X.close()` or "
            f"`return $X`."
        )
    if len(roots) == 1 and isinstance(roots[0], MetaVar) and roots[0].multi:
        raise PatternError(
            "a pattern that is only `$$$` matches everything; give it some code around "
            "the metavariable, e.g. `foo($$$ARGS)`."
        )
    pattern = Pattern(
        lang=lang,
        source=frag,
        roots=roots,
        context=ctx.name + (f" + '{closer}'" if closer else ""),
        metavars=frozenset(conv.names),
        literals=_literals(roots, lang),
        repairs=_repairs(tree.root_node, start, end, src, ch),
    )
    return pattern, None, src


def compile_pattern(source: str, lang: str) -> Pattern:
    """Compile `source` for grammar `lang`; PatternError says why a pattern is refused."""
    frag = source.strip()
    if not frag:
        raise PatternError("the pattern is empty: pass a code fragment such as `foo($X)`.")
    check_habits(frag, lang)
    ch = languages.metavar_char(lang)
    if (
        ch is None
        and "$" in frag
        and extract_metavar(frag, "$") is None
        and re.search(r"\$\$?\$?[A-Z_]", frag)
    ):
        raise PatternError(
            f"the {lang} grammar accepts no metavariable character, so `$NAME` cannot be "
            f"used in {lang} patterns; search for literal code instead."
        )
    processed = preprocess(frag, ch) if ch else frag
    tried: list[str] = []
    first_err: tuple[Node, bytes, int] | None = None
    best: Pattern | None = None
    for closer in CLOSERS:
        for ctx in contexts_for(lang, frag):
            pattern, err, src = _try_context(lang, processed, ctx, closer, ch, frag)
            if pattern is not None:
                pattern.source = frag
                if pattern.repairs == 0:
                    return pattern
                if best is None or pattern.repairs < best.repairs:
                    best = pattern  # the first rung with the fewest repairs, if none is clean
                continue
            tried.append(ctx.name + (f" + '{closer}'" if closer else ""))
            if err is not None and first_err is None:
                first_err = (err, src, len(ctx.prefix.encode()))
    if best is not None:
        return best
    where = ""
    if first_err is not None:
        node, src, offset = first_err
        rel = max(0, node.start_byte - offset)
        line = processed.encode()[:rel].count(b"\n") + 1
        near = src[node.start_byte : node.end_byte][:40].decode(errors="replace").strip()
        what = f"missing `{node.type}`" if node.is_missing else f"near `{near}`"
        where = f" The parser stopped at pattern line {line} ({what})."
    raise PatternError(
        f"pattern `{shown(frag)}` is not valid {lang} in any context tried "
        f"({', '.join(dict.fromkeys(tried))}), so it was not searched.{where}"
        f"{_unparseable_hints(frag)}"
    )
