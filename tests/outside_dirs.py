"""HOME, TMPDIR and the XDG directories pointed at fresh empty directories of a test, for
the tests of "nothing outside the workspace is written" (language servers, kernels, debug
adapters, vibe workers): set before a runtime starts, its actors and their processes
inherit them; afterwards each must still be empty."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

OUTSIDE = {
    "HOME": "home",
    "TMPDIR": "tmp",
    "XDG_CACHE_HOME": "cache",
    "XDG_STATE_HOME": "state",
    "XDG_DATA_HOME": "data",
    "XDG_CONFIG_HOME": "config",
}


def written(top: Path) -> list[str]:
    """What was made inside the directories under `top` (not the directories themselves)."""
    return sorted(str(p.relative_to(top)) for d in top.iterdir() for p in d.rglob("*"))


def fresh_outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME, TMPDIR and the XDG dirs of the actors and their processes: fresh, empty, the
    test's (under `tmp_path`/outside, returned)."""
    real_home = Path.home()
    # what is found through HOME and must still be found: pyenv's shims, Go's module cache
    monkeypatch.setenv("PYENV_ROOT", os.environ.get("PYENV_ROOT", str(real_home / ".pyenv")))
    top = tmp_path / "outside"
    for var, name in OUTSIDE.items():
        (top / name).mkdir(parents=True)
        monkeypatch.setenv(var, str(top / name))
    return top
