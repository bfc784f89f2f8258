"""The lsp tools against a real basedpyright through a real runtime (tests/lsp/projects/python)."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pytest
from lsp_support import copy_project, health_nodes, lsp_rt, need  # noqa: F401 - fixtures

pytestmark = [pytest.mark.slow, need("basedpyright-langserver", "basedpyright")]
_ids = itertools.count()


@pytest.fixture(scope="module")
def py(lsp_rt, tmp_path_factory):  # noqa: F811
    root = copy_project("python", tmp_path_factory.mktemp("py"))
    run = lsp_rt.open_run(f"py-{next(_ids)}", workdir=str(root))
    yield run
    run.close()


def fresh_run(rt, tmp_path):
    root = copy_project("python", tmp_path)
    return rt.open_run(f"py-{next(_ids)}", workdir=str(root)), root


def warm_run(rt, tmp_path):
    """A fresh run whose server has started and checked a file: a write's diagnostics are
    then waited for under WRITE_CAP alone, not behind a cold server's first analysis of the
    project (which under a full run's load can take longer than the cap: "pending")."""
    run, root = fresh_run(rt, tmp_path)
    r = lsp(run, action="diagnostics", file="shapes/base.py")
    assert not r.is_error, r.text
    return run, root


def lsp(run, **args):
    return run.call("lsp", args)


# --- queries ------------------------------------------------------------------------------------


def test_hover_is_signature_and_doc(py):
    r = lsp(py, action="hover", file="shapes/report.py", line=4, symbol="total_area")
    assert not r.is_error, r.text
    assert "def total_area(shapes: list[Shape]) -> float" in r.text and "Sum of the areas" in r.text
    assert r.data["hover"].startswith("```python")


def test_hover_after_an_emoji_maps_utf16(py):
    r = lsp(py, action="hover", file="shapes/report.py", line=10, symbol="area")
    assert "(method) def area() -> float" in r.text and "The area in square units." in r.text


def test_second_occurrence(py):
    r = lsp(py, action="hover", file="shapes/report.py", line=6, symbol="s#2")
    assert "s: Shape" in r.text, r.text


def test_definition_reads_path_line_and_code(py):
    r = lsp(py, action="definition", file="shapes/report.py", line=16, symbol="total_area")
    assert (
        r.text.splitlines()[1]
        == "shapes/report.py:4: def total_area(shapes: list[Shape]) -> float:"
    )
    assert r.data["locations"][0] | {} == {"path": "shapes/report.py", "line": 4, "column": 5, "end_line": 4, "end_column": 15, "text": "def total_area(shapes: list[Shape]) -> float:"}  # fmt: skip


def test_a_query_reports_the_servers_own_share_of_its_time(py):
    t0 = time.perf_counter()
    r = lsp(py, action="references", file="shapes/report.py", line=16, symbol="total_area")
    took_ms = (time.perf_counter() - t0) * 1e3
    assert 0 < r.data["server_ms"] < took_ms, (r.data["server_ms"], took_ms)


def test_type_definition(py):
    r = lsp(py, action="type_definition", file="shapes/report.py", line=9, symbol="shape")
    assert "shapes/base.py:6: class Shape(ABC):" in r.text, r.text


def test_implementation_lists_every_override(py):
    r = lsp(py, action="implementation", file="shapes/base.py", line=10, symbol="area")
    assert sorted(loc["line"] for loc in r.data["locations"]) == [10, 18, 26]


def test_references_grouped_by_file(py):
    r = lsp(py, action="references", file="shapes/base.py", line=6, symbol="Shape")
    assert r.data["total"] == 7 and not r.data["capped"]
    assert "shapes/base.py (3)" in r.text and "shapes/report.py (4)" in r.text
    assert "  15: items: list[Shape] = [Square(2.0), Circle(1.0)]" in r.text


def test_document_symbols(py):
    r = lsp(py, action="symbols", file="shapes/base.py")
    names = [(s["kind"], s["name"]) for s in r.data["symbols"]]
    assert ("class", "Shape") in names and ("method", "area") in names
    assert "shapes/base.py:14: class Square" in r.text


def test_workspace_symbols(py):
    r = lsp(py, action="symbols", query="Circle")
    assert any(s["path"] == "shapes/base.py" and s["line"] == 22 for s in r.data["symbols"]), r.text


def test_code_actions_answer(py):
    r = lsp(py, action="code_actions", file="shapes/report.py", line=1, symbol="Circle")
    assert not r.is_error and "code action" in r.text


def test_file_diagnostics_clean(py):
    r = lsp(py, action="diagnostics", file="shapes/report.py")
    assert r.text == "shapes/report.py (basedpyright): no errors or warnings."


def test_status_names_root_state_and_missing_halves(py):
    lsp(py, action="hover", file="shapes/report.py", line=4, symbol="total_area")
    r = lsp(py, action="status")
    assert "basedpyright for .: ready" in r.text
    assert "gopls: not usable for the workspace root - no root marker (go.mod)" in r.text
    assert (
        "dart: not usable for the workspace root - no root marker (pubspec.yaml) from there up to the workspace root; binary dart not found on PATH"
        in r.text
    )
    assert r.data["running"][0]["server"] == "basedpyright"


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        ({"action": "hover", "file": "shapes/report.py", "line": 4}, "symbol is required: pass a substring of line 4 of shapes/report.py that names what you mean, e.g. a function name. The line is: 'def total_area(shapes: list[Shape]) -> float:'"),
        ({"action": "hover", "file": "shapes/report.py", "line": 4, "symbol": "nope"}, "symbol 'nope' is not on line 4 of shapes/report.py. The line is: 'def total_area(shapes: list[Shape]) -> float:' - pass a substring of that line, or check the line number"),
        ({"action": "definition", "file": "shapes/report.py", "line": 99, "symbol": "x"}, "line 99 is past the end of shapes/report.py (17 lines); pass a line that exists (lines are 1-indexed)"),
        ({"action": "references", "file": "nothere.py", "line": 1, "symbol": "x"}, "'nothere.py' does not exist; check the path (workspace-relative)."),
        ({"action": "hover", "file": "shapes", "line": 1, "symbol": "x"}, "'shapes' is a directory; pass a file."),
        ({"action": "symbols"}, 'symbols needs query (workspace search, e.g. {"action": "symbols", "query": "Config"}) or file (the symbols of one file).'),
        ({"action": "diagnostics"}, 'diagnostics needs file: a workspace-relative path, or "*" for the whole project (runs the project\'s own checker).'),
        ({"action": "hover", "file": "shapes/report.py", "query": "x"}, "hover does not take query; it takes file, line, symbol."),
    ],
)  # fmt: skip
def test_bad_input_is_a_clear_error(py, args, message):
    r = py.call("lsp", args)
    assert r.is_error and r.text == message


