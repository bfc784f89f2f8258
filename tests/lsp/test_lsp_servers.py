"""Every action against real typescript-language-server, clangd and gopls (one runtime)."""

from __future__ import annotations

import itertools

import pytest
from lsp_support import copy_project, lsp_rt, need  # noqa: F401 - fixtures

from tests.conftest import wait_until

pytestmark = pytest.mark.slow
_ids = itertools.count()

PROJECT = {"typescript": "typescript-language-server", "c": "clangd", "go": "gopls"}
NEEDS = {
    "typescript": need("typescript-language-server", "tsc"),
    "c": need("clangd"),
    "go": need("gopls", "go"),
}

# (project, action, args, check) - check: substrings of the text, or a callable on the result
CASES = [
    ("typescript", "hover", dict(file="src/report.ts", line=4, symbol="totalArea"), ["function totalArea(shapes: Shape[]): number", "Sum of the areas"]),
    ("typescript", "hover", dict(file="src/report.ts", line=9, symbol="area"), ["(method) Shape.area(): number"]),
    ("typescript", "definition", dict(file="src/report.ts", line=14, symbol="totalArea"), ["src/report.ts:4: export function totalArea(shapes: Shape[]): number {"]),
    ("typescript", "type_definition", dict(file="src/report.ts", line=8, symbol="shape"), ["src/shapes.ts:2: export interface Shape {"]),
    ("typescript", "implementation", dict(file="src/shapes.ts", line=2, symbol="Shape"), ["export class Square implements Shape {", "export class Circle implements Shape {"]),
    ("typescript", "references", dict(file="src/report.ts", line=4, symbol="totalArea"), ["2 references of `totalArea`:", "src/report.ts (2)", "  14: console.log(totalArea(items), describe(items[0]));"]),
    ("typescript", "symbols", dict(file="src/shapes.ts"), ["src/shapes.ts:6: class Square"]),
    ("typescript", "symbols", dict(query="Circle"), ["src/shapes.ts:13: class Circle"]),
    ("typescript", "code_actions", dict(file="src/report.ts", line=4, symbol="totalArea"), ["code action"]),
    ("typescript", "diagnostics", dict(file="src/report.ts"), ["src/report.ts (typescript-language-server): no errors or warnings."]),
    ("c", "hover", dict(file="main.c", line=6, symbol="square_area"), ["square_area", "The area of a square."]),
    ("c", "definition", dict(file="main.c", line=6, symbol="square_area"), ["square_area(const struct square *sq)"]),
    ("c", "type_definition", dict(file="main.c", line=5, symbol="sq"), lambda r: not r.is_error),
    ("c", "implementation", dict(file="main.c", line=6, symbol="square_area"), lambda r: not r.is_error),
    ("c", "references", dict(file="main.c", line=6, symbol="square_area"), ["main.c (1)", "  6: double total = square_area(&sq);"]),
    ("c", "symbols", dict(file="main.c"), ["main.c:4: function main"]),
    ("c", "symbols", dict(query="square_area"), ["shapes.h:10: function square_area"]),
    ("c", "code_actions", dict(file="main.c", line=6, symbol="total"), lambda r: not r.is_error),
    ("c", "diagnostics", dict(file="main.c"), ["main.c (clangd): no errors or warnings."]),
    ("go", "hover", dict(file="main.go", line=11, symbol="TotalArea"), ["func geo.TotalArea(shapes []geo.Shape) float64", "TotalArea sums the areas of shapes."]),
    ("go", "definition", dict(file="main.go", line=11, symbol="TotalArea"), ["geo/geo.go:20: func TotalArea(shapes []Shape) float64 {"]),
    ("go", "type_definition", dict(file="main.go", line=10, symbol="Square"), ["geo/geo.go:10: type Square struct {"]),
    ("go", "implementation", dict(file="geo/geo.go", line=5, symbol="Shape"), ["geo/geo.go:10: type Square struct {"]),
    ("go", "references", dict(file="geo/geo.go", line=20, symbol="TotalArea"), ["2 references of `TotalArea`", "main.go (1)", "geo/geo.go (1)"]),
    ("go", "symbols", dict(file="geo/geo.go"), ["geo/geo.go:10: struct Square"]),
    ("go", "symbols", dict(query="TotalArea"), ["geo/geo.go:20: function TotalArea"]),
    ("go", "code_actions", dict(file="main.go", line=11, symbol="TotalArea"), lambda r: not r.is_error),
    ("go", "diagnostics", dict(file="main.go"), ["main.go (gopls): no errors or warnings."]),
]  # fmt: skip


@pytest.fixture(scope="module")
def runs(lsp_rt, tmp_path_factory):  # noqa: F811
    base = tmp_path_factory.mktemp("servers")
    out = {
        p: lsp_rt.open_run(f"srv-{p}-{next(_ids)}", workdir=str(copy_project(p, base)))
        for p in PROJECT
    }
    yield out
    for r in out.values():
        r.close()


@pytest.mark.parametrize(
    "project, action, args, check",
    [pytest.param(*c, marks=NEEDS[c[0]], id=f"{c[0]}-{c[1]}-{i}") for i, c in enumerate(CASES)],
)
def test_action(runs, project, action, args, check):
    r = runs[project].call("lsp", {"action": action, **args})
    if callable(check):
        assert check(r), r.text
    else:
        assert not r.is_error, r.text
        for part in check:
            assert part in r.text, r.text


