"""`ParserActor`: one slot of the tree-sitter parser pool (resource kind "parser").

The pool is a few actor processes (parsing holds the GIL, so threads would not help),
each with its own parse cache. The tool handler fans a search out to every slot with a
shard index; files are assigned by a stable hash of their path, so a file always lands
in the same slot and hits that slot's cache on the next search, by any run.

ops: "search", "edit", "stats", "clear" (see `ops.py`). A bad pattern or language is a
`bad_request` with the compiler's message.
"""

from __future__ import annotations

from typing import Any

from tether.actors.base import ResourceActor
from tether.actors.structural.cache import DEFAULT_MAX_BYTES, ParseCache
from tether.actors.structural.languages import LanguageError
from tether.actors.structural.ops import op_clear, op_edit, op_search, op_stats
from tether.actors.structural.pattern import PatternError
from tether.actors.structural.rewrite import RewriteError
from tether.messages.calls import Call, ErrorCode

OPS = {"search": op_search, "edit": op_edit, "stats": op_stats, "clear": op_clear}


class ParserActor(ResourceActor):
    def on_start(self, key: str, config: dict[str, Any]) -> None:
        self.cache = ParseCache(int(config.get("cache_bytes", DEFAULT_MAX_BYTES)))
        self.calls = 0

    def on_call(self, call: Call) -> None:
        op = OPS.get(call.op)
        if op is None:
            self.fail(
                call,
                ErrorCode.BAD_REQUEST,
                f"parser has no op {call.op!r}; ops: {', '.join(OPS)}",
            )
            return
        self.calls += 1
        try:
            payload = op(self.cache, dict(call.args))
        except (PatternError, LanguageError, RewriteError) as exc:
            self.fail(call, ErrorCode.BAD_REQUEST, str(exc))
            return
        except (KeyError, TypeError, ValueError) as exc:
            self.fail(call, ErrorCode.BAD_REQUEST, f"parser {call.op!r}: bad arguments: {exc}")
            return
        self.reply(call, payload)

    def health_extra(self) -> dict[str, Any]:
        return {"calls": getattr(self, "calls", 0), "cache": self.cache.stats()}
