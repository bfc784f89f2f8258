"""A conversation outlives its `tether serve`: a real server, SIGTERMed, and a new one on the
same state dir, driven by the SDK's streamable-HTTP client. Staged edits are accepted (or
refused, the file having changed) after the restart, breakpoints are there at the next
launch (debugpy), and a corrupt state file is refused while the other conversations go on.
The tests whose servers stop the same way (SIGTERM) share one pair (`drained`: each
test's first half runs on the first server, its second on the next; each has workdirs of
its own); the killed server takes a pair of its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.conftest import wait_until
from tests.serve.conftest import Served, start_server, text
from tests.serve.test_serve import open_conversation

PROGRAM = "total = 0\nfor i in range(3):\n    total += i\nprint(total)\n"


def workdirs(tmp_path: Path) -> dict[str, Path]:
    dirs = {"app": tmp_path / "app", "lib": tmp_path / "lib"}
    for d in dirs.values():
        d.mkdir(exist_ok=True)
        (d / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # debugpy's root marker
        (d / "a.py").write_text("print(1)\n")
        (d / "b.py").write_text("print(2)\n")
        (d / "prog.py").write_text(PROGRAM)
    return dirs


async def call(client: Any, handle: str, tool: str, **args: Any) -> Any:
    return await client.call_tool(tool, {"conversation": handle, **args})


async def stage(client: Any, handle: str, path: str) -> str:
    staged = await call(client, handle, "ast_edit", pattern="print($X)", rewrite="log($X)",
                        language="python", path=path)  # fmt: skip
    assert not staged.is_error, text(staged)
    return str(staged.structured_content["edit_id"])


@dataclass
class Drained:
    """One server SIGTERMed and one started on its state dir, shared by the tests whose
    conversations outlive a drain: `kept` holds what each test's first half (on the first
    server) returned, by test; its second half calls the second server."""

    first: Served
    second: Served
    kept: dict[str, Any]


async def staged_edits_before(client: Any) -> tuple[str, list[str]]:
    """test_staged_edits_and_breakpoints_outlive_the_server, on the first server (app)."""
    handle = await open_conversation(client, "app")
    ids = [await stage(client, handle, "a.py"), await stage(client, handle, "b.py")]
    bps = await call(client, handle, "debug", op="breakpoints", file="prog.py",
                     lines=[3])  # fmt: skip
    assert not bps.is_error, text(bps)
    cell = await call(client, handle, "eval", code="x = 41",
                      description="keep a number in the interpreter")  # fmt: skip
    assert not cell.is_error, text(cell)
    return handle, ids


async def corrupt_state_before(client: Any) -> tuple[str, str]:
    """test_a_corrupt_state_file_is_refused_and_the_other_conversations_go_on, on the
    first server (workdirs of its own: app2, lib2)."""
    app = await open_conversation(client, "app2")
    lib = await open_conversation(client, "lib2")
    await stage(client, app, "a.py")
    await stage(client, lib, "a.py")
    return app, lib


def approvals_config(tmp: Path) -> Path:
    """test_approvals_given_...: a workdir `gated` whose writes ask the client's human."""
    gated = tmp / "gated"
    gated.mkdir()
    config = tmp / "serve-config"
    config.write_text(json.dumps({"workdirs": {"gated": {"path": str(gated),
                                                         "approval": {"write": "ask"}}}}))  # fmt: skip
    return config


async def approvals_write(
    server: Served, handle: str, path: str, asked: list[Any]
) -> tuple[str, Any]:
    """test_approvals_given_...: a write in `gated` (a new conversation without a handle),
    from a client whose human allows every card (and is counted in `asked`)."""

    async def allow(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"choice": "allow"})

    async with server.client("legacy", elicitation_callback=allow) as client:
        handle = handle or await open_conversation(client, "gated")
        return handle, await call(client, handle, "write", path=path, content="x\n")


@pytest.fixture(scope="module")
def drained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drained]:
    """Each test's first half on the first server, a SIGTERM (the drain saves every
    conversation), what each test changes while no server runs, the second server."""
    tmp = tmp_path_factory.mktemp("drained")
    (tmp / "one").mkdir()
    (tmp / "two").mkdir()
    dirs = {**workdirs(tmp / "one"), **{f"{n}2": d for n, d in workdirs(tmp / "two").items()}}
    config = ("--config", str(approvals_config(tmp)))
    first = start_server(tmp, *config, workdirs=dirs)
    try:

        async def before() -> dict[str, Any]:
            asked: list[Any] = []
            async with first.client() as client:
                return {
                    "staged": await staged_edits_before(client),
                    "corrupt": await corrupt_state_before(client),
                    "approvals": (*await approvals_write(first, "", "one.txt", asked), asked),
                }

        kept = anyio.run(before)
    except BaseException:
        first.stop()
        raise
    assert first.stop() == 0
    # while no server runs: the staged b.py changes (test_staged_edits_...), and the lib
    # conversation's state file is cut short, as a full disk or a crash might (test_a_corrupt_...)
    (dirs["app"] / "b.py").write_text("print(20)\n")
    _app, lib = kept["corrupt"]
    state = first.state_dir / "serve-runs" / f"{lib}.state"
    state.write_bytes(state.read_bytes()[:40])
    second = start_server(tmp, *config, workdirs=dirs)
    try:
        yield Drained(first, second, kept)
    finally:
        second.stop()


