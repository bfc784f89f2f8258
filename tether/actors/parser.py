"""`ParserActor`: one slot of the tree-sitter parser pool (resource kind "parser").

The pool is a few actor processes (parsing holds the GIL, so threads would not help),
each with its own parse cache. The tool handler fans a search out to every slot with a
shard index; files are assigned by a stable hash of their path, so a file always lands
in the same slot and hits that slot's cache on the next search, by any run.

ops: `PARSER` (`tether.messages.parser_ops`): search, edit, stats, clear (run by
`tether.structural.ops`) and index (parse a workspace in the background, a chunk per timer
tick, so searches interleave). A bad pattern or language is a `bad_request` with the
compiler's message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tether.actors.base import ResourceActor
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import Call, ErrorCode
from tether.messages.parser_ops import PARSER, Clear, Edit, Index, Search, Stats
from tether.structural.cache import DEFAULT_MAX_BYTES, ParseCache
from tether.structural.languages import LanguageError
from tether.structural.ops import index_some, op_clear, op_edit, op_search, plan_index
from tether.structural.pattern import PatternError
from tether.structural.rewrite import RewriteError

INDEX_CHUNK = 16  # files parsed per timer tick while indexing (calls interleave)


@dataclass(frozen=True)
class IndexTick:
    """Timer tag: parse the next chunk of the index queue."""


class ParserActor(ResourceActor):
    def on_start(self, key: str, config: dict[str, Any]) -> None:
        self.cache = ParseCache(int(config.get("cache_bytes", DEFAULT_MAX_BYTES)))
        self.calls = 0
        self.index_queue: list[tuple[str, str]] = []
        self.indexed = 0

    def on_timer(self, tag: Any) -> None:
        match tag:
            case IndexTick():
                self.indexed += index_some(self.cache, self.index_queue, INDEX_CHUNK)
                if self.index_queue:
                    self.after(0.001, IndexTick())

    def _index(self, op: Index) -> dict[str, Any]:
        """Parse this shard of a workspace in the background, a chunk per timer tick, so
        the first search of a run finds warm trees; searches are served in between."""
        planned = plan_index(op)
        idle = not self.index_queue
        self.index_queue = planned[::-1] + self.index_queue
        if idle and self.index_queue:
            self.after(0.001, IndexTick())
        return {"queued": len(planned)}

    def on_call(self, call: Call) -> None:
        op = PARSER.parse(call)
        self.calls += 1
        try:
            match op:
                case Search():
                    payload = op_search(self.cache, op)
                case Edit():
                    payload = op_edit(self.cache, op)
                case Index():
                    payload = self._index(op)
                case Stats():
                    payload = self.cache.stats()
                case Clear():
                    payload = op_clear(self.cache)
        except (PatternError, LanguageError, RewriteError) as exc:
            self.fail(call, ErrorCode.BAD_REQUEST, str(exc))
            return
        self.reply(call, payload)

    def health_extra(self) -> dict[str, Any]:
        return {
            "calls": getattr(self, "calls", 0),
            "cache": self.cache.stats(),
            "indexing": len(getattr(self, "index_queue", ())),
            "indexed": getattr(self, "indexed", 0),
        }


POOL_SIZE = max(1, min(4, os.cpu_count() or 1))
POOL_KEYS = [str(i) for i in range(POOL_SIZE)]

KINDS: list[KindSpec] = [
    KindSpec(
        "parser",
        "tether.actors.parser:ParserActor",
        Scope.SHARED,
        ChildSpec(Restart.PERMANENT, max_restarts=5, period=60.0, backoff_initial=0.05),
        config={"keys": POOL_KEYS},
    ),
]
