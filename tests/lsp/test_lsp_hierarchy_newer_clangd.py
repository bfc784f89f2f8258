"""type_hierarchy for real: on a clangd of release 15 or later, the first installed server
with the LSP 3.17 type hierarchy (Debian 12's `clangd` is 14; `apt-get install clangd-19`
adds one beside it). Skipped, saying so, where there is none.

The runtime of this module is started with a PATH whose `clangd` is that release, so every
step is the tool's own: the intersection rule, the actor, the session, the rendering.
Written against clangd 19 (outgoing calls refused: they came in 20); the clangd 20 case is
what its release notes promise, not yet seen here.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from lsp_support import copy_project
from test_lsp_hierarchy import call, clangd_major

pytestmark = pytest.mark.slow


def newer_clangd() -> tuple[str, int]:
    """The newest clangd of release 15 or later on PATH, and its release ("", 0: none)."""
    found = [(clangd_major(b), b) for b in ("clangd", *(f"clangd-{n}" for n in range(15, 31)))]
    major, binary = max((m, b) for m, b in found)
    return (shutil.which(binary) or "", major) if major >= 15 else ("", 0)


BINARY, MAJOR = newer_clangd()
pytestmark = [pytestmark, pytest.mark.skipif(not BINARY, reason="no clangd 15 or later installed (apt-get install clangd-19)")]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.conftest import shutdown_without_orphans
    from tether.runtime import Runtime

    base = tmp_path_factory.mktemp("newer-clangd")
    bindir = base / "bin"
    bindir.mkdir()
    (bindir / "clangd").symlink_to(BINARY)
    os.environ.setdefault("TETHER_STATE_DIR", str(base / "state"))
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{bindir}{os.pathsep}{path}"  # the tree's processes inherit it
    try:
        rt = Runtime.start()
    finally:
        os.environ["PATH"] = path
    try:
        r = rt.open_run("newer-clangd", workdir=str(copy_project("cpp", base)))
        yield r
        r.close()
    finally:
        shutdown_without_orphans(rt)


def test_subtypes_are_the_derived_types(run):
    r = run.call("lsp", call("subtypes", "shapes.hpp", 3, "Shape"))
    assert not r.is_error, r.text
    assert r.text.startswith("2 subtypes of `Shape` (struct at shapes.hpp:3):\nshapes.hpp (2)\n  8: struct Square : Shape {\n  14: struct Circle : Shape {"), r.text  # fmt: skip
    assert [(i["name"], i["line"]) for i in r.data["items"]] == [("Square", 8), ("Circle", 14)]
    (server,) = run.call("lsp", {"action": "status"}).data["running"]
    assert psutil.Process(server["pid"]).exe() == os.path.realpath(BINARY)  # not clangd 14


def test_supertypes_from_a_use_of_the_type(run):
    r = run.call("lsp", call("supertypes", "main.cpp", 5, "Square"))
    assert not r.is_error, r.text
    assert r.text == "1 supertype of `Square` (struct at shapes.hpp:8):\nshapes.hpp (1)\n  3: struct Shape {", r.text  # fmt: skip


def test_a_type_with_no_subtypes_says_so(run):
    r = run.call("lsp", call("subtypes", "main.cpp", 5, "Square"))
    assert not r.is_error and r.text.startswith("no subtypes of `Square` (struct at shapes.hpp:8)."), r.text  # fmt: skip


def test_outgoing_calls_follow_the_release(run):
    r = run.call("lsp", call("outgoing", "shapes.cpp", 3, "total_area"))
    if MAJOR < 20:
        assert r.is_error and 'it answered callHierarchy/outgoingCalls "method not found", though it advertises the provider; clangd has it from release 20' in r.text, r.text  # fmt: skip
    else:
        assert not r.is_error and "callee of `total_area`" in r.text and "area" in r.text, r.text
