"""Helpers of the debug tests: call the tool, find the session's processes."""

from __future__ import annotations

from typing import Any

import psutil

from tests.conftest import health_node


def ok(run: Any, args: dict[str, Any]) -> Any:
    res = run.call("debug", args)
    assert not res.is_error, res.text
    return res


def err(run: Any, args: dict[str, Any]) -> Any:
    res = run.call("debug", args)
    assert res.is_error, res.text
    return res


def session_pids(rt: Any, run_id: str) -> list[int]:
    node = health_node(rt.health(), f"run:{run_id}/debug_session:session") or {}
    return [p["pid"] for p in node.get("pids", [])[1:] if p.get("alive")]


def gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True