def test_status_lists_each_running_server(runs):
    for project, server in PROJECT.items():
        if NEEDS[project].args[0]:
            continue  # not installed here
        runs[project].call("lsp", {"action": "symbols", "query": "x"})
        r = runs[project].call("lsp", {"action": "status"})
        assert f"{server} for .: ready" in r.text, r.text


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
    """A copy of each project for the tests that edit it (writes, renames): one server per
    project for all of them. Each test puts back what it changed, so the next finds the
    project as copied (a test that fails midway may leave its change: the next fails too)."""
    base = tmp_path_factory.mktemp("edited")
    return {p: copy_project(p, base) for p in PROJECT}


WRITES = {
    "typescript": ("src/report.ts", "console.log(totalArea(items), describe(items[0]));\n", "console.log(totalArea(items), describe(items[0]));\nconst bad: number = \"x\";\n", "Type 'string' is not assignable to type 'number'."),
    "c": ("main.c", "    return 0;\n", "    int y = undefined_thing;\n    return y;\n", "Use of undeclared identifier 'undefined_thing'"),
    "go": ("main.go", "\tfmt.Println(geo.TotalArea(items))\n", "\tfmt.Println(geo.TotalArea(items))\n\tundefinedThing()\n", "undefinedThing"),
}  # fmt: skip


@pytest.mark.parametrize("project", [pytest.param(p, marks=NEEDS[p]) for p in WRITES])
def test_write_reports_new_error_once(lsp_rt, edited, project):  # noqa: F811
    run = lsp_rt.open_run(f"w-{project}-{next(_ids)}", workdir=str(edited[project]))
    path, old, new, message = WRITES[project]
    # (a warm server: the write's diagnostics are waited for under their cap alone, not
    # behind a cold server's first look at its new project; a first look longer than the
    # cap, as under a full run's load, answers "pending": asked again until it answers)
    warm = {"action": "diagnostics", "file": path}
    wait_until(lambda: not run.call("lsp", warm).is_error, timeout=60, interval=0.5)
    r = run.call("edit", {"path": path, "old_string": old, "new_string": new})
    assert not r.is_error and message in r.text, r.text
    assert [d["path"] for d in r.data["diagnostics"]["new"]] == [path]
    r = run.call("edit", {"path": path, "old_string": new, "new_string": "\n\n" + new})
    assert "New diagnostics" not in r.text, r.text  # moved down: not reported again
    r = run.call("edit", {"path": path, "old_string": "\n\n" + new, "new_string": old})
    assert not r.is_error and "New diagnostics" not in r.text, r.text  # (put back)
    run.close()


@NEEDS["typescript"]
def test_a_clean_write_to_a_clean_typescript_file_is_not_pending(lsp_rt, tmp_path):  # noqa: F811
    # typescript-language-server publishes nothing for a file that stays clean: without
    # asking tsserver, such a write waited out its cap and answered "Diagnostics pending"
    run = lsp_rt.open_run(f"clean-{next(_ids)}", workdir=str(copy_project("typescript", tmp_path)))
    warm = {"action": "diagnostics", "file": "src/report.ts"}
    wait_until(lambda: not run.call("lsp", warm).is_error, timeout=60, interval=0.5)
    for i in range(3):
        r = run.call("edit", {"path": "src/report.ts", "old_string": "console.log(", "new_string": f"// {i}\nconsole.log("})  # fmt: skip
        assert not r.is_error and "pending" not in r.text, r.text
        assert "diagnostics" not in r.data, r.data  # nothing new, nothing pending
    run.close()


RENAMES = {
    "typescript": (dict(file="src/shapes.ts", line=6, symbol="Square", new_name="Quad"), [{"path": "src/report.ts", "edits": 2}, {"path": "src/shapes.ts", "edits": 1}]),
    "go": (dict(file="geo/geo.go", line=20, symbol="TotalArea", new_name="SumAreas"), [{"path": "geo/geo.go", "edits": 2}, {"path": "main.go", "edits": 1}]),
    "c": (dict(file="main.c", line=6, symbol="total", new_name="sum"), [{"path": "main.c", "edits": 2}]),
}  # fmt: skip


@pytest.mark.parametrize("project", [pytest.param(p, marks=NEEDS[p]) for p in RENAMES])
def test_rename(lsp_rt, edited, project):  # noqa: F811
    root = edited[project]
    run = lsp_rt.open_run(f"r-{project}-{next(_ids)}", workdir=str(root))
    args, files = RENAMES[project]
    r = run.call("lsp_rename", args)
    assert not r.is_error, r.text
    assert r.data["files"] == files
    for f in files:
        assert args["new_name"] in (root / f["path"]).read_text()
    back = {**args, "symbol": args["new_name"], "new_name": args["symbol"]}  # (put back)
    r = run.call("lsp_rename", back)
    assert not r.is_error and r.data["files"] == files, r.text
    run.close()


CHECKS = {
    "typescript": ("src/broken.ts", "const n: number = 'x';\n", "tsc --noEmit", "TS2322"),
    "c": ("broken.c", "int f(void) { return missing; }\n", "cc -fsyntax-only", "missing"),
    "go": ("geo/broken.go", "package geo\n\nfunc Broken() int { return missing }\n", "go vet ./...", "missing"),
}  # fmt: skip


@pytest.mark.parametrize("project", [pytest.param(p, marks=NEEDS[p]) for p in CHECKS])
def test_project_checker(lsp_rt, tmp_path, project):  # noqa: F811
    root = copy_project(project, tmp_path)
    path, content, checker, needle = CHECKS[project]
    (root / path).write_text(content)
    run = lsp_rt.open_run(f"c-{project}-{next(_ids)}", workdir=str(root))
    r = run.call("lsp", {"action": "diagnostics", "file": "*"})
    assert not r.is_error and f"project check ({checker}" in r.text, r.text
    found = [d for d in r.data["diagnostics"] if d["path"] == path]
    assert found and needle in found[0]["message"] + found[0]["code"], r.text
    run.close()
