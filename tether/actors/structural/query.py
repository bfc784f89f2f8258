"""Pattern -> tree-sitter query: find the candidate nodes in C, confirm them in Python.

A per-node Python walk over a whole tree costs more than parsing it. Instead the compiled
pattern is translated into a tree-sitter query that is a *superset* of the pattern: the
root's kind, the kinds of its descendants in order (unanchored), and `#eq?` on the text of
every named leaf. The query engine returns candidate roots; `matcher.match_at` confirms.

What the query leaves out, and why:
- metavariables: `(_)` children only multiply the query's match states;
- repeated metavariables: `#eq?` compares text, but SPEC.md wants `f(x)` to equal
  `f( x )`, so a text predicate would drop true matches — the Python matcher checks them;
- anchors (`.`): a comment between two siblings would defeat them (comments are skipped).
If the query does not compile, or its match limit is exceeded on a file, the root kind
alone is queried instead, which is always a superset.
"""

from __future__ import annotations

import functools

from tree_sitter import Node, Query, QueryCursor, QueryError

from tether.actors.structural.languages import get_language
from tether.actors.structural.pattern import Internal, MetaVar, Pattern, PNode, Terminal

MATCH_LIMIT = 1024


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
        after_ellipsis = False
        for c in p.children:
            if isinstance(c, MetaVar) and c.multi:
                after_ellipsis = True
                continue
            if after_ellipsis and isinstance(c, Terminal) and not c.named:
                continue  # the matcher skips punctuation right after `$$$`
            after_ellipsis = False
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
    """The full candidate query of a pattern (its first root for a sequence)."""
    root = pattern.roots[0]
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


@functools.lru_cache(maxsize=256)
def _compile(lang: str, source: str) -> Query | None:
    try:
        return Query(get_language(lang), source)
    except (QueryError, ValueError, SyntaxError, NameError):
        return None


class CandidateQuery:
    """The compiled candidate query of one pattern, with its kind-only fallback."""

    def __init__(self, pattern: Pattern):
        self.lang = pattern.lang
        self.source = query_source(pattern)
        self.full = _compile(self.lang, self.source)
        self.fallback_source = _root_kind_source(pattern.roots[0])
        self.fallback = _compile(self.lang, self.fallback_source)

    def candidates(self, root: Node) -> list[Node]:
        """Candidate roots in file order (deduplicated); a superset of the true matches."""
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
        from tether.actors.structural.matcher import iter_named

        return list(iter_named(root))
