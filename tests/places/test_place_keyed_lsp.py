"""Language servers and the project checker are keyed by place: runs on one root with the
same place share one server; a sandboxed run gets its own, running in the sandbox."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import health_node, shutdown_without_orphans
from tests.lsp.lsp_support import copy_project
from tests.places.test_places import needs_sandbox
from tether.runtime import Runtime

pytestmark = [
    needs_sandbox,
    pytest.mark.skipif(shutil.which("basedpyright-langserver") is None, reason="basedpyright"),
]


def servers(health: dict[str, Any]) -> list[str]:
    node = health_node(health, "supervisor:language_server") or {}
    return sorted(c["name"] for c in node.get("children", []))


def test_runs_share_a_server_per_place_and_the_sandboxed_one_works(tmp_path: Path) -> None:
    root = copy_project("python", tmp_path / "py")
    rt = Runtime.start()
    try:
        runs = [
            rt.open_run("h1", workdir=root),
            rt.open_run("h2", workdir=root),
            rt.open_run("s1", workdir=root, place="sandbox"),
            rt.open_run("s2", workdir=root, place="sandbox"),
        ]
        args = {"action": "hover", "file": "shapes/report.py", "line": 4, "symbol": "total_area"}
        hovers = [run.call("lsp", args) for run in runs]
        assert all(not h.is_error for h in hovers), [h.text for h in hovers]
        assert len({h.data["hover"] for h in hovers}) == 1 and hovers[0].data["hover"]
        names = servers(rt.health())
        assert len(names) == 2, names  # one per place policy, each shared by its two runs
        boxed = [n for n in names if "@sandbox-" in n]
        assert len(boxed) == 1, names
        node = health_node(rt.health(), boxed[0]) or {}
        assert node["place"] == "sandbox (bubblewrap, network off)", node
        host = health_node(rt.health(), next(n for n in names if n not in boxed)) or {}
        assert host["place"] == "host", host
        cmds = " ".join(p["cmd"] for p in node.get("pids", []))
        assert "bwrap" in cmds or "tether-join" in cmds or "sh" in cmds, node.get("pids")
        check = runs[2].call("lsp", {"action": "diagnostics", "file": "*"})
        assert not check.is_error and "basedpyright" in check.text, check.text
        checkers = health_node(rt.health(), "supervisor:checker") or {}
        assert any("@sandbox-" in c["name"] for c in checkers.get("children", [])), checkers
    finally:
        shutdown_without_orphans(rt)