def test_unknown_extension(py):
    (Path(py.workdir) / "notes.kt").write_text("fun main() {}\n")
    r = lsp(py, action="hover", file="notes.kt", line=1, symbol="main")
    assert r.is_error and r.text.startswith("no language server handles '.kt' files (notes.kt)")


# --- project checker ------------------------------------------------------------------------


def test_project_checker_finds_errors(lsp_rt, tmp_path):  # noqa: F811
    run, root = fresh_run(lsp_rt, tmp_path)
    (root / "shapes" / "broken.py").write_text("x: int = 'no'\n")
    r = lsp(run, action="diagnostics", file="*")
    assert "project check (basedpyright --outputjson: 1 finding(s))" in r.text
    assert r.data["diagnostics"][0]["path"] == "shapes/broken.py" and r.data["checkers"] == [
        "basedpyright --outputjson"
    ]
    run.close()


# --- diagnostics on write -----------------------------------------------------------------------


def _new(r):
    return [(d["line"], d["message"]) for d in (r.data.get("diagnostics") or {}).get("new", [])]


def test_diagnostics_on_write_sequence(lsp_rt, tmp_path):  # noqa: F811
    run, root = warm_run(lsp_rt, tmp_path)
    f = "shapes/report.py"
    # 1. introduce an error -> reported
    r = run.call(
        "edit",
        {
            "path": f,
            "old_string": "    return label\n",
            "new_string": "    return label + missing_name\n",
        },
    )
    assert not r.is_error and _new(r) == [(11, '"missing_name" is not defined')], r.text
    assert "New diagnostics after this write (1 error, 0 warnings):" in r.text
    assert (
        'shapes/report.py:11:20: error [reportUndefinedVariable]: "missing_name" is not defined'
        in r.text
    )
    # 2. an unrelated edit -> not reported again
    r = run.call(
        "edit", {"path": f, "old_string": "Sum of the areas", "new_string": "Sum of all areas"}
    )
    assert _new(r) == [] and "New diagnostics" not in r.text, r.text
    # 3. the error moves down four lines -> not reported
    r = run.call(
        "edit",
        {
            "path": f,
            "old_string": "def describe",
            "new_string": "# one\n# two\n# three\n# four\ndef describe",
        },
    )
    assert _new(r) == [], r.text
    # 4. a second call site with the same error -> reported
    r = run.call(
        "edit",
        {
            "path": f,
            "old_string": "    print(describe(items[0]))\n",
            "new_string": "    print(describe(items[0]))\n    print(missing_name)\n",
        },
    )
    assert _new(r) == [(22, '"missing_name" is not defined')], r.text
    # 5. fix both, then reintroduce one -> reported again
    r = run.call("edit", {"path": f, "old_string": "    print(missing_name)\n", "new_string": ""})
    r = run.call("edit", {"path": f, "old_string": " + missing_name", "new_string": ""})
    assert _new(r) == [], r.text
    r = run.call(
        "edit",
        {
            "path": f,
            "old_string": "    return label\n",
            "new_string": "    return label + missing_name\n",
        },
    )
    assert _new(r) == [(15, '"missing_name" is not defined')], r.text
    run.close()


