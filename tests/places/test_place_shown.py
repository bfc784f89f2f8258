"""Each resource's place, shown: `lsp status` (per running server, and the run's own) and
`tether top` (a place column; `tether status` says it per actor). Real basedpyright,
real ipykernel, real bubblewrap (and slirp4netns for network on)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.lsp.lsp_support import copy_project
from tests.places.test_network import needs_egress
from tests.places.test_places import needs_sandbox
from tether.actors.kernel import kinds
from tether.health_view import render_top, render_tree, short_place, top_rows
from tether.places import Place

pytestmark = needs_sandbox
BOXED = "sandbox (bubblewrap, network off)"


@pytest.mark.parametrize(
    ("described", "cell"),
    [
        ("host", "host"),
        (BOXED, "sandbox"),
        ("sandbox (bubblewrap, network on)", "sandbox+net"),
        ("prefix (podman exec -i box)", "prefix"),
        ("", ""),
    ],
)
def test_short_place(described: str, cell: str) -> None:
    assert short_place(described) == cell


@pytest.mark.skipif(shutil.which("basedpyright-langserver") is None, reason="basedpyright")
def test_lsp_status_names_each_servers_place(runtime: Any, tmp_path: Path) -> None:
    root = copy_project("python", tmp_path / "py")
    boxed = runtime.open_run("s", workdir=root, place="sandbox")
    host = runtime.open_run("h", workdir=root)
    args = {"action": "hover", "file": "shapes/report.py", "line": 4, "symbol": "total_area"}
    for run in (boxed, host):
        hover = run.call("lsp", args)
        assert not hover.is_error, hover.text
    mine = boxed.call("lsp", {"action": "status"})
    assert not mine.is_error, mine.text
    places = sorted(s["place"] for s in mine.data["running"])
    assert places == ["host", BOXED], mine.data["running"]
    assert mine.data["place"] == BOXED
    assert f"this run's servers run in its place: {BOXED}" in mine.text
    assert f"restart(s), in {BOXED}" in mine.text, mine.text
    theirs = host.call("lsp", {"action": "status"})
    seen = sorted(s["place"] for s in theirs.data["running"])
    assert seen[0] == "another run's place (" + Place.sandbox().policy_key + ")", seen
    assert seen[1] == "host" and theirs.data["place"] == "host", seen


@needs_egress
def test_top_and_status_show_each_kernels_place(runtime_factory: Any, tmp_path: Path) -> None:
    rt = runtime_factory(kinds=kinds(spares=0))
    for run_id, place in (("h", None), ("s", "sandbox"), ("n", Place.sandbox(network=True))):
        workdir = tmp_path / run_id
        workdir.mkdir()
        res = rt.open_run(run_id, workdir=workdir, place=place).call(
            "eval", {"code": "print(1)", "description": "start this run's kernel with a cell"}
        )
        assert not res.is_error, res.text
    health = rt.health()
    rows = {r[0].strip(): r for r in top_rows(health)}
    assert rows["run:h/kernel:python"][-1] == "host"
    assert rows["run:s/kernel:python"][-1] == "sandbox"
    assert rows["run:n/kernel:python"][-1] == "sandbox+net"
    frame = render_top(health, "now").splitlines()
    assert frame[2].split()[-1] == "place", frame[2]
    assert any(line.strip().startswith("run:n/kernel:python") for line in frame)
    tree = render_tree(health)
    line = next(x for x in tree.splitlines() if "run:s/kernel:python" in x)
    assert f"in {BOXED}" in line, line