def test_staged_edits_and_breakpoints_outlive_the_server(drained: Drained) -> None:
    handle, (edit_a, edit_b) = drained.kept["staged"]
    app = drained.first.workdirs["app"]  # (b.py changed while no server held it)
    second = drained.second

    async def after() -> tuple[Any, ...]:
        async with second.client("2026-07-28") as client:
            accepted = await call(client, handle, "resolve", edit_id=edit_a, action="accept")
            refused = await call(client, handle, "resolve", edit_id=edit_b, action="accept")
            listed = await call(client, handle, "debug", op="breakpoints")
            launched = await call(client, handle, "debug", op="launch", program="prog.py")
            await call(client, handle, "debug", op="terminate")
            cell = await call(client, handle, "eval", code="x + 1",
                              description="read the number kept before the restart")  # fmt: skip
            again = await call(client, handle, "eval", code="1 + 1",
                               description="a second cell in the new interpreter")  # fmt: skip
            return accepted, refused, listed, launched, cell, again

    accepted, refused, listed, launched, cell, again = anyio.run(after)
    assert not accepted.is_error, text(accepted)
    assert text(accepted).startswith("(this conversation was resumed by a restarted server")
    assert f"2 staged edits ({edit_a}, {edit_b}" in text(accepted)
    assert "1 breakpoint(s)" in text(accepted)
    assert (app / "a.py").read_text() == "log(1)\n"
    assert refused.is_error and "changed since it was staged: b.py" in text(refused)
    assert (app / "b.py").read_text() == "print(20)\n"
    assert "prog.py:3" in text(listed), text(listed)
    assert not launched.is_error, text(launched)
    assert launched.structured_content["outcome"] == "stopped"
    assert "stopped at prog.py:3 (breakpoint)" in text(launched), text(launched)
    assert "the debug session this conversation had" not in text(launched)  # never launched
    assert text(cell).startswith("(the interpreter this conversation had before the server")
    assert "(python) is gone" in text(cell) and "NameError" in text(cell)
    assert not again.is_error and "is gone" not in text(again)  # said once


def test_a_corrupt_state_file_is_refused_and_the_other_conversations_go_on(
    drained: Drained,
) -> None:
    app, lib = drained.kept["corrupt"]  # (lib's state file was cut short between the two)
    second = drained.second

    async def after() -> tuple[Any, Any, Any]:
        async with second.client() as client:
            on_lib = await call(client, lib, "read", path="a.py")
            again = await call(client, lib, "resolve", edit_id="edit_1", action="accept")
            on_app = await call(client, app, "resolve", edit_id="edit_1", action="accept")
            return on_lib, again, on_app

    on_lib, again, on_app = anyio.run(after)
    assert not on_lib.is_error and "print(1)" in text(on_lib)
    assert "the state kept for it was refused" in text(on_lib)
    assert f"{lib}.state: it is not JSON" in text(on_lib)
    assert again.is_error and "unknown edit_id 'edit_1'" in text(again)
    assert (second.workdirs["lib2"] / "a.py").read_text() == "print(1)\n"
    assert not on_app.is_error, text(on_app)
    assert (second.workdirs["app2"] / "a.py").read_text() == "log(1)\n"
    assert (second.state_dir / "serve-runs" / f"{lib}.state.refused").exists()
    assert "its kept state refused" in (second.state_dir.parent / "serve.err").read_text()


def test_the_state_is_kept_as_it_changes_so_a_killed_server_loses_none_of_it(
    tmp_path: Path,
) -> None:
    first = start_server(tmp_path, workdirs=workdirs(tmp_path))
    try:

        async def before() -> str:
            async with first.client() as client:
                handle = await open_conversation(client, "app")
                bps = await call(client, handle, "debug", op="breakpoints", file="prog.py",
                                 lines=[{"line": 3, "condition": "i == 2"}])  # fmt: skip
                assert not bps.is_error, text(bps)
                return handle

        handle = anyio.run(before)
        kept = first.state_dir / "serve-runs" / f"{handle}.state"
        wait_until(lambda: kept.exists() and b'"i == 2"' in kept.read_bytes(), timeout=10)
    finally:
        first.proc.kill()  # no drain: what is kept is what was saved as the call ended
        first.proc.wait(timeout=30)
    second = start_server(tmp_path, workdirs=first.workdirs)
    try:

        async def after() -> Any:
            async with second.client("2026-07-28") as client:
                return await call(client, handle, "debug", op="launch", program="prog.py")

        launched = anyio.run(after)
        assert not launched.is_error, text(launched)
        assert "stopped at prog.py:3 (breakpoint)" in text(launched), text(launched)
        frames = launched.structured_content
        assert frames["outcome"] == "stopped"
    finally:
        second.stop()


def test_approvals_given_are_recorded_and_a_restart_asks_again_with_the_next_card_number(
    drained: Drained,
) -> None:
    handle, wrote, asked = drained.kept["approvals"]
    assert not wrote.is_error, text(wrote)
    second = drained.second
    _handle, again = anyio.run(approvals_write, second, handle, "two.txt", asked)
    kept = second.state_dir / "serve-runs" / f"{handle}.state"
    wait_until(lambda: b'"last":2' in kept.read_bytes(), timeout=10)
    gated = second.state_dir.parent / "gated"
    assert not again.is_error and (gated / "two.txt").exists(), text(again)
    assert "the approvals given before (cards #1) allowed those calls only" in text(again)
    assert len(asked) == 2  # the restart asked again: an approval is for one call
    cards = json.loads(kept.read_bytes())["cards"]
    assert cards == {"last": 2, "approved": [{"card": 1, "tool": "write"},
                                             {"card": 2, "tool": "write"}]}  # fmt: skip
