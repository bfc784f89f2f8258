"""Python-callable vibe workers (CallableBackend) for the tests."""

from __future__ import annotations

from typing import Any


def review(brief: str, worker: Any) -> str:
    worker.progress(f"reviewing: {brief}")
    allowed = worker.ask_permission("write", tier="write", arguments={"path": "notes.md"})
    worker.progress(f"write {'allowed' if allowed else 'denied'}: {worker.last_reason}")
    return f"reviewed {len(brief)} chars"


def broken(brief: str, worker: Any) -> str:
    raise RuntimeError("the callable worker broke")
