"""The host-side Run: construction, concurrency (threads and asyncio), lifetime, context."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tether.questions import Answer
from tether.run import Run
from tether.tools.registry import Registry
from tether.tools.results import ToolResult
from tether.tools.spec import Needs, Surface, Tier, ToolSpec

from .conftest import KindsRuntime, ScriptedPort


def test_no_runtime_no_workdir() -> None:
    with Run() as r:
        assert [t.name for t in r.tools()] == []
        assert r.connected() == frozenset()
        res = r.call("read", {"path": "x"})
    assert res.is_error and "the run has no working directory" in res.text


def test_bad_workdir(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a directory"):
        Run(workdir=tmp_path / "missing")


def test_bad_surface(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match="unknown surface 'admin': use one of default, plan, readonly"
    ):
        Run(workdir=tmp_path, surface="admin")


def test_surface_string(tmp_path: Path) -> None:
    assert Run(workdir=tmp_path, surface="PLAN").surface is Surface.PLAN


def test_connected_from_runtime_kinds(tmp_path: Path) -> None:
    rt = KindsRuntime({"language_server", "parser", "kernel", "debug_session", "echo"})
    r = Run(runtime=rt, run_id="c", workdir=tmp_path, question_port=ScriptedPort(), vibe=True)
    assert r.connected() == frozenset(Needs)


def test_runtime_that_raises_has_nothing_connected(tmp_path: Path) -> None:
    class Broken(KindsRuntime):
        def connected_kinds(self) -> set[str]:
            raise ConnectionError("admin gone")

    assert Run(runtime=Broken(set()), workdir=tmp_path).connected() == frozenset({Needs.WORKDIR})


def test_closed_run_refuses(run: Run) -> None:
    run.close()
    run.close()  # idempotent
    res = run.call("read", {"path": "README.md"})
    assert res.is_error and res.text == "read: this run is closed; open a new run to call tools."


def test_close_tells_the_runtime(tmp_path: Path) -> None:
    closed = []

    class Rt(KindsRuntime):
        def close_run(self, run_id: str, timeout: float = 5.0) -> None:
            closed.append(run_id)

    with Run(runtime=Rt(set()), run_id="conv-9", workdir=tmp_path):
        pass
    assert closed == ["conv-9"]


def test_context_state_is_per_run(tmp_path: Path) -> None:
    def remember(ctx, args) -> ToolResult:  # noqa: ANN001
        fam = ctx.state.setdefault("fam", {"n": 0})
        fam["n"] += 1
        return ToolResult.ok(str(fam["n"]))

    spec = ToolSpec("count", Tier.READ, "c", {"type": "object"}, remember)
    registry = Registry([spec])
    a, b = Run(workdir=tmp_path, registry=registry), Run(workdir=tmp_path, registry=registry)
    assert [a.call("count").text, a.call("count").text, b.call("count").text] == ["1", "2", "1"]


def test_context_call_tool_runs_the_pipeline(run: Run) -> None:
    ctx = run.context()
    assert ctx.call_tool("read", {"path": "README.md"}).text == "     1\t# demo"
    assert ctx.call_tool("read", {"path": "/etc/passwd"}).is_error


def test_many_threads(run: Run, workdir: Path) -> None:
    results: list[ToolResult] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        res = run.call("write", {"path": f"out/{i}.txt", "content": str(i)})
        with lock:
            results.append(res)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 20 and not any(r.is_error for r in results)
    assert sorted(p.read_text() for p in (workdir / "out").iterdir()) == sorted(
        str(i) for i in range(20)
    )


def test_acall_many_tasks_while_one_blocks(workdir: Path) -> None:
    """A question waiting for a human does not hold up the other calls."""
    release = threading.Event()
    port = ScriptedPort(answer=Answer.answered(text="ok"), block=release)

    async def main() -> list[ToolResult]:
        with Run(workdir=workdir, question_port=port) as r:
            waiting = asyncio.create_task(r.acall("ask_user", {"question": "go?"}))
            reads = await asyncio.wait_for(
                asyncio.gather(*(r.acall("read", {"path": "README.md"}) for _ in range(30))), 10
            )
            assert not waiting.done()
            release.set()
            answer = await asyncio.wait_for(waiting, 10)
            return [*reads, answer]

    out = asyncio.run(main())
    assert all(r.text == "     1\t# demo" for r in out[:-1])
    assert out[-1].text == "The user answered question #1: wrote: ok"


def test_acall_returns_errors_too(run: Run) -> None:
    res = asyncio.run(run.acall("nope", {}))
    assert res.is_error and "unknown tool 'nope'" in res.text


def test_concurrent_writes_into_one_new_directory(tmp_path: Path) -> None:
    """Regression: 20 threads creating files in the same missing folder raced on its mkdir
    ("write failed: File exists")."""

    def write_all(run: Run) -> list[ToolResult]:
        results: list[ToolResult] = []

        def worker(i: int) -> None:
            results.append(run.call("write", {"path": f"new/deep/{i}.txt", "content": str(i)}))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        return results

    for trial in range(10):
        wd = tmp_path / str(trial)
        wd.mkdir()
        results = write_all(Run(workdir=wd))
        assert [r.text for r in results if r.is_error] == []
        assert len(list((wd / "new" / "deep").iterdir())) == 20


def test_acall_reuses_its_threads(tmp_path: Path) -> None:
    idents: list[int] = []

    def where(ctx: object, args: dict) -> ToolResult:
        idents.append(threading.get_native_id())
        return ToolResult.ok("here")

    spec = ToolSpec("where", Tier.READ, "w", {"type": "object"}, where)
    run = Run(workdir=tmp_path, registry=Registry([spec]))

    async def some() -> None:
        for _ in range(20):
            assert (await run.acall("where")).text == "here"

    kept = sum(t.name == "tether-call" for t in threading.enumerate())  # (earlier tests')
    asyncio.run(some())
    # one call at a time: served by the threads already there, or one more (never 20)
    assert len(idents) == 20 and len(set(idents)) <= kept + 1, (kept, idents)
