"""The other language servers and lldb-dap in a sandbox place: typescript-language-server,
gopls and clangd each answer a hover, and lldb-dap stops a C program at a breakpoint, each
running in bubblewrap (their place in the health tree and `lsp status`). basedpyright,
debugpy and delve have their own sandbox tests (test_place_keyed_lsp, test_sandboxed_debug,
test_relay)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gone, health_node, wait_until
from tests.debug.conftest import c_project  # noqa: F401 - a fixture
from tests.debug.support import ok, session_pids
from tests.lsp.lsp_support import copy_project, health_nodes, need
from tests.places.test_places import needs_sandbox

pytestmark = [pytest.mark.slow, needs_sandbox]
BOXED = "sandbox (bubblewrap, network off)"
BWRAP = shutil.which("bwrap") or "bwrap"

HOVERS = [
    pytest.param(
        "typescript",
        dict(file="src/report.ts", line=4, symbol="totalArea"),
        "function totalArea(shapes: Shape[]): number",
        marks=need("typescript-language-server"),
        id="typescript-language-server",
    ),
    pytest.param(
        "go",
        dict(file="main.go", line=11, symbol="TotalArea"),
        "func geo.TotalArea(shapes []geo.Shape) float64",
        marks=need("gopls", "go"),
        id="gopls",
    ),
    pytest.param(
        "c",
        dict(file="main.c", line=6, symbol="square_area"),
        "The area of a square.",
        marks=need("clangd"),
        id="clangd",
    ),
]


def in_a_namespace_of_its_own(pid: int) -> bool | None:
    """Whether the process has a user and a network namespace other than the runtime's
    (bwrap's); None when it is gone (a short-lived child the health view caught)."""
    try:
        return all(
            os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}")
            for ns in ("user", "net")
        )
    except FileNotFoundError:
        return None


@pytest.mark.parametrize(("project", "args", "says"), HOVERS)
def test_a_sandboxed_server_answers_a_hover(
    runtime: Any, tmp_path: Path, project: str, args: dict, says: str
) -> None:
    root = copy_project(project, tmp_path)
    run = runtime.open_run("s", workdir=root, place="sandbox")
    hover = run.call("lsp", {"action": "hover", **args})
    assert not hover.is_error and says in hover.text, hover.text
    (server,) = health_nodes(runtime)
    assert "@sandbox-" in server["name"] and server["place"] == BOXED, server
    procs = server.get("pids", [])
    assert any(p["cmd"].startswith(BWRAP) for p in procs), procs
    served = [p for p in procs if not p["cmd"].startswith(("tether:", BWRAP))]
    seen = [in_a_namespace_of_its_own(p["pid"]) for p in served]
    assert True in seen and False not in seen, served
    status = run.call("lsp", {"action": "status"})
    (row,) = status.data["running"]
    assert row["place"] == BOXED and status.data["place"] == BOXED, status.data


def test_lldb_dap_in_a_sandbox_stops_a_c_program_at_a_breakpoint(
    runtime: Any,
    c_project: Path,  # noqa: F811
) -> None:
    run = runtime.open_run("c", workdir=str(c_project), place="sandbox")
    ok(run, {"op": "breakpoints", "file": "prog.c", "lines": [4]})
    res = ok(run, {"op": "launch", "program": "prog"})
    assert res.text.startswith("stopped at prog.c:4 (breakpoint)"), res.text
    assert "a (int) = 1" in res.text and "b (int) = 2" in res.text, res.text
    node = health_node(runtime.health(), "run:c/debug_session:session")
    assert node is not None and node["place"] == BOXED, node
    uid = ok(run, {"op": "evaluate", "expression": "(int)getuid()"}).data["value"]
    assert uid == "1000", uid  # (the sandbox's uid, not the runtime's)
    pids = session_pids(runtime, "c")
    done = ok(run, {"op": "continue"})
    assert done.data["outcome"] == "exited" and done.data["exit_code"] == 3, done.text
    assert "hello 3" in done.text, done.text
    run.close()
    assert wait_until(lambda: gone(pids), 10)
