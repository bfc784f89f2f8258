"""Search one file or a tree of files: prefilter, parse (cached), query, confirm.

Plain functions, callable without actors: the parser actor wraps them, tests and the
benchmark call them directly.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import TypeVar

from tree_sitter import Node

from tether.json_types import JSONObject
from tether.messages.nested import plain
from tether.messages.parser_ops import Match
from tether.structural.budget import Budget
from tether.structural.cache import ParseCache
from tether.structural.languages import extensions_of
from tether.structural.matcher import Env, Matcher
from tether.structural.pattern import Pattern, compile_pattern
from tether.structural.query import CandidateQuery
from tether.structural.scan import iter_files, passes_prefilter, shard_of, stat_files

Span = tuple[int, int]


@dataclass
class RawMatch:
    start: int  # byte offsets into the file
    end: int
    captures: dict[str, Span | list[Span]]


def _span(n: Node) -> Span:
    return (n.start_byte, n.end_byte)


def _captures(env: Env) -> dict[str, Span | list[Span]]:
    out: dict[str, Span | list[Span]] = {}
    for name, v in env.items():
        out[name] = [_span(n) for n in v] if isinstance(v, list) else _span(v)
    return out


def iter_tree(
    pattern: Pattern,
    cq: CandidateQuery,
    root: Node,
    src: bytes,
    out: list[RawMatch],
    budget: Budget | None = None,
    keep: int | None = None,
) -> Generator[None, None, int]:
    """Append the matches in one parsed file to `out` in file order (nested ones
    included), yielding after each candidate so a scheduler can serve other work between;
    returns how many there are. Given `keep`, only the first `keep` in file order are
    kept: a search that shows 50 need not build, sort and free 300k records of a
    multi-megabyte line (a quarter of a second of work no slice could interrupt)."""
    matcher = Matcher(src, budget)
    kept = _Kept(keep)
    count = 0
    several = cq.several
    seen: set[tuple[int, int]] = set()  # a node two readings match is one match
    for variants, vq in cq.groups:
        for node in vq.candidates(root, src):
            for variant in variants:
                if len(variants) > 1 and not _could_root(variant, node):
                    continue
                tries = (
                    matcher.in_children(variant, node) if vq.up else (matcher.at(variant, node),)
                )
                for r in tries:
                    if r is not None:
                        env, first, last = r
                        span = (first.start_byte, match_end(variant, last))
                        if several:
                            if span in seen:
                                continue
                            seen.add(span)
                        count += 1
                        kept.add(span[0], span[1], env)
                    yield
    out.extend(kept.in_order())
    return count


def _could_root(variant: Pattern, node: Node) -> bool:
    """Whether `node` has the kind of the reading's root (readings sharing one walk)."""
    kind_id = getattr(variant.roots[0], "kind_id", None)
    return kind_id is None or kind_id in (node.kind_id, 0xFFFF) or node.is_error


def match_end(pattern: Pattern, last: Node) -> int:
    """Where a match ends: the end of its last node, less the terminator the ladder
    appended to the pattern (`int $A = 0` read with a closing `;`: an edit of the match
    keeps the code's `;`). The terminator sits `pattern.trim_depth` levels down the last
    node's chain of last children."""
    depth = pattern.trim_depth
    if depth is None:
        return last.end_byte
    node = last
    for _ in range(depth - 1):
        kids = [c for c in node.children if not c.is_extra]
        if not kids:
            return last.end_byte
        node = kids[-1]
    kids = [c for c in node.children if not c.is_extra]
    tail = kids[-1] if kids else None
    if tail is not None and len(kids) > 1 and tail.type == pattern.closer:
        if not tail.is_named and not tail.is_missing:
            return kids[-2].end_byte
    return last.end_byte


