"""Fixtures for the language-server tests: a runtime per module and fresh project copies.

Import the fixtures into a test module (`from lsp_support import lsp_rt, project`).
Fixture projects live in tests/lsp/projects/{python,typescript,c,go}; tests work on copies.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PROJECTS = Path(__file__).resolve().parent / "projects"
sys.path.insert(0, str(PROJECTS.parent.parent.parent))


def need(*binaries: str) -> pytest.MarkDecorator:
    """Skip (naming what is missing) unless every binary is on PATH."""
    missing = [b for b in binaries if shutil.which(b) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)}")


def copy_project(name: str, dest: Path) -> Path:
    out = dest / name
    shutil.copytree(PROJECTS / name, out, ignore=shutil.ignore_patterns(".cache", "__pycache__"))
    return out.resolve()


@pytest.fixture(scope="module")
def lsp_rt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One runtime for the module; shut down without orphans at the end."""
    import os

    from tests.conftest import shutdown_without_orphans
    from tether.runtime import Runtime

    os.environ.setdefault("TETHER_STATE_DIR", str(tmp_path_factory.mktemp("tether-state")))
    rt = Runtime.start()
    try:
        yield rt
    finally:
        shutdown_without_orphans(rt)


def lsp_pids(rt: Any) -> list[int]:
    """PIDs of language-server processes (children of language_server actors) in health."""
    out: list[int] = []

    def walk(node: dict) -> None:
        if node.get("kind") == "language_server":
            out.extend(p["pid"] for p in node.get("pids", [])[1:] if p.get("alive"))
        for c in node.get("children", []):
            walk(c)

    walk(rt.health())
    return out


def health_nodes(rt: Any, kind: str = "language_server") -> list[dict]:
    found: list[dict] = []

    def walk(node: dict) -> None:
        if node.get("kind") == kind:
            found.append(node)
        for c in node.get("children", []):
            walk(c)

    walk(rt.health())
    return found


def kinds(**limits: Any) -> list:
    """The production kinds, with the language servers' limits changed."""
    import dataclasses

    from tether.lsp.limits import LspLimits
    from tether.runtime import load_kinds

    out = []
    for k in load_kinds():
        if k.kind == "language_server":
            config = {**k.config, "limits": {**LspLimits().to_config(), **limits}}
            k = dataclasses.replace(k, config=config)
        out.append(k)
    return out


def hover(run: Any, file: str, line: int, symbol: str, scope: Any = None) -> Any:
    """An `lsp hover` of `run` (under `scope`, a CallScope, when given)."""
    args = {"action": "hover", "file": file, "line": line, "symbol": symbol}
    return run.call("lsp", args, scope)


def server_status(run: Any) -> dict:
    """`lsp status`'s record of the run's (first) running server: pid, restarts, counts."""
    return run.call("lsp", {"action": "status"}).data["running"][0]


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    t0 = time.monotonic()
    result = fn(*args)
    return result, time.monotonic() - t0


def in_background(fn: Any, *args: Any) -> tuple[threading.Thread, list]:
    """Run fn(*args) on a thread; the list gets (result, seconds taken) when it returns."""
    box: list = []

    def target() -> None:
        t0 = time.monotonic()
        box.append((fn(*args), time.monotonic() - t0))

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def slow_source(functions: int = 40, names: int = 200) -> str:
    """A file whose last line's hover makes basedpyright infer every function's return type
    through a loop of `names` interdependent variables: ~0.6 s a function here, all of it
    in checks of the cancellation token."""
    out = []
    for j in range(functions):
        init = "; ".join(f"v{i} = 0" for i in range(names))
        body = "".join(
            f"        v{i} = v{(i + 1) % names} + v{(i * 7) % names}\n" for i in range(names)
        )
        out.append(f"def g{j}():\n    {init}\n    while True:\n{body}        yield v0\n")
    out.append("r = (" + ", ".join(f"g{j}()" for j in range(functions)) + ")\n")
    return "".join(out)
