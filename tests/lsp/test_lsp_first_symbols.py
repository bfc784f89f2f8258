"""The first `symbols` query on a fresh server finds the project's own symbols.

basedpyright answers workspace/symbol with [] until it has listed the workspace's files, and
tsserver answers "No Project" until one of its files is open: the session waits for the
former (its "Found N source files" log) and opens one file of the root for the latter.
Each test module gets its own runtime (`lsp_rt`) and each case a fresh copy of its project,
so the server is started by the query itself.
"""

from __future__ import annotations

import itertools

import pytest
from lsp_support import copy_project, lsp_rt, need  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow
_ids = itertools.count()

FIRST = [
    pytest.param("python", "basedpyright", "Circle", "shapes/base.py:22: class Circle", marks=need("basedpyright-langserver")),
    pytest.param("typescript", "typescript-language-server", "Circle", "src/shapes.ts:13: class Circle", marks=need("typescript-language-server")),
]  # fmt: skip


@pytest.mark.parametrize("project, server, query, expected", FIRST)
def test_first_symbols_query_finds_the_project_symbol(
    lsp_rt,  # noqa: F811 - the fixture
    tmp_path,
    project,
    server,
    query,
    expected,
):
    root = copy_project(project, tmp_path)
    run = lsp_rt.open_run(f"first-{server}-{next(_ids)}", workdir=str(root))
    try:
        r = run.call("lsp", {"action": "symbols", "query": query})
        assert not r.is_error, r.text
        assert expected in r.text, r.text
        assert "No Project" not in r.text and "none found" not in r.text, r.text
    finally:
        run.close()


def test_sample_file_is_shallowest_then_by_name_and_skips_vendored(tmp_path):
    from tether.actors.language_server.servers import BY_NAME, sample_file

    row = BY_NAME["typescript-language-server"]
    (tmp_path / "node_modules" / "x").mkdir(parents=True)
    (tmp_path / "node_modules" / "a.ts").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "a.ts").write_text("")
    (tmp_path / "types.d.ts").write_text("")
    (tmp_path / "web" / "deep").mkdir(parents=True)
    (tmp_path / "web" / "deep" / "a.ts").write_text("")
    (tmp_path / "web" / "z.ts").write_text("")
    (tmp_path / "web" / "b.ts").write_text("")
    assert sample_file(row, tmp_path) == tmp_path / "web" / "b.ts"
    assert sample_file(BY_NAME["gopls"], tmp_path) is None
    assert sample_file(row, tmp_path, limit=3) is None  # bounded walk
