"""Progress over HTTP says what a long call waits on, at 2026-07-28 and in a 2025-11-25
session: a first lsp query on a TypeScript project hears that its server is indexing (its
`$/progress` title, from the real typescript-language-server); a long cell, what it printed
so far (real ipykernel)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.serve.conftest import VERSIONS, Served, SharedServer, text

CELL = "print four steps a second apart"
VENV_BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"


def ts_project(root: Path, modules: int = 300) -> Path:
    """A project big enough that tsserver's start ('Initializing JS/TS ...') takes seconds."""
    (root / "src").mkdir(parents=True)
    (root / "package.json").write_text('{"name": "p", "version": "1.0.0"}')
    (root / "tsconfig.json").write_text('{"compilerOptions": {"strict": true}, "include": ["src"]}')
    line = "export function f{i}_{j}(x: number): number {{ return x + {j}; }}\n"
    for i in range(modules):
        body = "".join(line.format(i=i, j=j) for j in range(40))
        (root / "src" / f"m{i}.ts").write_text(body)
    (root / "src" / "main.ts").write_text(
        "import { f1_1 } from './m1';\nexport const y = f1_1(2);\n"
    )
    return root


def slow_search_project(root: Path, files: int = 40) -> Path:
    """Files whose every candidate backtracks for a while (no match: `c` is never an
    argument): a search of them takes seconds, most of it inside the parser slots."""
    root.mkdir(parents=True)
    body = "c = 1\n" + ("f(" + ", ".join(["a"] * 60) + ")\n") * 2
    for i in range(files):
        (root / f"m{i}.py").write_text(body)
    return root


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """The module's server, with a TypeScript project and a slow-to-search one per protocol
    version: each version's test is the first query on its project (the language server
    and the parser slots are shared by the conversations of a server)."""
    tmp = tmp_path_factory.mktemp("progress")
    projects = {}
    for mode in VERSIONS:
        projects[f"ts-{mode}"] = ts_project(tmp / f"ts-{mode}")
        projects[f"big-{mode}"] = slow_search_project(tmp / f"big-{mode}")
    shared = SharedServer(tmp, projects=projects)
    yield shared
    shared.close()


@pytest.mark.parametrize("mode", VERSIONS)
def test_a_first_lsp_query_hears_that_its_server_is_indexing(served: Served, mode: str) -> None:
    path = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    if shutil.which("typescript-language-server", path=path) is None:
        pytest.skip("typescript-language-server is not installed: run bash scripts/install.sh")
    seen: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async def scenario() -> Any:
        async with served.client(mode) as client:
            opened = await client.call_tool("open_conversation", {"workdir": f"ts-{mode}"})
            handle = opened.structured_content["conversation"]
            args = {"action": "hover", "file": "src/main.ts", "line": 2, "symbol": "f1_1"}
            return await client.call_tool(
                "lsp", {"conversation": handle, **args}, progress_callback=on_progress
            )

    hover = anyio.run(scenario)
    assert not hover.is_error and "f1_1(x: number): number" in text(hover), text(hover)
    indexing = [m for m in seen if "typescript-language-server indexing: Initializing JS/TS" in m]
    assert indexing, seen
    assert all(m.startswith("lsp: ") for m in seen), seen


@pytest.mark.parametrize("mode", VERSIONS)
def test_a_long_cell_reports_its_output_so_far(served: Served, mode: str) -> None:
    code = (
        "import time\n"
        "for step in range(1, 5):\n"
        "    print(f'step {step} of 4', flush=True)\n"
        "    time.sleep(1.0)\n"
        "'done'"
    )
    seen: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async def scenario() -> Any:
        async with served.client(mode) as client:
            opened = await client.call_tool("open_conversation", {"workdir": "app"})
            handle = opened.structured_content["conversation"]
            args = {"conversation": handle, "code": code, "description": CELL}
            return await client.call_tool("eval", args, progress_callback=on_progress)

    done = anyio.run(scenario)
    assert not done.is_error and "step 4 of 4" in text(done), text(done)
    steps = [m for m in seen if "output so far: step " in m]
    assert steps, seen
    assert all(m.startswith("eval: ") for m in seen), seen


@pytest.mark.parametrize("mode", VERSIONS)
def test_a_long_structural_search_reports_the_files_searched(served: Served, mode: str) -> None:
    seen: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async def scenario() -> Any:
        async with served.client(mode) as client:
            opened = await client.call_tool("open_conversation", {"workdir": f"big-{mode}"})
            handle = opened.structured_content["conversation"]
            args = {"pattern": "f($$$A, a, $$$B, a, $$$C, c)", "language": "python"}
            return await client.call_tool(
                "ast_grep", {"conversation": handle, **args}, progress_callback=on_progress
            )

    found = anyio.run(scenario)
    assert not found.is_error and "no matches" in text(found).lower(), text(found)
    counts = [re.search(r"files searched: (\d+) of (\d+)", m) for m in seen]
    pairs = [(int(c[1]), int(c[2])) for c in counts if c]
    assert pairs and all(0 < n <= 40 and of == 40 for n, of in pairs), seen
    assert all(m.startswith("ast_grep: ") for m in seen), seen
