"""Parse cache: file -> (source, tree), keyed on path, mtime and size, with a memory bound.

Lives in a parser actor process, so it is shared by every run of the runtime on that
workdir (files are sharded to actors by a stable hash: the same file always lands in the
same actor's cache). A tree-sitter tree costs about 28 bytes of memory per byte of source
(measured on CPython's standard library: 837 MiB of trees for 30 MiB of code), so the
bound is on that estimate, least recently used first out.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Generator
from dataclasses import dataclass

from tree_sitter import Parser, Tree

from tether.structural.languages import get_language, get_parser

TREE_BYTES_PER_SOURCE_BYTE = 28
DEFAULT_MAX_BYTES = 768 * 2**20
SLICED_PARSE_BYTES = 256 * 1024  # files above this are parsed in slices (tree_in_slices)
PARSE_SLICE = 0.02  # seconds of parsing between yields


@dataclass
class Entry:
    mtime_ns: int
    size: int
    source: bytes
    tree: Tree | None  # None until a pattern needed it parsed

    @property
    def cost(self) -> int:
        tree = self.size * TREE_BYTES_PER_SOURCE_BYTE if self.tree is not None else 0
        return self.size + tree + 256


class _Halt:
    """A tree-sitter progress callback that halts the parse once `until` is past."""

    def __init__(self) -> None:
        self.until = 0.0
        self.halted = False

    def __call__(self, *_state: object) -> bool:
        self.halted = time.monotonic() > self.until
        return self.halted


class ParseCache:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], Entry] = OrderedDict()
        self.used = 0
        self.hits = 0
        self.misses = 0
        self.parses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def _put(self, key: tuple[str, str], entry: Entry) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.used -= old.cost
        self._entries[key] = entry
        self.used += entry.cost
        while self.used > self.max_bytes and len(self._entries) > 1:
            _, dropped = self._entries.popitem(last=False)
            self.used -= dropped.cost

    def source(self, path: str, lang: str, st: os.stat_result | None = None) -> Entry:
        """The file's bytes (cached while mtime and size are unchanged); OSError if unreadable."""
        if st is None:
            st = os.stat(path)
        key = (path, lang)
        e = self._entries.get(key)
        if e is not None and e.mtime_ns == st.st_mtime_ns and e.size == st.st_size:
            self._entries.move_to_end(key)
            self.hits += 1
            return e
        self.misses += 1
        with open(path, "rb") as f:
            data = f.read()
        e = Entry(st.st_mtime_ns, len(data), data, None)
        self._put(key, e)
        return e

    def tree(self, path: str, lang: str, entry: Entry) -> Tree:
        """The entry's parse tree, parsing (and accounting for it) on first need."""
        if entry.tree is None:
            self._store(path, lang, entry, get_parser(lang).parse(entry.source))
        assert entry.tree is not None
        return entry.tree

    def tree_in_slices(self, path: str, lang: str, entry: Entry) -> Generator[None, None, Tree]:
        """`tree`, yielding every PARSE_SLICE seconds while a big file is parsed, so the
        parser slot serves other searches in between (one parse of a 2 MB line is seconds
        of C that nothing could interrupt). A halted tree-sitter parse resumes where it
        stopped on the next call with the same parser, so each big parse gets its own."""
        if entry.tree is None and entry.size > SLICED_PARSE_BYTES:
            parser = Parser(get_language(lang))
            source = entry.source

            def read(offset: int, _point: object) -> bytes:
                return source[offset : offset + 65536]

            halt = _Halt()
            tree: Tree | None = None
            while tree is None:
                halt.until = time.monotonic() + PARSE_SLICE
                try:
                    tree = parser.parse(read, progress_callback=halt)
                except ValueError:  # "Parsing failed": halted by us, or a real failure
                    if not halt.halted:
                        raise
                    yield
            if entry.tree is None:
                self._store(path, lang, entry, tree)
        return self.tree(path, lang, entry)

    def _store(self, path: str, lang: str, entry: Entry, tree: Tree) -> None:
        if entry.tree is None:
            entry.tree = tree
            self.parses += 1
            key = (path, lang)
            if key in self._entries:
                self.used += entry.size * TREE_BYTES_PER_SOURCE_BYTE
                self._entries.move_to_end(key)
                while self.used > self.max_bytes and len(self._entries) > 1:
                    k, dropped = self._entries.popitem(last=False)
                    self.used -= dropped.cost
                    if k == key:  # never evict the entry being used right now
                        self._entries[k] = dropped
                        self.used += dropped.cost
                        break

    def clear(self) -> None:
        self._entries.clear()
        self.used = 0

    def stats(self) -> dict[str, int]:
        return {
            "files": len(self._entries),
            "trees": sum(1 for e in self._entries.values() if e.tree is not None),
            "bytes": self.used,
            "max_bytes": self.max_bytes,
            "hits": self.hits,
            "misses": self.misses,
            "parses": self.parses,
        }
