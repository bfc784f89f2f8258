"""tether.roots: the marker walk up, the intersection rule and its words, the bounded walk
down (used by the language-server and debug-adapter tables alike)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether import roots
from tether.debug import adapters
from tether.lsp import servers

MARKERS = ("go.mod", "pyproject.toml")


def _tree(base: Path, *files: str) -> Path:
    for rel in files:
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text("")
    return base


def test_find_root_is_the_nearest_marker_and_stops_at_the_workspace(tmp_path: Path) -> None:
    _tree(tmp_path, "pyproject.toml", "pkg/go.mod", "pkg/sub/a.py", "other/b.py")
    assert roots.find_root(tmp_path / "pkg/sub/a.py", tmp_path, MARKERS) == (
        tmp_path / "pkg",
        "go.mod",
    )
    assert roots.find_root(tmp_path / "other/b.py", tmp_path, MARKERS) == (
        tmp_path,
        "pyproject.toml",
    )
    assert roots.find_root(tmp_path / "other", tmp_path / "other", MARKERS) is None


@pytest.mark.parametrize(
    "root, binary, usable, said",
    [
        (Path("/r"), "/bin/x", True, ""),
        (None, "/bin/x", False, "no root marker (go.mod, pyproject.toml) from there up to"),
        (Path("/r"), "", False, "x not found: install x"),
        (None, "", False, "workspace root; x not found: install x"),
    ],
)
def test_the_intersection_rule_names_each_missing_half(
    root: Path | None, binary: str, usable: bool, said: str
) -> None:
    assert roots.usable(root, binary) is usable
    why = roots.why_not(root, MARKERS, binary, "x not found: install x")
    assert (said in why) if said else why == ""


def test_first_below_is_shallowest_then_by_name_skips_and_is_bounded(tmp_path: Path) -> None:
    _tree(tmp_path, "b/deep/z.mark", "a/y.mark", "c/x.mark", ".hidden/w.mark", "skip/v.mark")

    def wanted(e: os.DirEntry[str]) -> bool:
        return e.name.endswith(".mark")

    assert roots.first_below(tmp_path, wanted, {"skip"}, 100) == tmp_path / "a/y.mark"
    (tmp_path / "top.mark").mkdir()  # a directory is never the answer, only entered
    assert roots.first_below(tmp_path, wanted, {"skip", "a", "c"}, 100) == (
        tmp_path / "b/deep/z.mark"
    )
    assert roots.first_below(tmp_path, wanted, {"skip"}, 3) is None


def test_both_tables_refuse_in_the_shared_words(tmp_path: Path) -> None:
    server = servers.resolve(servers.BY_NAME["gopls"], tmp_path / "a.go", tmp_path)
    adapter = adapters.resolve(adapters.BY_NAME["delve"], tmp_path / "a.go", tmp_path)
    shared = "no root marker (go.mod) from there up to the workspace root"
    assert not server.usable and server.why_not().startswith(shared)
    assert not adapter.usable and adapter.why_not().startswith(shared)


def test_a_marker_anywhere_below_is_found_for_the_adapters_report(tmp_path: Path) -> None:
    _tree(tmp_path, "node_modules/go.mod", "svc/api/go.mod")
    assert adapters._marker_below(tmp_path, ("go.mod",)) == "svc/api/go.mod"
    assert adapters._marker_below(tmp_path, ("Cargo.toml",)) == ""
