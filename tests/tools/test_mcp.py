"""`tether mcp`: one run's tools over MCP stdio, driven by the SDK's own client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import wait_until


def session_over_stdio(workdir: Path, *extra: str) -> Any:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tether.cli", "mcp", "--workdir", str(workdir), *extra],
    )
    return stdio_client(params)


def serving(workdir: Path) -> list[psutil.Process]:
    """The server and every process of its tree (actors fork with its command line)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "mcp" in cmdline and str(workdir) in cmdline:
            found.append(proc)
    return found


def drive(workdir: Path, *extra: str, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    async def go() -> Any:
        async with session_over_stdio(workdir, *extra) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                results = [await session.call_tool(name, args) for name, args in calls]
                return tools, results

    return anyio.run(go)


def test_a_client_lists_the_tools_with_their_tiers_and_calls_them(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    tools, (read, missing, written) = drive(
        tmp_path,
        calls=[
            ("read", {"path": "notes.txt"}),
            ("read", {"path": "nope.txt"}),
            ("write", {"path": "new.txt", "content": "made over MCP\n"}),
        ],
    )
    by_name = {t.name: t for t in tools}
    assert {"read", "write", "edit", "ast_grep", "lsp"} <= set(by_name)
    assert by_name["read"].annotations.read_only_hint is True
    assert by_name["write"].annotations.destructive_hint is True
    assert by_name["read"].input_schema["required"] == ["path"]
    assert not read.is_error and "second line" in read.content[0].text
    assert missing.is_error and "no such file: 'nope.txt'" in missing.content[0].text
    assert not written.is_error, written.content[0].text
    assert (tmp_path / "new.txt").read_text() == "made over MCP\n"
    # the client closed the server's stdin: the server and its actor tree are gone
    wait_until(lambda: not serving(tmp_path), timeout=15.0)


def test_a_plan_surface_shows_no_write_tool_and_a_call_to_one_is_a_protocol_error(
    tmp_path,
) -> None:
    from mcp.shared.exceptions import MCPError

    async def go() -> Any:
        async with session_over_stdio(tmp_path, "--surface", "plan") as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                info = await session.initialize()
                tools = (await session.list_tools()).tools
                try:
                    await session.call_tool("write", {"path": "x.txt", "content": "x"})
                except MCPError as e:
                    return info, tools, e
                raise AssertionError("a hidden tool was called")

    info, tools, refused = anyio.run(go)
    names = {t.name for t in tools}
    assert "read" in names and "write" not in names
    assert refused.error.code == -32602 and "unknown tool 'write'" in refused.error.message
    assert info.server_info.version == "0.1.0"
    assert not (tmp_path / "x.txt").exists()
    wait_until(lambda: not serving(tmp_path), timeout=15.0)


def test_tools_carry_titles_output_schemas_and_annotations_that_match_them(tmp_path) -> None:
    tools, (staged,) = drive(
        tmp_path, calls=[("ast_grep", {"pattern": "print($X)", "language": "python"})]
    )
    by_name = {t.name: t for t in tools}
    assert by_name["ast_edit"].annotations.destructive_hint is False  # it only stages
    assert by_name["resolve"].annotations.destructive_hint is True
    assert by_name["lsp"].title == "Language server query"
    assert by_name["read"].output_schema == {"type": "object", "additionalProperties": True}
    assert not staged.is_error and isinstance(staged.structured_content, dict)
    wait_until(lambda: not serving(tmp_path), timeout=15.0)


def test_a_structural_search_runs_on_the_actor_tree_behind_the_server(tmp_path) -> None:
    (tmp_path / "m.py").write_text("def f(a):\n    return g(a, 1)\n")
    _, (found,) = drive(
        tmp_path, calls=[("ast_grep", {"pattern": "g($A, $B)", "language": "python"})]
    )
    assert not found.is_error, found.content[0].text
    assert "m.py:2" in found.content[0].text
    wait_until(lambda: not serving(tmp_path), timeout=15.0)  # the parser actors went too


def test_a_workdir_that_is_not_a_directory_is_refused(tmp_path) -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "tether.cli", "mcp", "--workdir", str(tmp_path / "no")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "is not a directory" in out.stderr
