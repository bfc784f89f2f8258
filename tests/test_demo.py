"""The main job: `tether demo` runs every step as expected on the bundled sample project."""

from __future__ import annotations

import shutil

import pytest

from tether import demo
from tether.places import Place, PlaceError, check

try:
    SANDBOX = bool(check(Place.sandbox()))
except PlaceError:
    SANDBOX = False


@pytest.mark.slow
def test_demo_runs_every_step_as_expected(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main(["--yes"]) == 0
    out = capsys.readouterr().out
    assert "demo finished: 0 step(s) did not go as expected" in out
    assert "stopped at inventory/main.py:15 (breakpoint)" in out  # the debug session
    assert "the program exited with code 0" in out
    assert "The user answered question #1: chose 'value'" in out  # the terminal card
    assert "source files per language: 5 Python" in out  # the vibe worker's result
    assert "bytes of PNG, is saved as" in out  # the eval cell's figure
    assert "| 0 | anvil | 49.99 |" in out  # its DataFrame, as a table
    assert "[step 20, " in out  # the progress counter
    assert "native/checksum.c:13: if (buffer != NULL) free(buffer);" in out
    assert "native/checksum.c:17" not in out  # the guard that frees something else
    assert 'Cannot access attribute "count_of"' in out  # folded into resolve's result
    assert "after shutdown: 0 of the tree's" in out
    if SANDBOX:  # (eval, debug and the worker ran in a sandbox place, and it said so)
        assert "debug and the worker run in a sandbox place (bubblewrap" in out
        assert "run:demo-sandboxed/kernel:python [ready]" in out
        if shutil.which("deno"):  # (its kernel too, reached through the relay)
            assert "eval (Python and JavaScript), debug and the worker run in a sandbox" in out
            assert "run:demo-sandboxed/kernel:javascript [ready]" in out
            assert "run:demo-conversation/kernel" not in out  # nothing evaluated on the host


def test_demo_refuses_a_missing_project(tmp_path) -> None:
    with pytest.raises(SystemExit):
        demo.main(["--project", str(tmp_path / "nope")])
