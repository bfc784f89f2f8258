"""Search one file or a tree of files: prefilter, parse (cached), query, confirm.

Plain functions, callable without actors: the parser actor wraps them, tests and the
benchmark call them directly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from tether.structural.cache import ParseCache
from tether.structural.languages import extensions_of
from tether.structural.matcher import Env, match_at
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


def find_in_tree(pattern: Pattern, cq: CandidateQuery, root: Node, src: bytes) -> list[RawMatch]:
    """Every match in one parsed file, nested ones included, in file order."""
    out: list[RawMatch] = []
    for node in cq.candidates(root, src):
        r = match_at(pattern, node, src)
        if r is None:
            continue
        env, first, last = r
        out.append(RawMatch(first.start_byte, last.end_byte, _captures(env)))
    out.sort(key=lambda m: (m.start, -m.end))
    return out


def _position(src: bytes, offset: int) -> tuple[int, int]:
    """1-based line and 1-based column in characters."""
    line_start = src.rfind(b"\n", 0, offset) + 1
    line = src.count(b"\n", 0, offset) + 1
    col = len(src[line_start:offset].decode("utf-8", "replace")) + 1
    return line, col


def capture_text(src: bytes, span: Span | list[Span]) -> str:
    if isinstance(span, list):
        if not span:
            return ""
        return src[span[0][0] : span[-1][1]].decode("utf-8", "replace")
    return src[span[0] : span[1]].decode("utf-8", "replace")


def match_record(path: str, src: bytes, m: RawMatch) -> dict[str, Any]:
    """The public record of a match (ToolResult.data["matches"] items)."""
    sl, sc = _position(src, m.start)
    el, ec = _position(src, m.end)
    return {
        "path": path,
        "start_line": sl,
        "start_col": sc,
        "end_line": el,
        "end_col": ec,
        "text": src[m.start : m.end].decode("utf-8", "replace"),
        "captures": {k: capture_text(src, v) for k, v in m.captures.items()},
    }


def search_source(pattern: Pattern | str, src: bytes | str, lang: str | None = None) -> list[dict]:
    """Search a string of code (tests, tools that already hold the text)."""
    if isinstance(pattern, str):
        assert lang is not None, "pass lang with a pattern source"
        pattern = compile_pattern(pattern, lang)
    data = src.encode() if isinstance(src, str) else src
    from tether.structural.languages import get_parser

    tree = get_parser(pattern.lang).parse(data)
    raw = find_in_tree(pattern, CandidateQuery(pattern), tree.root_node, data)
    return [match_record("<source>", data, m) for m in raw]


@dataclass
class FileResult:
    path: str
    source: bytes
    matches: list[RawMatch]


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
    """Search every file of the pattern's language under `root` that falls in this shard,
    or, given `files` (this shard's share of a listing made once by the caller), those."""
    cq = CandidateQuery(pattern)
    exts = extensions_of(pattern.lang)
    results: list[FileResult] = []
    stats = {"files": 0, "prefiltered": 0, "parsed": 0, "unreadable": 0}
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
        if not passes_prefilter(entry.source, pattern.literals):
            continue
        stats["prefiltered"] += 1
        tree = cache.tree(path, pattern.lang, entry)
        found = find_in_tree(pattern, cq, tree.root_node, entry.source)
        if found:
            results.append(FileResult(path, entry.source, found))
    stats["parsed"] = cache.parses
    return results, stats


def search_dir(
    pattern: str, lang: str, root: str, cache: ParseCache | None = None, **kw: Any
) -> list[dict]:
    """Convenience: all match records under `root`, sorted by path and position."""
    p = compile_pattern(pattern, lang)
    results, _ = search_paths(
        p, os.fspath(root), cache if cache is not None else ParseCache(), **kw
    )
    out = [match_record(r.path, r.source, m) for r in results for m in r.matches]
    out.sort(key=lambda d: (d["path"], d["start_line"], d["start_col"]))
    return out
