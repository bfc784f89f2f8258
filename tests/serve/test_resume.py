"""A conversation outlives its `tether serve`: a real server, SIGTERMed, and a new one on the
same state dir, driven by the SDK's streamable-HTTP client. Staged edits are accepted (or
refused, the file having changed) after the restart, breakpoints are there at the next
launch (debugpy), and a corrupt state file is refused while the other conversations go on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

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


def restarted(first: Served, tmp_path: Path) -> Served:
    assert first.stop() == 0  # SIGTERM: the drain saves every conversation
    return start_server(tmp_path, workdirs=first.workdirs)


def test_staged_edits_and_breakpoints_outlive_the_server(tmp_path: Path) -> None:
    first = start_server(tmp_path, workdirs=workdirs(tmp_path))
    try:

        async def before() -> tuple[str, list[str]]:
            async with first.client() as client:
                handle = await open_conversation(client, "app")
                ids = [await stage(client, handle, "a.py"), await stage(client, handle, "b.py")]
                bps = await call(client, handle, "debug", op="breakpoints", file="prog.py",
                                 lines=[3])  # fmt: skip
                assert not bps.is_error, text(bps)
                cell = await call(client, handle, "eval", code="x = 41",
                                  description="keep a number in the interpreter")  # fmt: skip
                assert not cell.is_error, text(cell)
                return handle, ids

        handle, (edit_a, edit_b) = anyio.run(before)
    except BaseException:
        first.stop()
        raise
    app = first.workdirs["app"]
    second = restarted(first, tmp_path)
    try:
        (app / "b.py").write_text("print(20)\n")  # changed while no server held it

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
    finally:
        second.stop()


def test_a_corrupt_state_file_is_refused_and_the_other_conversations_go_on(
    tmp_path: Path,
) -> None:
    first = start_server(tmp_path, workdirs=workdirs(tmp_path))
    try:

        async def before() -> tuple[str, str, str]:
            async with first.client() as client:
                app = await open_conversation(client, "app")
                lib = await open_conversation(client, "lib")
                return app, lib, await stage(client, app, "a.py") + await stage(client, lib, "a.py")

        app, lib, _ids = anyio.run(before)
    except BaseException:
        first.stop()
        raise
    second_state = first.state_dir / "serve-runs"
    assert first.stop() == 0
    kept = second_state / f"{lib}.state"
    kept.write_bytes(kept.read_bytes()[:40])  # cut short, as a full disk or a crash might
    second = start_server(tmp_path, workdirs=first.workdirs)
    try:

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
        assert (first.workdirs["lib"] / "a.py").read_text() == "print(1)\n"
        assert not on_app.is_error, text(on_app)
        assert (first.workdirs["app"] / "a.py").read_text() == "log(1)\n"
        assert (second_state / f"{lib}.state.refused").exists()
        assert "its kept state refused" in (tmp_path / "serve.err").read_text()
    finally:
        second.stop()


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
    tmp_path: Path,
) -> None:
    gated = tmp_path / "gated"
    gated.mkdir()
    config = tmp_path / "serve-config"
    config.write_text(json.dumps({"workdirs": {"gated": {"path": str(gated),
                                                         "approval": {"write": "ask"}}}}))  # fmt: skip
    asked: list[Any] = []

    async def allow(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"choice": "allow"})

    async def write(server: Served, handle: str, path: str) -> tuple[str, Any]:
        async with server.client("legacy", elicitation_callback=allow) as client:
            handle = handle or await open_conversation(client, "gated")
            return handle, await call(client, handle, "write", path=path, content="x\n")

    first = start_server(tmp_path, "--config", str(config), workdirs={})
    try:
        handle, wrote = anyio.run(write, first, "", "one.txt")
        assert not wrote.is_error, text(wrote)
    finally:
        assert first.stop() == 0
    second = start_server(tmp_path, "--config", str(config), workdirs={})
    try:
        _handle, again = anyio.run(write, second, handle, "two.txt")
        kept = second.state_dir / "serve-runs" / f"{handle}.state"
        wait_until(lambda: b'"last":2' in kept.read_bytes(), timeout=10)
    finally:
        second.stop()
    assert not again.is_error and (gated / "two.txt").exists(), text(again)
    assert "the approvals given before (cards #1) allowed those calls only" in text(again)
    assert len(asked) == 2  # the restart asked again: an approval is for one call
    cards = json.loads(kept.read_bytes())["cards"]
    assert cards == {"last": 2, "approved": [{"card": 1, "tool": "write"},
                                             {"card": 2, "tool": "write"}]}  # fmt: skip
