"""Finding candidate nodes without a per-node Python walk; the matcher confirms them.

A Python walk over a whole tree costs more than parsing it, and so does a tree-sitter
query (measured on CPython's stdlib: even `(call) @root` takes ~1 s over 12 MiB of
trees, about what parsing them costs). Two ways, in order:

1. Anchor (most patterns): the pattern's most selective terminal (the longest named leaf
   text, else a keyword/operator token) is found with `bytes.find` in the file's source;
   for each occurrence, `descendant_for_byte_range` gives the node spanning it, and the
   candidate root is the ancestor exactly as many levels up as the terminal sits below
   the pattern's root (a match maps pattern nodes 1:1 onto code nodes, so the depth is
   exact). Text inside strings or comments yields a node of another kind and is dropped.
   Warm searches over the stdlib went from ~0.7 s (query) to ~0.06 s.
2. Query (patterns with no usable terminal, like `$F($$$A)`): the pattern as a
   tree-sitter query that is a *superset* of it — the root's kind, its descendants' kinds
   in order (unanchored), `#eq?` on named leaves. Left out on purpose: metavariables
   (`(_)` only multiplies match states); `#eq?` for repeated metavariables (it compares
   text, but SPEC.md wants `f(x)` to equal `f( x )`, so it would drop true matches);
   anchors `.` (a comment between siblings would defeat them). If the query fails to
   compile or exceeds its match limit on a file, the root's kind alone is queried.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tree_sitter import Node, Query, QueryCursor, QueryError, TreeCursor

from tether.structural.languages import get_language
from tether.structural.pattern import (
    Internal,
    MetaVar,
    Pattern,
    PNode,
    Terminal,
    required_children,
    terminals,
)

MATCH_LIMIT = 1024
ERROR_KIND = 0xFFFF  # a pattern's ERROR node is of no kind: it may stand at any node


def _literal(text: str) -> str | None:
    if not text or any(ord(ch) < 32 for ch in text):
        return None
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Builder:
    def __init__(self) -> None:
        self.preds: list[str] = []

    def emit(self, p: PNode, depth: int) -> str | None:
        if isinstance(p, MetaVar):
            return None
        if isinstance(p, Terminal):
            if not p.named:
                return _literal(p.kind) if depth > 0 else None
            lit = _literal(p.text.decode(errors="replace"))
            if lit is None:
                return f"({p.kind})"
            name = f"t{len(self.preds)}"
            self.preds.append(f"(#eq? @{name} {lit})")
            return f"({p.kind}) @{name}"
        parts: list[str] = []
        for c in required_children(p):
            emitted = self.emit(c, depth + 1)
            if emitted:
                parts.append(emitted)
        inner = " ".join(parts)
        return f"({p.kind}{' ' + inner if inner else ''})"


def _root_kind_source(p: PNode) -> str:
    if isinstance(p, MetaVar):
        return "(_) @root" if p.named else "_ @root"
    if isinstance(p, Terminal) and not p.named:
        lit = _literal(p.kind)
        return f"{lit} @root" if lit else "_ @root"
    return f"({p.kind}) @root"


def query_source(pattern: Pattern) -> str:
    """The full candidate query of a pattern; of a sequence, the parents that hold a node
    of its first root's kind (see `CandidateQuery.parents`)."""
    root = pattern.roots[0]
    if pattern.is_sequence:
        return _parent_source(root)
    if isinstance(root, MetaVar):
        return _root_kind_source(root)
    b = _Builder()
    body = b.emit(root, 0) if isinstance(root, Internal) else None
    if isinstance(root, Terminal) and root.named:
        lit = _literal(root.text.decode(errors="replace"))
        if lit:
            return f"(({root.kind}) @root (#eq? @root {lit}))"
    if body is None:
        return _root_kind_source(root)
    return f"({body} @root {' '.join(b.preds)})".replace(" )", ")")


def _parent_source(first: PNode) -> str:
    child = _root_kind_source(first).removesuffix(" @root")
    return f"(_ {child}) @root"


@functools.lru_cache(maxsize=256)
def _compile(lang: str, source: str) -> Query | None:
    try:
        return Query(get_language(lang), source)
    except (QueryError, ValueError, SyntaxError, NameError):
        return None


@dataclass(frozen=True)
class Anchor:
    """A terminal of the pattern found by its text: where it is, the root is `depth` up."""

    needle: bytes
    kind_id: int
    depth: int
    root_kind_id: int


def choose_anchor(pattern: Pattern) -> Anchor | None:
    """The most selective terminal of the (first) root: a named leaf's text, the longest;
    else a keyword or operator token whose text is its kind."""
    root = pattern.roots[0]
    if isinstance(root, MetaVar):
        return None
    found = terminals(root)
    usable = [
        (t, d)
        for t, d in found
        if t.text
        and (t.named or t.text == t.kind.encode())
        and not t.text.isspace()
        and not _spaced_directive(t)
    ]
    if not usable:
        return None
    t, d = max(usable, key=lambda td: (td[0].named, len(td[0].text), td[1]))
    return Anchor(t.text, t.kind_id, d, root.kind_id)


def _spaced_directive(t: Terminal) -> bool:
    """A preprocessor token (`#define`): the grammar also reads `# define`, so its text is
    no anchor (nor a prefilter literal)."""
    return not t.named and len(t.text) > 1 and t.text.startswith(b"#")


