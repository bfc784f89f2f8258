"""The matcher: does a compiled pattern match a syntax node, and what did it capture.

Semantics are ast-grep's default `smart` strictness where SPEC.md is silent:
- every pattern node must be matched; unnamed candidate tokens the pattern does not
  mention are skipped (`foo($A, $B)` matches `foo(a, b,)`);
- once the pattern's children are exhausted, trailing candidate children are ignored
  (`return $A` matches `return 1;`);
- `$NAME` binds one *named* node; `$$NAME` any node; `$_` binds nothing;
- a repeated metavariable must capture the same code, compared structurally (`f(x)`
  equals `f( x )`, as ast-grep's `does_node_match_exactly`).

Where we differ from ast-grep, SPEC.md decides:
- comments (tree-sitter "extra" nodes) in the code are skipped everywhere, so `foo($A)`
  matches `foo(/* c */ x)` ("however it is spaced, wrapped or commented"); ast-grep's
  smart mode refuses that match;
- `$$$` is lazy *with backtracking* (the issue asks for it); ast-grep commits to the first
  candidate the next pattern node accepts. Both agree whenever ast-grep finds a match.
  Failed states are remembered (see `Matcher`), so backtracking stays polynomial.
- a repeated `$$$NAME` must capture the same run of nodes, like a single one.
"""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from tether.structural.budget import Budget, unlimited
from tether.structural.pattern import Internal, MetaVar, Pattern, PNode, Terminal

Env = dict[str, "Node | list[Node]"]  # metavariable name -> what it bound
# what a binding is compared by: a node's span and kind, or a list's spans
SpanKey = tuple[int, int, int] | tuple[tuple[int, int], ...]
# a sequence match's state, memoised when it failed: (pattern index, candidate index, the
# bindings that later pattern nodes see)
State = tuple[int, int, tuple[tuple[str, SpanKey], ...]]

_ERROR_KIND = 0xFFFF


def same_code(a: Node, b: Node, src: bytes, budget: Budget | None = None) -> bool:
    """Structural equality of two nodes of one file, ignoring whitespace and comments.

    Iterative: generated code nests deeper than Python's recursion limit. Each pair of
    nodes compared is a step of `budget` (two huge subtrees are a long comparison).
    """
    stack = [(a, b)]
    while stack:
        if budget is not None:
            budget.step()
        x, y = stack.pop()
        if x.start_byte == y.start_byte and x.end_byte == y.end_byte and x.kind_id == y.kind_id:
            continue
        x_leaf = x.child_count == 0
        y_leaf = y.child_count == 0
        if (x_leaf and x.is_named) or (y_leaf and y.is_named):
            if src[x.start_byte : x.end_byte] != src[y.start_byte : y.end_byte]:
                return False
            continue
        if x.kind_id != y.kind_id:
            return False
        if x_leaf or y_leaf:
            if not (x_leaf and y_leaf):
                return False
            continue
        xc = [c for c in x.children if not c.is_extra]
        yc = [c for c in y.children if not c.is_extra]
        if len(xc) != len(yc):
            return False
        stack.extend(zip(xc, yc, strict=True))
    return True


def _same_run(a: list[Node], b: list[Node], src: bytes, budget: Budget) -> bool:
    return len(a) == len(b) and all(same_code(x, y, src, budget) for x, y in zip(a, b, strict=True))


def _bind_multi(p: MetaVar, nodes: list[Node], env: Env, src: bytes, budget: Budget) -> Env | None:
    if p.name is None:
        return env
    prev = env.get(p.name)
    if prev is not None:
        return env if isinstance(prev, list) and _same_run(prev, nodes, src, budget) else None
    new = dict(env)
    new[p.name] = nodes
    return new


def _is_trivial(p: PNode) -> bool:
    return isinstance(p, Terminal) and not p.named


def _is_multi(p: PNode) -> bool:
    return isinstance(p, MetaVar) and p.multi


def _run(cs: list[Node], j: int, k: int, drop_trailing_unnamed: int) -> list[Node]:
    nodes = [c for c in cs[j:k] if not c.is_extra]
    while drop_trailing_unnamed and nodes and not nodes[-1].is_named:
        nodes.pop()
        drop_trailing_unnamed -= 1
    return nodes


