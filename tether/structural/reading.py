"""One rung's reading of a pattern fragment: the pattern node types, and the conversion
of a scaffold's parse into them (`read_in_context`). The ladder (`pattern`) decides which
rung's reading is taken.

A fragment that covers several sibling nodes (two statements) becomes a *sequence*
pattern, matched against consecutive siblings. A zero-width node left by error recovery
(the empty body of `def $F($$$A):`) becomes an implicit `$$$`. A closing `;` that the
ladder appended is dropped from the pattern, and the match ends before the code's own
(`Pattern.trim_depth`): an edit of the match keeps it. So is a `;` the ladder put after a
`$$$` run (`metavars.terminate_runs`): `$$$B;` is read as the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from tree_sitter import Node

from tether.structural.habits import PatternError, shown
from tether.structural.languages import Context, get_parser
from tether.structural.metavars import MetaVar, extract_metavar
from tether.structural.weigh import DEGENERATE, ERROR_WEIGHT, hard_error, weigh

ERROR_KIND = 0xFFFF  # the kind id of ERROR nodes: a pattern node of it is of no kind
MAX_DEPTH = 120  # pattern nesting levels (the compiler and matcher recurse per level)


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
    closer: str = ""  # the terminator the ladder appended ("" or ";")
    trim_depth: int | None = None  # where the closer was, down the last root's last children
    alternatives: tuple[Pattern, ...] = ()  # the other member rungs' own readings
    same_in: tuple[str, ...] = ()  # other member rungs that read it exactly so
    char_matters: bool = False  # another metavariable character might read it better

    @property
    def is_sequence(self) -> bool:
        return len(self.roots) > 1

    @property
    def variants(self) -> tuple[Pattern, ...]:
        """Every reading searched: this one and its alternatives."""
        return (self, *self.alternatives)

    @property
    def contexts(self) -> tuple[str, ...]:
        """The contexts the pattern was read in (several for a member)."""
        return tuple(c for v in self.variants for c in (v.context, *v.same_in))


# --- compile -----------------------------------------------------------------------------


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
    def __init__(self, src: bytes, ch: str | None, inserted: frozenset[int] = frozenset()):
        self.src = src
        self.ch = ch
        self.inserted = inserted  # the bytes the ladder put after `$$$` runs
        self.names: set[str] = set()

    def _spells_metavar(self, n: Node) -> bool:
        text = self.src[n.start_byte : n.end_byte].decode(errors="replace")
        return self.ch is not None and extract_metavar(text, self.ch) is not None

    def _ours(self, n: Node) -> bool:
        """Whether `n` is made only of what the ladder put after a run (C#'s empty
        statement of our `;`; the `in __tether_x` of a filled `foreach` header)."""
        return n.end_byte > n.start_byte and all(
            b in self.inserted for b in range(n.start_byte, n.end_byte)
        )

    def _holds_metavar(self, text: bytes) -> bool:
        return self.ch is not None and self.ch.encode() in text

    def convert(self, n: Node) -> PNode:
        text = self.src[n.start_byte : n.end_byte]
        if self.ch is not None:
            end = n.end_byte
            while end - 1 in self.inserted and end - 1 > n.start_byte:
                end -= 1  # `$$$B;` with our `;` is the run `$$$B`
            if end < n.end_byte:
                text = self.src[n.start_byte : end].rstrip()
            mv = extract_metavar(text.decode(errors="replace"), self.ch)
            if mv is not None:
                if mv.name:
                    self.names.add(mv.name)
                return mv
        if n.child_count == 0:
            if n.start_byte == n.end_byte and n.is_named:
                return MetaVar(None, multi=True)  # zero-width from error recovery: implicit $$$
            return Terminal(n.kind_id, n.type, text, n.is_named)
        if n.is_error and not self._holds_metavar(text):
            # an ERROR node without a metavariable is matched by its text (a Go rune
            # literal of several characters): its pieces are no structure to compare
            return Terminal(n.kind_id, n.type, text, True)
        kept = [
            c
            for c in n.children
            if not c.is_missing and (not c.is_extra or c.is_error) and not self._ours(c)
        ]
        kids = tuple(_spliced([(c.is_error and not n.is_error, self.convert(c)) for c in kept]))
        if not kids and n.start_byte == n.end_byte:
            return MetaVar(None, multi=True)
        if any(self._ours(c) and c.start_byte + 1 in self.inserted for c in n.children):
            # a run filled as a header (`for ($$$H;;)`, several bytes of ours): the grammar
            # took it for one kind of `for`; the run stands for any header, so the node is
            # of any kind whose children these are (C++'s range `for`, Java's enhanced
            # `for` too)
            return Internal(ERROR_KIND, "ERROR", kids)
        return Internal(n.kind_id, n.type, kids)


def _spliced(kids: list[tuple[bool, PNode]]) -> Iterator[PNode]:
    """The children, each ERROR node (flagged True) of only metavariables and punctuation
    replaced by its pieces: JSON's `[$X, $Y]` is an array holding an ERROR (no
    metavariable character is a JSON value), and its metavariables stand for the values
    the array wants there."""
    for error, k in kids:
        if error and isinstance(k, Internal) and k.children:
            pieces = k.children
            if all(
                isinstance(c, MetaVar) or (isinstance(c, Terminal) and not c.named) for c in pieces
            ):
                yield from pieces
                continue
        yield k


def _strip_closer(p: PNode, closer: str) -> tuple[PNode, int | None]:
    """`p` without the closer the ladder appended, if it ends `p`'s chain of last
    children, and how deep it was (None: not found, `p` unchanged)."""
    chain: list[Internal] = []
    node: PNode = p
    while isinstance(node, Internal) and node.children:
        chain.append(node)
        last = node.children[-1]
        if isinstance(last, Terminal) and not last.named and last.text == closer.encode():
            if len(node.children) == 1:
                return p, None
            if node is p and len(p.children) == 2 and isinstance(p.children[0], Internal):
                # a node that only holds what was written and our closer (C#'s local
                # declaration statement around `int $A = 0`): what was written is the
                # pattern, and it matches a field's declaration too; a wrapper of one
                # node is that node (Solidity's `(expression Test)` around a name), as
                # ast-grep descends a pattern's single-child nodes
                inner: PNode = p.children[0]
                while isinstance(inner, Internal) and len(inner.children) == 1:
                    inner = inner.children[0]
                return inner, None
            rebuilt: PNode = Internal(node.kind_id, node.kind, node.children[:-1])
            for up in reversed(chain[:-1]):
                rebuilt = Internal(up.kind_id, up.kind, (*up.children[:-1], rebuilt))
            return rebuilt, len(chain)
        node = last
    return p, None


def _terminates(root: Node, end: int, closer: str) -> bool:
    """Whether the closer appended at [end - len, end) is a terminator token that closes
    something before it (not HTML text, not an empty statement of its own)."""
    size = len(closer.encode())
    leaf = root.descendant_for_byte_range(end - size, end)
    if leaf is None or leaf.is_named or leaf.type != closer or leaf.parent is None:
        return False
    return leaf.parent.start_byte < end - size


_SEPARATORS = (b";", b",")


def _without_separator(roots: tuple[PNode, ...]) -> tuple[PNode, ...]:
    """A sequence without its last root when that is a lone `;` or `,`: a TypeScript
    class or interface body holds a member's `;` as a sibling of the member, and the
    member is what was meant (in a body whose members end with `,` or a line break too)."""
    last = roots[-1] if len(roots) > 1 else None
    if isinstance(last, Terminal) and not last.named and last.text in _SEPARATORS:
        return roots[:-1]
    return roots


def _too_deep(original: str) -> PatternError:
    return PatternError(
        f"pattern `{shown(original)}` nests too deep (its syntax tree has more than "
        f"{MAX_DEPTH} levels, the most a pattern may have); match the outer levels and put "
        f"a metavariable where the inner ones are (e.g. `f(g($X))` instead of spelling "
        f"every level out)."
    )


def _only_metavar(roots: tuple[PNode, ...], original: str) -> None:
    if len(roots) != 1 or not isinstance(roots[0], MetaVar):
        return
    if roots[0].multi:
        raise PatternError(
            "a pattern that is only `$$$` matches everything; give it some code around "
            "the metavariable, e.g. `foo($$$ARGS)`."
        )
    raise PatternError(
        f"a pattern that is only a metavariable (`{shown(original)}`) matches every node of "
        f"every file; give it some code around the metavariable, e.g. `$X.close()` or "
        f"`return $X`."
    )


def read_in_context(
    lang: str,
    frag: str,
    ctx: Context,
    closer: str,
    ch: str | None,
    original: str,
    inserted: tuple[int, ...] = (),
) -> tuple[Pattern | None, Node | None, bytes]:
    """The reading of `frag` (already preprocessed for `ch`; `inserted`: the offsets of
    the `;` the ladder put after `$$$` runs) in one rung, or None with the error that
    refused it."""
    src = (ctx.prefix + frag + closer + ctx.suffix).encode()
    start = len(ctx.prefix.encode())
    end = start + len((frag + closer).encode())
    tree = get_parser(lang).parse(src)
    err = hard_error(tree.root_node, src, ch, original)
    if err is not None:
        return None, err, src
    nodes = _locate(tree.root_node, start, end, src)
    if nodes is None:
        return None, None, src
    if closer and not _terminates(tree.root_node, end, closer):
        return None, None, src  # the closer is text, or a node of its own (an empty statement)
    if max(_depth(n) for n in nodes) > MAX_DEPTH:
        raise _too_deep(original)
    conv = _Converter(src, ch, frozenset(start + i for i in inserted))
    roots = tuple(conv.convert(n) for n in nodes if not n.is_extra or n.is_error)
    roots = _without_separator(roots)
    if not roots:
        return None, None, src
    _only_metavar(roots, original)
    trim_depth = None
    if closer:
        last, trim_depth = _strip_closer(roots[-1], closer)
        roots = (*roots[:-1], last)
    repairs, char_matters = weigh(lang, tree.root_node, start, end, src, ch)
    if repairs >= ERROR_WEIGHT and len(roots) > 1:
        # the fragment fell into pieces around an ERROR node (C++ `for ($$$H) { $$$B }` in
        # a function body: an ERROR, then an initializer list): no code has siblings of
        # those shapes, so that reading would silently find nothing
        repairs += DEGENERATE
    elif repairs:
        repairs += len(roots) - 1  # error recovery's pieces: one node is the likelier intent
    if repairs >= ERROR_WEIGHT and ctx.prefix:
        repairs += 1  # through an ERROR node, the raw parse is ast-grep's reading: it wins ties
    pattern = Pattern(
        lang=lang,
        source=original,
        roots=roots,
        context=ctx.name + (f" + '{closer}'" if closer else ""),
        metavars=frozenset(conv.names),
        literals=_literals(roots, lang),
        repairs=repairs,
        char_matters=char_matters,
        closer=closer if trim_depth is not None else "",
        trim_depth=trim_depth,
    )
    return pattern, None, src
