"""The parser pool's operations as plain functions: search and edit one shard of a tree.

`ParserActor` calls these with its own parse cache and the op it was sent
(`tether.messages.parser_ops`); tests, the benchmark and the tool's in-process fallback
call them directly. Results are the ops' declared replies (`tether.messages.parser_ops`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Generator
from typing import TypeVar

from tree_sitter import Node, Tree

from tether.messages.parser_ops import (
    DroppedReply,
    Edit,
    EditReply,
    Index,
    Match,
    ProposedFile,
    Search,
    SearchReply,
    Sharded,
)
from tether.structural.budget import DEFAULT_NODE_STEPS, DEFAULT_SECONDS, DEFAULT_STEPS, Budget
from tether.structural.cache import SLICED_PARSE_BYTES, ParseCache
from tether.structural.languages import EXTENSIONS, extensions_of, get_parser, normalize
from tether.structural.pattern import compile_pattern
from tether.structural.query import CandidateQuery
from tether.structural.rewrite import apply
from tether.structural.scan import iter_files, list_files, shard_of
from tether.structural.search import (
    FileResult,
    Positions,
    find_in_tree,
    finish,
    is_binary,
    iter_search,
    match_at,
)
from tether.structural.staging import digest

S = TypeVar("S", bound=Sharded)


def split_work(op: S, nshards: int, listed: list[str] | None = None) -> list[S]:
    """Each pool slot's share of one search, edit or index over `op.root`.

    The file listing is made here, once, by the caller that fans the work out, and each
    slot gets the paths (relative to the root) that hash to it, instead of every slot
    listing the whole tree again in its message handler. `listed`: git's listing of the
    root (absolute paths, as the runtime's "git" actor gives it), or None to list here
    (`scan.list_files`). A root that is one file needs no listing: each slot checks
    whether it is its own.
    """
    shares = [dataclasses.replace(op, shard=i, nshards=nshards) for i in range(nshards)]
    if not os.path.isdir(op.root):
        return shares
    prefix = os.path.join(op.root, "")
    files: list[list[str]] = [[] for _ in range(nshards)]
    for path in list_files(op.root, op_extensions(op), frozenset(op.exclude), listed):
        files[shard_of(path, nshards)].append(path[len(prefix) :])
    return [
        dataclasses.replace(share, files=mine) for share, mine in zip(shares, files, strict=True)
    ]


def has_work(share: Sharded) -> bool:
    """Whether a slot's share (from `split_work`) holds anything to do: a share listed
    with no files, or a one-file root that hashes to another slot, needs no call - so a
    search of one file or a small directory does not wait on a slot busy with another
    run's work."""
    if share.files is not None:
        return bool(share.files)
    if share.nshards > 1 and os.path.isfile(share.root):
        return shard_of(share.root, share.nshards) == share.shard
    return True


def op_extensions(op: Sharded) -> frozenset[str]:
    """The file extensions `op` reads: its language's, or for an index every language a
    grammar claims (or only `languages`)."""
    match op:
        case Index():
            return _index_extensions(op)
        case Search(lang=lang) | Edit(lang=lang):
            return extensions_of(lang)
        case _:
            raise TypeError(f"no files to list for {type(op).__name__}")


def _index_extensions(op: Index) -> frozenset[str]:
    wanted = {normalize(lg) for lg in op.languages}
    return frozenset(ext for ext, lg in EXTENSIONS.items() if not wanted or lg in wanted)


def _files(op: Sharded) -> list[str] | None:
    """This slot's share of the listing (see `split_work`) as paths, if it was given one."""
    if op.files is None:
        return None
    return [os.path.join(op.root, f) for f in op.files]


Job = Generator[None, None, SearchReply | EditReply]


def budget_of(op: Search | Edit) -> Budget:
    """The budget a search or edit runs under: `budget_s` seconds, `budget_steps` matcher
    steps and `budget_node_steps` per candidate when the caller set them, else the
    defaults."""
    return Budget(
        op.budget_s or DEFAULT_SECONDS,
        op.budget_steps or DEFAULT_STEPS,
        op.budget_node_steps or DEFAULT_NODE_STEPS,
    )


def search_job(
    cache: ParseCache, op: Search, budget: Budget, stats: dict[str, int]
) -> Generator[None, None, SearchReply]:
    """A generator (it yields between candidates; see `iter_search`) returning the first
    `limit` match records of this shard in path order, the total and the file counts.
    `stats` is filled as the search goes (`stats["files"]`: files scanned so far), so the
    caller that keeps it can say how far a running search got (the parser's Stats op)."""
    pattern = compile_pattern(op.pattern, op.lang)
    results: list[FileResult] = []
    limit = op.limit
    yield from iter_search(
        pattern, op.root, cache, results, stats, budget, keep=limit,
        shard=op.shard, nshards=op.nshards, exclude=frozenset(op.exclude), files=_files(op),
    )  # fmt: skip
    results.sort(key=lambda r: r.path)
    total = sum(r.total for r in results)
    records: list[Match] = []
    for r in results:
        pos = Positions(r.source)
        for m in r.matches[: limit - len(records)]:
            records.append(match_at(r.path, r.source, m, pos))
        if len(records) >= limit:
            break
    return SearchReply(matches=records, total=total, files=len(results), stats=stats)


def op_search(cache: ParseCache, op: Search) -> SearchReply:
    return finish(search_job(cache, op, budget_of(op), {}))


def _error_count(node: Node) -> int:
    n = 0
    stack = [node]
    while stack:
        x = stack.pop()
        if not x.has_error:
            continue
        if x.is_error or x.is_missing:
            n += 1
        stack.extend(x.children)
    return n


def _first_error_line(node: Node) -> int:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.is_error or n.is_missing:
            return n.start_point[0] + 1
        if n.has_error:
            stack.extend(reversed(n.children))
    return 0


def syntax_flag(lang: str, old_tree: Tree, new: bytes) -> str:
    """'' when the rewrite parses as well as the original did, else where it broke."""
    new_tree = get_parser(lang).parse(new)
    if not new_tree.root_node.has_error:
        return ""
    if _error_count(new_tree.root_node) <= _error_count(old_tree.root_node):
        return ""
    line = _first_error_line(new_tree.root_node)
    return f"the rewritten file does not parse as {lang} (first error at line {line})"


def edit_job(
    cache: ParseCache, op: Edit, budget: Budget, stats: dict[str, int]
) -> Generator[None, None, EditReply]:
    """A generator returning, per file of this shard with matches: path, old_hash, new
    content, replacements, syntax (what broke, if the rewrite does not parse); `stats`
    counts as in `search_job`."""
    lang = op.lang
    pattern = compile_pattern(op.pattern, lang)
    results: list[FileResult] = []
    yield from iter_search(
        pattern, op.root, cache, results, stats, budget,
        shard=op.shard, nshards=op.nshards, exclude=frozenset(op.exclude), files=_files(op),
    )  # fmt: skip
    files: list[ProposedFile] = []
    for r in sorted(results, key=lambda r: r.path):
        source = r.source
        with open(r.path, "rb") as fh:
            fresh = fh.read()
        tree = get_parser(lang).parse(source)
        matches = r.matches
        if fresh != source:  # changed under the cache within one mtime tick: redo it fresh
            source = fresh
            tree = get_parser(lang).parse(source)
            matches = find_in_tree(pattern, CandidateQuery(pattern), tree.root_node, source, budget)
            if not matches:
                continue
        new, count = apply(op.rewrite, source, matches)
        if new == source:
            continue
        files.append(
            ProposedFile(
                path=r.path,
                old_hash=digest(source),
                new=new,
                replacements=count,
                syntax=syntax_flag(lang, tree, new),
            )
        )
        yield
    return EditReply(files=files, total=sum(f.replacements for f in files))


def op_edit(cache: ParseCache, op: Edit) -> EditReply:
    return finish(edit_job(cache, op, budget_of(op), {}))


def plan_index(op: Index) -> list[tuple[str, str]]:
    """(path, language) of every file of this shard under `root` that a grammar claims
    (optionally only `languages`), capped at `max_files`; given `files` (see `split_work`),
    of those."""
    cap = op.max_files
    out: list[tuple[str, str]] = []
    given = _files(op)
    listed = (
        given
        if given is not None
        else (p for p, _ in iter_files(op.root, _index_extensions(op), frozenset(op.exclude)))
    )
    for path in listed:
        if given is None and op.nshards > 1 and shard_of(path, op.nshards) != op.shard:
            continue
        dot = path.rfind(".")
        lang = EXTENSIONS.get(path[dot + 1 :].lower())
        if lang is not None:
            out.append((path, lang))
            if len(out) >= cap:
                break
    return out


# Bigger files are parsed when a search needs them, in slices (`ParseCache.tree_in_slices`):
# an index chunk parses whole files, and a 512 KiB one held the slot ~0.15 s (more on a
# loaded machine) while another run's search waited.
INDEX_MAX_FILE_BYTES = SLICED_PARSE_BYTES


def index_some(
    cache: ParseCache, queue: list[tuple[str, str]], budget: int, seconds: float = 0.05
) -> int:
    """Parse up to `budget` queued files into the cache, for at most about `seconds`
    (stops early when the cache is full). Background work must not hold a slot: a file
    over INDEX_MAX_FILE_BYTES (one parse of a 2 MB file is a second of uninterruptible C)
    is left for the search that needs it."""
    done = 0
    until = time.monotonic() + seconds
    while queue and done < budget and time.monotonic() < until:
        path, lang = queue.pop()
        if cache.used >= cache.max_bytes * 0.9:
            queue.clear()  # the cache is full: indexing more would only evict
            break
        try:
            if os.stat(path).st_size > INDEX_MAX_FILE_BYTES:
                continue
            entry = cache.source(path, lang)
        except OSError:
            continue
        if is_binary(entry.source):
            continue
        cache.tree(path, lang, entry)
        done += 1
    return done


def op_clear(cache: ParseCache) -> DroppedReply:
    """Drop every cached file and tree (benchmarks measure cold searches with it)."""
    dropped = len(cache)
    cache.clear()
    return DroppedReply(dropped)