class Matcher:
    """Matches one pattern in one file, within a budget.

    `$$$` backtracks, so a naive matcher is exponential in the number of ellipses (`f($$$,
    a, $$$, b, $$$)` against a long argument list). A state (pattern index, candidate index,
    the bindings the rest of the pattern can still see) that failed once fails again, so
    failed states are remembered per sibling list: each is explored once.
    """

    def __init__(self, src: bytes, budget: Budget | None = None):
        self.src = src
        self.budget = budget if budget is not None else unlimited()
        self._later: dict[tuple[int, int], frozenset[str]] = {}

    def _names_after(self, ps: tuple[PNode, ...], i: int) -> frozenset[str]:
        key = (id(ps), i)
        got = self._later.get(key)
        if got is None:
            got = frozenset(n for p in ps[i:] for n in _names(p))
            self._later[key] = got
        return got

    def _state(self, ps: tuple[PNode, ...], i: int, j: int, env: Env) -> State:
        seen = self._names_after(ps, i)
        bound = tuple(sorted((k, _span_key(v)) for k, v in env.items() if k in seen))
        return (i, j, bound)

    def node(self, p: PNode, c: Node, env: Env) -> Env | None:
        """Match one pattern node against one candidate node; the extended env, or None."""
        self.budget.step()
        src = self.src
        if isinstance(p, Internal):
            # an ERROR node, in the pattern or in the code, is of no kind: its pieces match
            if p.kind_id != c.kind_id and p.kind_id != _ERROR_KIND and not c.is_error:
                return None
            if c.child_count == 0:
                return None
            r = self.seq(p.children, 0, c.children, 0, env)
            return None if r is None else r[0]
        if isinstance(p, Terminal):
            if p.kind_id != c.kind_id and p.kind_id != _ERROR_KIND:
                return None
            if p.named and src[c.start_byte : c.end_byte] != p.text:
                return None
            return env
        # single metavariable ($$$ is handled by seq)
        if p.named and not c.is_named:
            return None
        if p.name is None:
            return env
        prev = env.get(p.name)
        if prev is None:
            new = dict(env)
            new[p.name] = c
            return new
        if isinstance(prev, list) or not same_code(prev, c, src, self.budget):
            return None
        return env

    def seq(
        self, ps: tuple[PNode, ...], i: int, cs: list[Node], j: int, env: Env
    ) -> tuple[Env, int] | None:
        """Match pattern children ps[i:] against candidate children cs[j:].

        Returns the env and the index just past the last candidate consumed, or None.
        """
        return self._seq(ps, i, cs, j, env, set())

    def _seq(
        self,
        ps: tuple[PNode, ...],
        i: int,
        cs: list[Node],
        j: int,
        env: Env,
        failed: set[State],
    ) -> tuple[Env, int] | None:
        src = self.src
        n_ps = len(ps)
        n_cs = len(cs)
        while True:
            self.budget.step()
            if i == n_ps:
                return env, j
            p = ps[i]
            if isinstance(p, MetaVar) and p.multi:
                k = i + 1
                skipped = 0
                while k < n_ps and _is_trivial(ps[k]):
                    k += 1
                    skipped += 1
                if k == n_ps:  # the ellipsis (and trailing punctuation) takes the rest
                    bound = _bind_multi(p, _run(cs, j, n_cs, skipped), env, src, self.budget)
                    return None if bound is None else (bound, n_cs)
                if _is_multi(ps[k]):  # `$$$A, $$$B`: the first takes exactly one node
                    while j < n_cs and cs[j].is_extra:
                        j += 1
                    if j >= n_cs:
                        return None
                    bound = _bind_multi(p, [cs[j]], env, src, self.budget)
                    if bound is None:
                        return None
                    env, i, j = bound, k, j + 1
                    continue
                state = self._state(ps, i, j, env)
                if state in failed:
                    return None
                for m in range(j, n_cs + 1):  # lazy, with backtracking
                    if m < n_cs and cs[m].is_extra:
                        continue
                    if p.name is None:
                        bound = env  # binds nothing: no run to build
                    else:
                        self.budget.step(1 + (m - j) // 32)  # the run's copy is work too
                        bound = _bind_multi(p, _run(cs, j, m, skipped), env, src, self.budget)
                    if bound is None:
                        continue
                    r = self._seq(ps, k, cs, m, bound, failed)
                    if r is not None:
                        return r
                failed.add(state)
                return None
            if j >= n_cs:
                # candidates ran out: only ellipses may remain (they bind nothing)
                for q in ps[i:]:
                    if not _is_multi(q):
                        return None
                    env2 = _bind_multi(q, [], env, src, self.budget)  # type: ignore[arg-type]
                    if env2 is None:
                        return None
                    env = env2
                return env, j
            c = cs[j]
            if c.is_extra and not (c.is_error and _is_error_text(p)):
                j += 1  # comments never take part (SPEC.md: "however it is ... commented")
                continue
            matched = self.node(p, c, env)
            if matched is not None:
                env = matched
                i += 1
                j += 1
                continue
            if isinstance(p, Terminal) and not c.is_named:
                j += 1  # smart strictness: skip an unnamed token the pattern does not mention
                continue
            return None

    def at(self, pattern: Pattern, node: Node) -> tuple[Env, Node, Node] | None:
        """Match the pattern with its (first) root at `node`: env, first and last matched
        node."""
        self.budget.begin_node(node.start_point[0] + 1)
        roots = pattern.roots
        if len(roots) == 1:
            env = self.node(roots[0], node, {})
            return None if env is None else (env, node, node)
        parent = node.parent  # (one climb: searches go by parent, see `in_children`)
        if parent is None:
            return None
        cs = parent.children
        j = next((idx for idx, c in enumerate(cs) if c.id == node.id), -1)
        return None if j < 0 else self._sequence_at(pattern, cs, j)

    def in_children(
        self, pattern: Pattern, parent: Node
    ) -> Iterator[tuple[Env, Node, Node] | None]:
        """A sequence pattern tried at each of `parent`'s children its first root could
        be, in order: per try, the match (env, first and last matched node) or None. A
        generator, so the caller's scheduler runs between the tries."""
        first = pattern.roots[0]
        cs = parent.children
        for j, c in enumerate(cs):
            if not c.is_extra and _could_be(first, c):
                self.budget.begin_node(c.start_point[0] + 1)
                yield self._sequence_at(pattern, cs, j)

    def _sequence_at(
        self, pattern: Pattern, cs: list[Node], j: int
    ) -> tuple[Env, Node, Node] | None:
        r = self.seq(pattern.roots, 0, cs, j, {})
        if r is None:
            return None
        env, end = r
        last = end - 1
        while last > j and (cs[last].is_extra or cs[last].start_byte == cs[last].end_byte):
            last -= 1
        return env, cs[j], cs[last]


def _is_error_text(p: PNode) -> bool:
    """A pattern's ERROR node, matched by its text (an ERROR in the code may be extra)."""
    return isinstance(p, Terminal) and p.kind_id == _ERROR_KIND


def _could_be(p: PNode, c: Node) -> bool:
    """Whether pattern node `p` could match `c` at all, by its kind (a cheap first test)."""
    if isinstance(p, MetaVar):
        return c.is_named or not p.named  # as the query `(_)` or `_` finds them
    return p.kind_id == c.kind_id or p.kind_id == _ERROR_KIND or c.is_error


def _names(p: PNode) -> Iterator[str]:
    if isinstance(p, MetaVar):
        if p.name is not None:
            yield p.name
    elif isinstance(p, Internal):
        for c in p.children:
            yield from _names(c)


def _span_key(v: Node | list[Node]) -> SpanKey:
    if isinstance(v, list):
        return tuple((n.start_byte, n.end_byte) for n in v)
    return (v.start_byte, v.end_byte, v.kind_id)


def iter_named(root: Node) -> Iterator[Node]:
    """Every node of a tree in pre-order (the fallback when no query applies)."""
    cursor = root.walk()
    while True:
        if cursor.node is not None:  # (always, on a tree: the stubs allow None)
            yield cursor.node
        if cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return
