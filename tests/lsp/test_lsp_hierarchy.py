"""lsp call_hierarchy and type_hierarchy against the real servers, through the tool.

What each installed server answers was found by asking it (its capabilities, then the
requests): basedpyright, typescript-language-server and gopls have incoming and outgoing
calls and no type hierarchy; clangd has incoming calls, and outgoing calls from release 20,
the LSP 3.17 type hierarchy from 15 (clangd 14 advertises both and answers "method not
found"). Each refusal is asserted in full. clangd's expectations follow its version;
test_lsp_hierarchy_newer_clangd.py runs the type hierarchy on a newer clangd when one is
installed.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess

import pytest
from lsp_support import copy_project, lsp_rt, need  # noqa: F401 - fixtures

from tether.lsp.servers import BY_NAME

pytestmark = pytest.mark.slow
_ids = itertools.count()

NEEDS = {
    "python": need("basedpyright-langserver"),
    "typescript": need("typescript-language-server"),
    "go": need("gopls", "go"),
    "c": need("clangd"),
    "cpp": need("clangd"),
}


def clangd_major(binary: str = "clangd") -> int:
    """The major version of a clangd binary (0 when it is not installed)."""
    path = shutil.which(binary)
    if path is None:
        return 0
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    found = re.search(r"clangd version (\d+)", out)
    return int(found.group(1)) if found else 0


CLANGD = clangd_major()


def call(direction: str, file: str, line: int, symbol: str) -> dict:
    action = "call_hierarchy" if direction in ("incoming", "outgoing") else "type_hierarchy"
    return {"action": action, "direction": direction, "file": file, "line": line, "symbol": symbol}


def refusal(server: str, action: str, direction: str, why: str, others: str, instead: str) -> str:
    return f"lsp: {server} does not offer {action} {direction} ({why}). Servers in the table that have {others}. {instead}"  # fmt: skip


NOT_ADVERTISED = "textDocument/prepareTypeHierarchy is not in its advertised capabilities"
NO_SUPERTYPES = "supertypes: clangd 15+, dart"
NO_SUBTYPES = "subtypes: clangd 15+, dart"
ASK_DEFINITION = "Instead, ask lsp definition about the base types named in its declaration."
ASK_IMPLEMENTATION = "Instead, lsp implementation on the type lists what implements it."
CLANGD_14 = 'it answered {} "method not found", though it advertises the provider; clangd has it from release {}'  # fmt: skip

# (project, arguments, the text expected: a list of parts, or the whole refusal)
CASES = [
    ("python", call("incoming", "shapes/report.py", 4, "total_area"), ["1 caller of `total_area` (function at shapes/report.py:4):", "shapes/report.py (1)\n  14: function main - (report.py), calling it at:\n      16: print(total_area(items))"]),
    ("python", call("incoming", "shapes/base.py", 10, "area"), ["2 callers of `area` (method at shapes/base.py:10):", "shapes/report.py (2)", "  4: function total_area - (report.py), calling it at:\n      6: return sum(s.area() for s in shapes)", "  9: function describe - (report.py), calling it at:"]),
    ("python", call("outgoing", "shapes/report.py", 4, "total_area"), ["2 callees of `total_area` (function at shapes/report.py:4):", "shapes/base.py (1)\n  10: method area - class Shape (base.py) · Workspace, called at:\n      shapes/report.py:6: return sum(s.area() for s in shapes)", "function sum - (builtins.pyi) · Standard library, called at:"]),
    ("python", call("supertypes", "shapes/base.py", 14, "Square"), refusal("basedpyright", "type_hierarchy", "supertypes", NOT_ADVERTISED, NO_SUPERTYPES, ASK_DEFINITION)),
    ("python", call("subtypes", "shapes/base.py", 6, "Shape"), refusal("basedpyright", "type_hierarchy", "subtypes", NOT_ADVERTISED, NO_SUBTYPES, ASK_IMPLEMENTATION)),
    ("typescript", call("incoming", "src/report.ts", 4, "totalArea"), ["1 caller of `totalArea` (function at src/report.ts:4):", "src/report.ts (1)\n  top level of report.ts, calling it at:\n      14: console.log(totalArea(items), describe(items[0]));"]),
    ("typescript", call("incoming", "src/shapes.ts", 3, "area"), ["2 callers of `area` (method at src/shapes.ts:3):", "  4: function totalArea, calling it at:\n      5: return shapes.reduce(", "  8: function describe, calling it at:\n      9: const label"]),
    ("typescript", call("outgoing", "src/report.ts", 4, "totalArea"), ["2 callees of `totalArea` (function at src/report.ts:4):", "src/shapes.ts (1)\n  3: method area, called at:\n      src/report.ts:5: return shapes.reduce((acc, s) => acc + s.area(), 0);", "lib.es5.d.ts (1)", "method reduce, called at:"]),
    ("typescript", call("subtypes", "src/shapes.ts", 2, "Shape"), refusal("typescript-language-server", "type_hierarchy", "subtypes", NOT_ADVERTISED, NO_SUBTYPES, ASK_IMPLEMENTATION)),
    ("go", call("incoming", "geo/geo.go", 20, "TotalArea"), ["1 caller of `TotalArea` (function at geo/geo.go:20):", "main.go (1)\n  9: function main - example.com/shapes • main.go, calling it at:\n      11: fmt.Println(geo.TotalArea(items))"]),
    ("go", call("outgoing", "geo/geo.go", 20, "TotalArea"), ["1 callee of `TotalArea` (function at geo/geo.go:20):", "geo/geo.go (1)\n  6: function Area - example.com/shapes/geo • geo.go, called at:\n      geo/geo.go:23: total += s.Area()"]),
    ("go", call("supertypes", "geo/geo.go", 10, "Square"), refusal("gopls", "type_hierarchy", "supertypes", NOT_ADVERTISED, NO_SUPERTYPES, ASK_DEFINITION)),
    ("c", call("incoming", "main.c", 6, "square_area"), ["1 caller of `square_area` (function at shapes.h:10):", "main.c (1)\n  4: function main, calling it at:\n      6: double total = square_area(&sq);", "(clangd knows only the files opened in it so far"]),
    ("cpp", call("incoming", "main.cpp", 8, "total_area"), ["1 caller of `total_area` (function at shapes.hpp:20):", "main.cpp (1)\n  4: function main, calling it at:\n      8: std::printf(\"%f\\n\", total_area(items, 2));"]),
]  # fmt: skip
if CLANGD and CLANGD < 20:
    CASES.append(("c", call("outgoing", "main.c", 4, "main"), refusal("clangd", "call_hierarchy", "outgoing", CLANGD_14.format("callHierarchy/outgoingCalls", 20), "outgoing calls: basedpyright, typescript-language-server, gopls, rust-analyzer, dart", "Instead, read the function and ask lsp definition about the calls in it.")))  # fmt: skip
if CLANGD and CLANGD < 15:
    why = CLANGD_14.format("textDocument/prepareTypeHierarchy", 15)
    CASES.append(("cpp", call("subtypes", "shapes.hpp", 3, "Shape"), refusal("clangd", "type_hierarchy", "subtypes", why, "subtypes: dart", ASK_IMPLEMENTATION)))  # fmt: skip
    CASES.append(("cpp", call("supertypes", "shapes.hpp", 8, "Square"), refusal("clangd", "type_hierarchy", "supertypes", why, "supertypes: dart", ASK_DEFINITION)))  # fmt: skip


@pytest.fixture(scope="module")
def runs(lsp_rt, tmp_path_factory):  # noqa: F811
    base = tmp_path_factory.mktemp("hierarchy")
    out = {
        p: lsp_rt.open_run(f"h-{p}-{next(_ids)}", workdir=str(copy_project(p, base))) for p in NEEDS
    }
    yield out
    for r in out.values():
        r.close()


@pytest.mark.parametrize(
    "project, args, expected",
    [
        pytest.param(*c, marks=NEEDS[c[0]], id=f"{c[0]}-{c[1]['direction']}-{i}")
        for i, c in enumerate(CASES)
    ],
)
def test_hierarchy(runs, project, args, expected):
    r = runs[project].call("lsp", args)
    if isinstance(expected, str):  # a refusal, word for word
        assert r.is_error and r.text == expected, r.text
        return
    assert not r.is_error, r.text
    for part in expected:
        assert part in r.text, r.text


@NEEDS["python"]
def test_records_carry_each_caller_and_its_call_sites(runs):
    r = runs["python"].call("lsp", call("incoming", "shapes/base.py", 10, "area"))
    assert not r.is_error, r.text
    assert r.data["total"] == 2 and not r.data["capped"]
    assert [(i["path"], i["line"], i["name"]) for i in r.data["items"]] == [
        ("shapes/report.py", 4, "total_area"),
        ("shapes/report.py", 9, "describe"),
    ]
    site = r.data["items"][1]["sites"][0]  # "area" after "naïve 😀": code points (UTF-16 says 31)
    assert (site["line"], site["column"], site["text"].strip()) == (10, 30, 'label = f"naïve 😀 {shape.area()}"')  # fmt: skip
    assert r.data["origin"][0]["name"] == "area"


@NEEDS["python"]
def test_a_position_with_nothing_to_prepare_says_so(runs):
    r = runs["python"].call("lsp", call("incoming", "shapes/report.py", 1, "from"))
    assert not r.is_error
    assert r.text == "no call hierarchy for `from` at shapes/report.py:1: the server found no function or method there. Point at its name where it is declared or used."  # fmt: skip


def test_the_table_names_what_each_installed_server_answers():
    """The rows the refusals quote: what the servers above were seen to answer."""
    assert {n: sorted(BY_NAME[n].hierarchy) for n in ("basedpyright", "typescript-language-server", "gopls")} == dict.fromkeys(("basedpyright", "typescript-language-server", "gopls"), ["incoming", "outgoing"])  # fmt: skip
    assert dict(BY_NAME["clangd"].hierarchy) == {"incoming": "", "outgoing": "20", "supertypes": "15", "subtypes": "15"}  # fmt: skip


# bad arguments: refused before any server is asked (one line each)
BAD = [
    ({"action": "call_hierarchy", "file": "shapes/report.py", "line": 4, "symbol": "total_area"}, 'call_hierarchy needs direction: "incoming" (who calls it) or "outgoing" (what it calls), e.g. {"action": "call_hierarchy", "file": "src/app.py", "line": 12, "symbol": "load_config", "direction": "incoming"}.'),
    ({"action": "type_hierarchy", "file": "shapes/base.py", "line": 6, "symbol": "Shape"}, 'type_hierarchy needs direction: "supertypes" (what it extends or implements) or "subtypes" (what extends or implements it), e.g. {"action": "type_hierarchy", "file": "src/app.py", "line": 12, "symbol": "load_config", "direction": "supertypes"}.'),
    (call("incoming", "shapes/base.py", 6, "Shape") | {"action": "type_hierarchy"}, "direction 'incoming' belongs to call_hierarchy; type_hierarchy takes \"supertypes\" (what it extends or implements) or \"subtypes\" (what extends or implements it), e.g. {\"action\": \"type_hierarchy\", \"file\": \"src/app.py\", \"line\": 12, \"symbol\": \"load_config\", \"direction\": \"supertypes\"}."),
    (call("subtypes", "shapes/report.py", 4, "total_area") | {"action": "call_hierarchy"}, "direction 'subtypes' belongs to type_hierarchy; call_hierarchy takes \"incoming\" (who calls it) or \"outgoing\" (what it calls), e.g. {\"action\": \"call_hierarchy\", \"file\": \"src/app.py\", \"line\": 12, \"symbol\": \"load_config\", \"direction\": \"incoming\"}."),
    (call("incoming", "shapes/report.py", 4, "total_area") | {"query": "x"}, "call_hierarchy does not take query; it takes direction, file, line, symbol."),
    ({"action": "call_hierarchy", "direction": "incoming", "file": "shapes/report.py"}, 'call_hierarchy needs file, line, symbol and direction, e.g. {"action": "call_hierarchy", "file": "src/app.py", "line": 12, "symbol": "load_config", "direction": "incoming"}.'),
    ({"action": "hover", "file": "shapes/report.py", "line": 4, "symbol": "total_area", "direction": "incoming"}, "hover does not take direction; it takes file, line, symbol."),
]  # fmt: skip


@NEEDS["python"]
@pytest.mark.parametrize("args, message", BAD, ids=range(len(BAD)))
def test_bad_arguments_say_what_to_pass(runs, args, message):
    r = runs["python"].call("lsp", args)
    assert r.is_error and r.text == message, r.text


@NEEDS["python"]
def test_a_direction_that_is_none_is_refused_by_the_schema(runs):
    r = runs["python"].call("lsp", call("up", "shapes/report.py", 4, "total_area"))
    assert r.is_error and '`direction`: must be one of "incoming", "outgoing", "supertypes", "subtypes"; got "up"' in r.text, r.text  # fmt: skip
