"""Over HTTP: a cancelled call reaches the kernel (the next cell answers within 2 s) and the
language server (a long `references` stopped: the next hover answers within 2 s), a long
call hears progress, and SIGTERM drains: two calls in flight both answered, 0 processes left."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import wait_until
from tests.lsp.test_lsp_cancel import references_project
from tests.serve.conftest import VERSIONS, Served, served_health, start_server, stop, text

VENV_BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"

DESCRIPTION = "count slowly so the call can be cancelled"
LOOP = (  # (the file is replaced whole: an interrupt never leaves it empty)
    "import os, time\nticks = 0\nfor _ in range(80):\n    ticks += 1\n"
    "    open('ticks.new', 'w').write(str(ticks))\n    os.replace('ticks.new', 'ticks')\n"
    "    time.sleep(0.1)\n"
)


def ticks(workdir: Path) -> int:
    try:
        return int((workdir / "ticks").read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def cell(handle: str, code: str) -> dict[str, Any]:
    return {"conversation": handle, "code": code, "description": DESCRIPTION}


async def wait_for(predicate: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout} s: {predicate}"
        await anyio.sleep(0.02)


@pytest.mark.parametrize("mode", VERSIONS)
def test_a_cancelled_eval_loop_is_interrupted_and_the_next_cell_answers_within_2s(
    served: Served, mode: str
) -> None:
    app = served.workdirs["app"]

    async def scenario() -> tuple[float, str]:
        async with served.client(mode) as client:
            opened = await client.call_tool("open_conversation", {"workdir": "app"})
            handle = opened.structured_content["conversation"]
            with anyio.CancelScope() as cancel:  # the client gives up on the call
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.call_tool, "eval", cell(handle, LOOP))
                    await wait_for(lambda: ticks(app) >= 3, timeout=60)
                    cancelled_at = time.monotonic()
                    cancel.cancel()
            after = await client.call_tool("eval", cell(handle, "ticks"))
            return time.monotonic() - cancelled_at, text(after)

    elapsed, after = anyio.run(scenario)
    assert elapsed < 2.0, f"the next cell answered {elapsed:.2f} s after the cancel"
    counted = int(after.strip())
    assert 3 <= counted < 80, after  # 80: the next cell waited for the loop's end
    assert counted - 1 <= ticks(app) <= counted  # (interrupted before or after its write)


HELLO = {"file": "src/a.ts", "line": 1, "symbol": "hello"}


def pending_requests(state_dir: Path) -> int:
    """Requests the served runtime's language servers have open (its health, read from
    another process as `tether status` does)."""
    found = 0

    def walk(node: Any) -> None:
        nonlocal found
        if node.get("kind") == "language_server":
            found += int(node.get("extra", {}).get("pending_requests") or 0)
        for child in node.get("children", []):
            walk(child)

    walk(served_health(state_dir))
    return found


@pytest.fixture(scope="module")
def ts_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for both protocol versions, on a project whose `references` of hello
    takes ~11 s (tests/lsp/test_lsp_cancel.py: 12000 files)."""
    path = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    if shutil.which("typescript-language-server", path=path) is None:
        pytest.skip("typescript-language-server is not installed: run bash scripts/install.sh")
    tmp = tmp_path_factory.mktemp("ts-references")
    server = start_server(tmp, workdirs={"ts": references_project(tmp / "ts")})
    yield server
    stop(server)


@pytest.mark.slow
@pytest.mark.parametrize("mode", VERSIONS)
def test_a_cancelled_reference_search_frees_the_server_for_the_next_hover_within_2s(
    ts_served: Served, mode: str
) -> None:
    state = ts_served.state_dir

    async def scenario() -> tuple[float, Any, Any, Any]:
        async with ts_served.client(mode) as client:
            opened = await client.call_tool("open_conversation", {"workdir": "ts"})
            handle = opened.structured_content["conversation"]
            hover = {"conversation": handle, "action": "hover", **HELLO}
            status = {"conversation": handle, "action": "status"}
            deadline = time.monotonic() + 180  # tsserver loads 12000 files first
            while (ready := await client.call_tool("lsp", hover)).is_error:
                assert time.monotonic() < deadline, text(ready)
            before = await client.call_tool("lsp", status)
            references = {"conversation": handle, "action": "references", **HELLO}
            with anyio.CancelScope() as cancel:  # the client gives up on the call
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.call_tool, "lsp", references)
                    deadline = time.monotonic() + 30
                    while not await anyio.to_thread.run_sync(pending_requests, state):
                        assert time.monotonic() < deadline, "references never reached the server"
                        await anyio.sleep(0.05)
                    cancelled_at = time.monotonic()
                    cancel.cancel()
            after = await client.call_tool("lsp", hover)
            elapsed = time.monotonic() - cancelled_at
            return elapsed, after, before, await client.call_tool("lsp", status)

    elapsed, after, before, status = anyio.run(scenario)
    assert not after.is_error and "hello(x: number): number" in text(after), text(after)
    assert elapsed < 2.0, f"the next hover answered {elapsed:.2f} s after the cancel"
    [was] = before.structured_content["running"]
    [now] = status.structured_content["running"]
    assert now["pid"] == was["pid"] and now["restarts"] == was["restarts"], (was, now)
    assert now["cancelled_requests"] == was["cancelled_requests"] + 1, (was, now)


def test_a_call_longer_than_a_second_reports_progress(served: Served) -> None:
    async def scenario() -> tuple[Any, list[float]]:
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        async with served.client() as client:
            opened = await client.call_tool("open_conversation", {"workdir": "app"})
            handle = opened.structured_content["conversation"]
            code = "import time\ntime.sleep(2.5)\n'slept'"
            done = await client.call_tool("eval", cell(handle, code), progress_callback=on_progress)
            return done, seen

    done, seen = anyio.run(scenario)
    assert not done.is_error and "slept" in text(done), text(done)
    assert len(seen) >= 1 and all(p >= 1.0 for p in seen) and seen == sorted(seen)


def test_sigterm_drains_two_calls_in_flight_then_leaves_no_process(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--grace", "30")
    code = "import time\nopen('started', 'w').write('1')\ntime.sleep(3)\n'finished'"

    async def scenario() -> tuple[list[Any], Any]:
        results: list[Any] = []
        refused: list[Any] = []

        async def converse(client: Any, handle: str) -> None:
            results.append(await client.call_tool("eval", cell(handle, code)))

        async with server.client() as a, server.client() as b:
            handles = []
            for client, workdir in ((a, "app"), (b, "lib")):
                opened = await client.call_tool("open_conversation", {"workdir": workdir})
                handles.append(opened.structured_content["conversation"])
            async with anyio.create_task_group() as tg:
                tg.start_soon(converse, a, handles[0])
                tg.start_soon(converse, b, handles[1])
                await wait_for(
                    lambda: all((d / "started").exists() for d in server.workdirs.values()), 60
                )
                server.proc.send_signal(signal.SIGTERM)
                await wait_for(lambda: "draining" in (tmp_path / "serve.err").read_text(), 10)
                refused.append(await a.call_tool("open_conversation", {"workdir": "app"}))
        return results, refused[0]

    tree = server.tree()
    assert tree, "the server has no actor tree"
    results, refused = anyio.run(scenario)
    assert [r.is_error for r in results] == [False, False], [text(r) for r in results]
    assert all("finished" in text(r) for r in results)
    assert refused.is_error and "draining" in text(refused)
    assert server.proc.wait(timeout=60) == 0
    wait_until(lambda: not any(p.is_running() and p.status() != "zombie" for p in tree), 30)
