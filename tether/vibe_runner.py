"""Runs a Python-callable vibe worker in its own process (tether.tools.vibe_workers
CallableBackend): `python -m tether.vibe_runner module:function BRIEF`.

The function is called as `function(brief, worker)` and returns the result text (printed
last). `worker.progress(text)` shows progress while it runs; `worker.ask_permission(tool,
tier, arguments)` asks the parent run (its approval policy, then its human) and returns
True or False, with the reason in `worker.last_reason`; `worker.report_usage(tool_calls,
tokens)` reports its use so far (what its caps are checked against). Being a process, it
is killed like any other worker; an exception ends it with exit code 1 and the traceback on stderr.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping

from tether.json_types import JSONValue
from tether.messages.worker_ops import PROTOCOL_PREFIX


class WorkerIO:
    """What a callable worker gets besides its brief."""

    def __init__(self) -> None:
        self.worker_id = os.environ.get("TETHER_WORKER_ID", "")
        self.run_id = os.environ.get("TETHER_RUN_ID", "")
        self.last_reason = ""
        self._ids = itertools.count(1)

    def progress(self, text: str) -> None:
        print(text, flush=True)

    def report_usage(self, tool_calls: int | None = None, tokens: int | None = None) -> None:
        """Its tool calls and tokens so far in this run (cumulative); a cap may stop it."""
        usage = {k: v for k, v in (("tool_calls", tool_calls), ("tokens", tokens)) if v is not None}
        print(PROTOCOL_PREFIX + json.dumps({"usage": usage}), flush=True)

    def ask_permission(
        self, tool: str, tier: str = "", arguments: Mapping[str, JSONValue] | None = None
    ) -> bool:
        ask = {
            "id": next(self._ids),
            "tool": tool,
            "tier": tier,
            "arguments": dict(arguments or {}),
        }
        print(PROTOCOL_PREFIX + json.dumps({"permission": ask}), flush=True)
        line = sys.stdin.readline()
        try:
            answer = json.loads(line)
        except ValueError:
            answer = {"allow": False, "reason": "no answer from the parent (end of input)"}
        self.last_reason = str(answer.get("reason", ""))
        return bool(answer.get("allow"))


def load(target: str) -> Callable[[str, WorkerIO], object]:
    """The worker function `target` names ("module:function", the function's name dotted
    when it is an attribute of an attribute), called with the brief and a WorkerIO."""
    module_name, _, attr = target.partition(":")
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target} is not callable: {type(obj).__name__}")
    return obj


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tether.vibe_runner module:function BRIEF", file=sys.stderr)
        return 2
    target, brief = argv
    try:
        result = load(target)(brief, WorkerIO())
    except Exception:
        traceback.print_exc()
        return 1
    if result is not None:
        print(result, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