def test_preexisting_errors_are_a_baseline_not_news(lsp_rt, tmp_path):  # noqa: F811
    run, root = fresh_run(lsp_rt, tmp_path)
    (root / "shapes" / "old.py").write_text("a: int = 'old error'\n")
    r = run.call("edit", {"path": "shapes/old.py", "old_string": "a: int", "new_string": "b: int"})
    assert _new(r) == [] and "New diagnostics" not in r.text, r.text
    run.close()


def test_write_that_breaks_another_file_reports_it(lsp_rt, tmp_path):  # noqa: F811
    # report.py imports shapes.base; renaming Shape.area breaks it. basedpyright is a pull
    # server: the open files importing a written one are pulled with the write, so the
    # breaking write's own answer says so.
    run, root = fresh_run(lsp_rt, tmp_path)
    lsp(run, action="diagnostics", file="shapes/report.py")  # report.py is open in the server
    r = run.call(
        "edit",
        {
            "path": "shapes/base.py",
            "old_string": '    def area(self) -> float:\n        """The area',
            "new_string": '    def surface(self) -> float:\n        """The area',
        },
    )
    assert not r.is_error, r.text
    assert "shapes/report.py" in {d["path"] for d in r.data["diagnostics"]["new"]}, r.text
    assert (
        "shapes/report.py:6:" in r.text
        and 'Cannot access attribute "area" for class "Shape"' in r.text
    ), r.text
    # an unrelated write does not report it again; fixing it is quiet too
    w = run.call("write", {"path": "shapes/scratch.py", "content": "n = 1\n"})
    assert "shapes/report.py" not in w.text, w.text
    r = run.call(
        "edit",
        {
            "path": "shapes/base.py",
            "old_string": "    def surface(self) -> float:",
            "new_string": "    def area(self) -> float:",
        },
    )
    assert "New diagnostics" not in r.text, r.text
    run.close()


def test_multi_file_patch_is_diagnosed_once_for_all(lsp_rt, tmp_path):  # noqa: F811
    run, root = warm_run(lsp_rt, tmp_path)
    patch = (
        "--- /dev/null\n+++ b/shapes/one.py\n@@ -0,0 +1 @@\n+one: int = 'x'\n"
        "--- /dev/null\n+++ b/shapes/two.py\n@@ -0,0 +1 @@\n+two: str = 2\n"
    )
    r = run.call("apply_patch", {"patch": patch})
    assert not r.is_error, r.text
    assert sorted(d["path"] for d in r.data["diagnostics"]["new"]) == [
        "shapes/one.py",
        "shapes/two.py",
    ]
    run.close()


def test_write_outside_any_project_is_left_alone(lsp_rt, tmp_path):  # noqa: F811
    run = lsp_rt.open_run(f"py-{next(_ids)}", workdir=str(tmp_path))
    r = run.call("write", {"path": "loose.py", "content": "x: int = 'no'\n"})
    assert not r.is_error and "diagnostics" not in r.data and "New diagnostics" not in r.text
    r = lsp(run, action="hover", file="loose.py", line=1, symbol="x")
    assert (
        r.is_error
        and "basedpyright: no root marker (pyproject.toml, setup.py, setup.cfg, requirements.txt, pyrightconfig.json) from there up to the workspace root"
        in r.text
    )
    run.close()