class _Kept:
    """The first `keep` matches of a file in file order (start, then the longer first),
    from candidates found in any order; all of them when `keep` is None."""

    def __init__(self, keep: int | None):
        self.keep = keep
        self.found: list[RawMatch] = []
        self.ordered = True
        self.worst: tuple[int, int] | None = None  # once trimmed: the last one kept

    def add(self, start: int, end: int, env: Env) -> None:
        found = self.found
        if self.worst is not None and (start, -end) > self.worst:
            return  # after every one kept: not built at all
        if found and (start, -end) < (found[-1].start, -found[-1].end):
            self.ordered = False
        found.append(RawMatch(start, end, _captures(env)))
        if self.keep is not None and len(found) >= 2 * self.keep + 64:
            self._trim()

    def _trim(self) -> None:
        self._sort()
        del self.found[self.keep :]
        last = self.found[-1]
        self.worst = (last.start, -last.end)

    def _sort(self) -> None:
        if not self.ordered:
            self.found.sort(key=lambda m: (m.start, -m.end))
            self.ordered = True

    def in_order(self) -> list[RawMatch]:
        self._sort()
        return self.found if self.keep is None else self.found[: self.keep]


R = TypeVar("R")


def finish(steps: Generator[None, None, R]) -> R:
    """Run a generator of steps (a search job) to its end in one go; its return value."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def find_in_tree(
    pattern: Pattern, cq: CandidateQuery, root: Node, src: bytes, budget: Budget | None = None
) -> list[RawMatch]:
    """Every match in one parsed file, nested ones included, in file order."""
    out: list[RawMatch] = []
    finish(iter_tree(pattern, cq, root, src, out, budget))
    return out


class Positions:
    """1-based line and column (in characters) of byte offsets of one file.

    Lines come from a table of line starts made once per file; a column is decoded from
    the previous offset asked on the same line, so the matches of a multi-megabyte line,
    asked in file order, cost one pass over it instead of one pass each."""

    def __init__(self, src: bytes):
        self.src = src
        self._starts: list[int] | None = None
        self._last = (-1, 0, 0)  # offset, line, column of the last answer

    def _line_starts(self) -> list[int]:
        if self._starts is None:
            starts = [0]
            src = self.src
            i = src.find(b"\n")
            while i >= 0:
                starts.append(i + 1)
                i = src.find(b"\n", i + 1)
            self._starts = starts
        return self._starts

    def __call__(self, offset: int) -> tuple[int, int]:
        starts = self._line_starts()
        line = bisect.bisect_right(starts, offset)
        line_start = starts[line - 1]
        last_off, last_line, last_col = self._last
        if last_line == line and last_off <= offset:
            col = last_col + len(self.src[last_off:offset].decode("utf-8", "replace"))
        else:
            col = len(self.src[line_start:offset].decode("utf-8", "replace")) + 1
        self._last = (offset, line, col)
        return line, col


def capture_text(src: bytes, span: Span | list[Span]) -> str:
    if isinstance(span, list):
        if not span:
            return ""
        return src[span[0][0] : span[-1][1]].decode("utf-8", "replace")
    return src[span[0] : span[1]].decode("utf-8", "replace")


def match_at(path: str, src: bytes, m: RawMatch, positions: Positions | None = None) -> Match:
    """The public record of a match (ToolResult.data["matches"] items); pass one
    `positions` for all the records of a file."""
    pos = positions if positions is not None else Positions(src)
    sl, sc = pos(m.start)
    el, ec = pos(m.end)
    return Match(
        path=path,
        start_line=sl,
        start_col=sc,
        end_line=el,
        end_col=ec,
        text=src[m.start : m.end].decode("utf-8", "replace"),
        captures={k: capture_text(src, v) for k, v in m.captures.items()},
    )


def match_record(
    path: str, src: bytes, m: RawMatch, positions: Positions | None = None
) -> JSONObject:
    """`match_at` as a JSON object (its fields, by name)."""
    return plain(match_at(path, src, m, positions))


def search_source(
    pattern: Pattern | str, src: bytes | str, lang: str | None = None
) -> list[JSONObject]:
    """Search a string of code (tests, tools that already hold the text)."""
    if isinstance(pattern, str):
        assert lang is not None, "pass lang with a pattern source"
        pattern = compile_pattern(pattern, lang)
    data = src.encode() if isinstance(src, str) else src
    from tether.structural.languages import get_parser

    tree = get_parser(pattern.lang).parse(data)
    raw = find_in_tree(pattern, CandidateQuery(pattern), tree.root_node, data)
    pos = Positions(data)
    return [match_record("<source>", data, m, pos) for m in raw]


@dataclass
class FileResult:
    path: str
    source: bytes
    matches: list[RawMatch]  # in file order; the first `keep` of them when a search kept few
    total: int  # how many matched


BINARY_SNIFF = 8192  # bytes looked at for a NUL: text in any grammar has none


def is_binary(source: bytes) -> bool:
    return b"\0" in source[:BINARY_SNIFF]


def iter_search(
    pattern: Pattern,
    root: str,
    cache: ParseCache,
    results: list[FileResult],
    stats: dict[str, int],
    budget: Budget | None = None,
    *,
    shard: int = 0,
    nshards: int = 1,
    exclude: frozenset[str] = frozenset(),
    files: list[str] | None = None,
    keep: int | None = None,
) -> Iterator[None]:
    """Search every file of the pattern's language under `root` that falls in this shard,
    or, given `files` (this shard's share of a listing made once by the caller), those;
    append to `results` (at most `keep` matches per file, see `iter_tree`) and count in
    `stats`, yielding between candidates and files (a scheduler interleaves other searches
    there). BudgetExceeded when `budget` runs out."""
    cq = CandidateQuery(pattern)
    exts = extensions_of(pattern.lang)
    stats.update({"files": 0, "prefiltered": 0, "parsed": 0, "unreadable": 0, "binary": 0})
    parses = cache.parses
    listed = stat_files(files) if files is not None else iter_files(root, exts, exclude)
    for path, st in listed:
        if files is None and nshards > 1 and shard_of(path, nshards) != shard:
            continue
        stats["files"] += 1
        try:
            entry = cache.source(path, pattern.lang, st)
        except OSError:
            stats["unreadable"] += 1
            continue
        if is_binary(entry.source):
            stats["binary"] += 1
            continue
        if not passes_prefilter(entry.source, pattern.literals):
            continue
        stats["prefiltered"] += 1
        if budget is not None:
            budget.where = path
            budget.check()
        tree = yield from cache.tree_in_slices(path, pattern.lang, entry)
        stats["parsed"] = cache.parses - parses
        yield
        found: list[RawMatch] = []
        total = yield from iter_tree(pattern, cq, tree.root_node, entry.source, found, budget, keep)
        if total:
            results.append(FileResult(path, entry.source, found, total))


def search_paths(
    pattern: Pattern,
    root: str,
    cache: ParseCache,
    *,
    shard: int = 0,
    nshards: int = 1,
    exclude: frozenset[str] = frozenset(),
    files: list[str] | None = None,
) -> tuple[list[FileResult], dict[str, int]]:
    """`iter_search` run to the end, without a budget."""
    results: list[FileResult] = []
    stats: dict[str, int] = {}
    steps = iter_search(
        pattern, root, cache, results, stats,
        shard=shard, nshards=nshards, exclude=exclude, files=files,
    )  # fmt: skip
    for _ in steps:
        pass
    return results, stats


def search_dir(
    pattern: str, lang: str, root: str, cache: ParseCache | None = None
) -> list[JSONObject]:
    """Convenience: all match records under `root`, sorted by path and position."""
    p = compile_pattern(pattern, lang)
    results, _ = search_paths(p, os.fspath(root), cache if cache is not None else ParseCache())
    out = [
        match_at(r.path, r.source, m, pos)
        for r in results
        for pos in [Positions(r.source)]
        for m in r.matches
    ]
    out.sort(key=lambda d: (d.path, d.start_line, d.start_col))
    return [plain(m) for m in out]
