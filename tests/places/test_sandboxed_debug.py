"""debug in a sandbox place: debugpy (adapter and debuggee) in bubblewrap, driven over the
adapter's stdio; the program cannot read another conversation's workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import gone, health_node, wait_until
from tests.debug.support import ok, session_pids
from tests.places.test_places import needs_sandbox
from tether.places import Place

pytestmark = needs_sandbox

PROGRAM = """\
import os


def peek(path):
    try:
        return open(path).read()
    except OSError as e:
        return type(e).__name__


other = peek({secret!r})
me = os.getuid()
print("other:", other, "uid:", me)
"""


def test_a_sandboxed_debuggee_stops_and_cannot_read_another_workspace(
    runtime: Any, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "secret.txt").write_text("B's secret")
    (a / "app.py").write_text(PROGRAM.format(secret=str(b / "secret.txt")))
    (a / "pyproject.toml").write_text('[project]\nname = "app"\n')
    run = runtime.open_run("dbg", workdir=str(a), place="sandbox")
    ok(run, {"op": "breakpoints", "file": "app.py", "lines": [13]})
    first = ok(run, {"op": "launch", "program": "app.py"})
    assert first.text.startswith("stopped at app.py:13 (breakpoint)"), first.text
    assert "other (str) = 'FileNotFoundError'" in first.text, first.text
    assert "me (int) = 1000" in first.text, first.text
    pids = session_pids(runtime, "dbg")
    assert pids
    done = ok(run, {"op": "continue"})
    assert "other: FileNotFoundError uid: 1000" in done.text, done.text
    node = health_node(runtime.health(), "run:dbg/debug_session:session")
    assert node is not None and node["place"] == "sandbox (bubblewrap, network off)", node
    run.close()
    assert wait_until(lambda: gone(pids), 10)


def test_debug_adapters_names_the_place_and_where_a_tcp_adapter_is_refused(
    runtime: Any, tmp_path: Path
) -> None:
    (tmp_path / "go.mod").write_text("module x\n\ngo 1.19\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\n')
    boxed = ok(
        runtime.open_run("adapters-box", workdir=str(tmp_path), place="sandbox"), {"op": "adapters"}
    )
    assert boxed.text.startswith("adapters run in this run's place: sandbox (bubblewrap"), (
        boxed.text
    )
    rows = {r["adapter"]: r for r in boxed.data["adapters"]}
    assert rows["debugpy"]["usable"], rows["debugpy"]
    if rows["delve"]["binary"]:  # (dlv installed: in a sandbox it is reached by the relay)
        assert rows["delve"]["usable"], rows["delve"]
        prefixed = runtime.open_run(
            "adapters-prefix", workdir=str(tmp_path), place=Place.prefix(["env"])
        )
        rows = {r["adapter"]: r for r in ok(prefixed, {"op": "adapters"}).data["adapters"]}
        assert not rows["delve"]["usable"]
        assert (
            "listens on loopback TCP, which a prefix place does not share"
            in (rows["delve"]["why_not"])
        )
    host = ok(runtime.open_run("adapters-host", workdir=str(tmp_path)), {"op": "adapters"})
    assert host.text.startswith("adapters run in this run's place: host\n"), host.text
    assert all(r["place"] == "host" for r in host.data["adapters"])