# --- lsp_rename ---------------------------------------------------------------------------------


def test_rename_across_files(lsp_rt, tmp_path):  # noqa: F811
    run, root = fresh_run(lsp_rt, tmp_path)
    r = run.call(
        "lsp_rename", {"file": "shapes/base.py", "line": 6, "symbol": "Shape", "new_name": "Figure"}
    )
    assert not r.is_error, r.text
    assert r.data["files"] == [
        {"path": "shapes/base.py", "edits": 3},
        {"path": "shapes/report.py", "edits": 4},
    ]
    assert r.text.startswith("renamed `Shape` to `Figure`: 7 edits in 2 files")
    assert "class Figure(ABC):" in (root / "shapes/base.py").read_text()
    assert "Shape" not in (root / "shapes/report.py").read_text()
    # the server saw the new text: a query on the renamed symbol works at once
    h = lsp(run, action="hover", file="shapes/report.py", line=9, symbol="Figure")
    assert "class Figure" in h.text, h.text
    run.close()


def test_rename_of_a_builtin_is_refused(py):
    r = py.call(
        "lsp_rename", {"file": "shapes/report.py", "line": 6, "symbol": "sum", "new_name": "total"}
    )
    assert r.is_error, r.text


def test_rename_is_hidden_from_readonly(lsp_rt, tmp_path):  # noqa: F811
    run = lsp_rt.open_run(f"py-{next(_ids)}", workdir=str(tmp_path), surface="readonly")
    assert "lsp" in [t.name for t in run.tools()] and "lsp_rename" not in [
        t.name for t in run.tools()
    ]
    run.close()


def test_health_shows_the_server(py):
    lsp(py, action="hover", file="shapes/report.py", line=4, symbol="total_area")
    nodes = [n for n in health_nodes(py.runtime) if n["extra"].get("server") == "basedpyright"]
    assert nodes and nodes[0]["extra"]["lsp_state"] in ("ready", "indexing")


def test_a_binary_that_does_not_run_is_named_on_first_use(runtime_factory, tmp_path, monkeypatch):
    # a rustup proxy without the component: on PATH, but it cannot run
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "rust-analyzer"
    fake.write_text(
        "#!/bin/sh\necho \"error: Unknown binary 'rust-analyzer' in official toolchain\" >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "Cargo.toml").write_text("[package]\nname = 'x'\n")
    # a runtime started with the fake on its PATH: its actors look the binary up themselves
    run = runtime_factory().open_run(f"py-{next(_ids)}", workdir=str(ws))
    r = lsp(run, action="status")  # the host runs no process: the probe runs on first use
    assert (
        f"rust-analyzer: usable (marker Cargo.toml at ., binary {fake}) - starts on first use, "
        "if `rust-analyzer --version` runs (checked then, not here)"
    ) in r.text, r.text
    (ws / "main.rs").write_text("fn main() {}\n")
    r = lsp(run, action="hover", file="main.rs", line=1, symbol="main")
    assert r.is_error and "but does not run (rust-analyzer --version: " in r.text, r.text
    assert "error: Unknown binary 'rust-analyzer' in official toolchain" in r.text, r.text
    run.close()


def test_resolve_accept_is_diagnosed(lsp_rt, tmp_path):  # noqa: F811
    run, root = warm_run(lsp_rt, tmp_path)
    if "ast_edit" not in [t.name for t in run.tools()]:
        pytest.skip("the structural family is not connected on this runtime")
    (root / "shapes" / "calls.py").write_text(
        "from shapes.base import Square\n\nprint(Square(2.0).area())\n"
    )
    staged = run.call(
        "ast_edit",
        {
            "pattern": "$S.area()",
            "rewrite": "$S.volume()",
            "path": "shapes/calls.py",
            "language": "python",
        },
    )
    assert not staged.is_error, staged.text
    r = run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
    assert not r.is_error, r.text
    assert any(
        'Cannot access attribute "volume"' in d["message"] for d in r.data["diagnostics"]["new"]
    ), r.text
    run.close()


def test_status_for_one_file(py):
    r = lsp(py, action="status", file="shapes/base.py")
    assert "basedpyright: usable (marker pyproject.toml at ." in r.text
    assert [s["server"] for s in r.data["servers"]] == ["basedpyright"]
