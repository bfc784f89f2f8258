"""Python-callable vibe workers (CallableBackend) for the tests."""

from __future__ import annotations

import sys
from typing import Any


def review(brief: str, worker: Any) -> str:
    worker.progress(f"reviewing: {brief}")
    allowed = worker.ask_permission("write", tier="write", arguments={"path": "notes.md"})
    worker.progress(f"write {'allowed' if allowed else 'denied'}: {worker.last_reason}")
    return f"reviewed {len(brief)} chars"


def broken(brief: str, worker: Any) -> str:
    raise RuntimeError("the callable worker broke")


def busy(brief: str, worker: Any) -> str:
    """Reports one more tool call per step; after its third it waits (for a tool's answer
    that never comes), so only a cap ends it."""
    for n in (1, 2, 3):
        worker.progress(f"call {n}")
        worker.report_usage(tool_calls=n, tokens=100 * n)
    sys.stdin.readline()
    return "never"