def anchored_candidates(anchor: Anchor, root: Node, src: bytes, up: int = 0) -> Iterator[Node]:
    """Roots found from every occurrence of the anchor's text: the node of the anchor's
    kind spanning exactly that text, then `depth` levels up, of the root's kind. Exact
    for the structure above the anchor, so a superset of the matches. With `up`=1, the
    parent of each such root instead (where a sequence pattern's siblings are), each once.

    One cursor walks down to the occurrences in file order, keeping the path from the root:
    the root `depth` up is read off the path, and the next occurrence only climbs as far
    as the common ancestor. (`Node.parent` walks down from the tree's root each time, so
    climbing per occurrence costs pattern depth x code depth; thousands of nesting levels
    made that the whole search.) Lazily, in the order found (not file order): a file with
    300k occurrences yields its first candidates before the walk is over."""
    needle = anchor.needle
    size = len(needle)
    kid = anchor.kind_id  # ERROR_KIND: a pattern's ERROR read by its text, of any kind
    depth = anchor.depth
    seen: set[int] = set()
    cursor = root.walk()
    path = [root]
    i = src.find(needle)
    while i >= 0:
        end = i + size
        while len(path) > 1 and not (path[-1].start_byte <= i and path[-1].end_byte >= end):
            cursor.goto_parent()
            path.pop()
        _descend(cursor, path, i, end)
        t = len(path) - 1
        while t >= 0 and path[t].start_byte == i and path[t].end_byte == end:
            if (path[t].kind_id == kid or kid == ERROR_KIND) and t >= depth + up:
                c = path[t - depth - up]
                top = path[t - depth]
                fits = anchor.root_kind_id in (top.kind_id, ERROR_KIND) or top.is_error
                if fits and c.id not in seen:
                    seen.add(c.id)
                    yield c
            t -= 1
        i = src.find(needle, i + 1)


def _descend(cursor: TreeCursor, path: list[Node], start: int, end: int) -> None:
    """Move the cursor (whose node is path[-1]) down to the smallest node containing
    [start, end), extending `path`."""
    while cursor.goto_first_child_for_byte(start) is not None:
        c = cursor.node
        if c is None or c.start_byte > start or c.end_byte < end:
            cursor.goto_parent()
            return
        path.append(c)


class VariantQuery:
    """How to find the candidate roots of one reading of a pattern: by an anchor's text, or by a query (with a
    kind-only fallback). For a sequence pattern, the candidates are the parents whose
    children the sequence is tried against, each parent once: trying each candidate first
    node instead meant climbing to its parent (`Node.parent` walks down from the tree's
    root) and listing all its siblings, per candidate - depth x candidates on deep code,
    siblings x candidates in a long block."""

    def __init__(self, pattern: Pattern):
        self.lang = pattern.lang
        self.anchor = choose_anchor(pattern)
        self.up = 1 if pattern.is_sequence else 0
        self.source = query_source(pattern)
        first = pattern.roots[0]
        self.fallback_source = _parent_source(first) if self.up else _root_kind_source(first)
        self.full: Query | None = None
        self.fallback: Query | None = None
        if self.anchor is None and getattr(first, "kind_id", None) != ERROR_KIND:
            self.full = _compile(self.lang, self.source)
            self.fallback = _compile(self.lang, self.fallback_source)

    def candidates(self, root: Node, src: bytes = b"") -> Iterable[Node]:
        """Candidate roots (parents, for a sequence), deduplicated, a superset of the true
        matches (in file order from a query; as found from an anchor)."""
        if self.anchor is not None:
            return anchored_candidates(self.anchor, root, src, self.up)
        for q in (self.full, self.fallback):
            if q is None:
                continue
            cursor = QueryCursor(q, match_limit=MATCH_LIMIT)
            found = cursor.captures(root).get("root", [])
            if cursor.did_exceed_match_limit:
                continue
            seen: set[int] = set()
            out: list[Node] = []
            for n in found:
                if n.id not in seen:
                    seen.add(n.id)
                    out.append(n)
            out.sort(key=lambda n: (n.start_byte, -n.end_byte))
            return out
        from tether.structural.matcher import iter_named

        return list(iter_named(root))


class CandidateQuery:
    """The candidate queries of every reading of a pattern (`Pattern.variants`: one, or
    one per member context that accepted it), the matches merged. Readings whose anchor is
    the same text at the same depth share one walk (a class field and an interface
    property both anchored on `readonly`): the walk is most of a warm search, and the
    readings differ only in the root's kind, checked per candidate."""

    def __init__(self, pattern: Pattern):
        self.groups: list[tuple[tuple[Pattern, ...], VariantQuery]] = []
        shared: dict[tuple[bytes, int, int], list[Pattern]] = {}
        for v in pattern.variants:
            vq = VariantQuery(v)
            a = vq.anchor
            if a is None or vq.up:
                self.groups.append(((v,), vq))
            else:
                shared.setdefault((a.needle, a.kind_id, a.depth), []).append(v)
        for (needle, kind_id, depth), vs in shared.items():
            vq = VariantQuery(vs[0])
            if len(vs) > 1:  # any root kind: each reading checks its own
                vq.anchor = Anchor(needle, kind_id, depth, ERROR_KIND)
            self.groups.append((tuple(vs), vq))

    @property
    def several(self) -> bool:
        """Whether two readings may match one node (then each match is kept once)."""
        return sum(len(vs) for vs, _ in self.groups) > 1
