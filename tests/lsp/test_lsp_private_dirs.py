"""Nothing outside the workspace is written, whoever asks: a language server included.

Each server process gets a private scratch directory inside the runtime's own (0700) one,
with TMPDIR and the XDG cache/state/data homes (and GOCACHE) pointed into it, removed when
the server ends. Here HOME, TMPDIR and every XDG directory point at fresh empty directories
of the test before the runtime starts (the actors and the servers inherit them); real
servers answer real queries, a file is edited (diagnostics on write), and afterwards every
one of those directories is still empty and no scratch directory is left."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import psutil
import pytest
from lsp_support import copy_project, lsp_pids, need

from tests.conftest import shutdown_without_orphans, wait_until
from tests.outside_dirs import fresh_outside, written

pytestmark = pytest.mark.slow
_ids = itertools.count()

# per project: the server, then (file, line, symbol) to ask about, and an edit to make
CASES = {
    "python": (
        need("basedpyright-langserver"),
        [("shapes/report.py", None, None)],
        ("shapes/report.py",),
    ),
    "typescript": (
        need("typescript-language-server", "tsc"),
        [("src/report.ts", 4, "totalArea")],
        ("src/report.ts",),
    ),
    "c": (need("clangd"), [("main.c", 6, "square_area")], ("main.c",)),
    "go": (need("gopls", "go"), [("main.go", 11, "TotalArea")], ("main.go",)),
}


def _server_env(pid: int) -> dict[str, str]:
    return psutil.Process(pid).environ()


@pytest.mark.parametrize("project", [pytest.param(p, marks=CASES[p][0], id=p) for p in CASES])
def test_a_server_writes_nothing_outside_the_workspace(
    runtime_factory: Any,
    tether_state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    project: str,
) -> None:
    outside = fresh_outside(tmp_path, monkeypatch)
    root = copy_project(project, tmp_path / "ws")
    rt = runtime_factory(kind_modules=["tether.actors.language_server", "tether.actors.checker"])
    run = rt.open_run(f"private-{project}-{next(_ids)}", workdir=str(root))
    _, queries, (edited,) = CASES[project]
    for file, line, symbol in queries:
        r = run.call("lsp", {"action": "diagnostics", "file": file})
        assert not r.is_error, r.text
        if symbol:
            for action in ("hover", "references", "definition"):
                r = run.call(
                    "lsp", {"action": action, "file": file, "line": line, "symbol": symbol}
                )
                assert not r.is_error, r.text
        r = run.call("lsp", {"action": "symbols", "file": file})
        assert not r.is_error, r.text
    r = run.call("lsp", {"action": "diagnostics", "file": "*"})  # the project's checker too
    assert not r.is_error, r.text
    # each checker run had its own scratch, removed once the run ended
    wait_until(lambda: not list((tether_state_dir / "scratch").glob("*-checker-*")), timeout=10)
    text = (root / edited).read_text()
    r = run.call("write", {"path": edited, "content": text + "\n"})
    assert not r.is_error, r.text
    servers = lsp_pids(rt)
    assert servers, "the server is running"
    scratch = {Path(_server_env(pid)["TMPDIR"]).parent for pid in servers if pid in psutil.pids()}
    assert scratch and all(tether_state_dir in d.parents for d in scratch), scratch
    assert all(d.is_dir() for d in scratch)
    shutdown_without_orphans(rt)
    assert written(outside) == []  # HOME, TMPDIR, XDG dirs: nothing
    assert not any(d.exists() for d in scratch)  # the server's own scratch: gone with it
