"""`tether serve` driven by the `mcp` SDK's streamable-HTTP client, at both protocol versions:
conversations in parallel, the allowlist, the token, Host/Origin, MCP's error shapes."""

from __future__ import annotations

import shutil
import stat
import subprocess
from typing import Any

import anyio
import httpx2
import pytest

from tests.serve.conftest import VERSIONS, Served, start_server, text


async def open_conversation(client: Any, workdir: str) -> str:
    opened = await client.call_tool("open_conversation", {"workdir": workdir})
    assert not opened.is_error, text(opened)
    return str(opened.structured_content["conversation"])


@pytest.mark.parametrize("mode", VERSIONS)
def test_two_conversations_in_parallel_each_see_their_own_workdir(
    served: Served, mode: str
) -> None:
    async def scenario() -> dict[str, list[str]]:
        seen: dict[str, list[str]] = {}

        async def converse(workdir: str) -> None:
            async with served.client(mode) as client:
                handle = await open_conversation(client, workdir)
                for _ in range(3):
                    read = await client.call_tool(
                        "read", {"conversation": handle, "path": "whoami.txt"}
                    )
                    assert not read.is_error, text(read)
                    seen.setdefault(workdir, []).append(text(read))
                wrote = await client.call_tool(
                    "write", {"conversation": handle, "path": "mine.txt", "content": workdir}
                )
                assert not wrote.is_error, text(wrote)

        async with anyio.create_task_group() as tg:
            tg.start_soon(converse, "app")
            tg.start_soon(converse, "lib")
        return seen

    seen = anyio.run(scenario)
    assert len(seen["app"]) == len(seen["lib"]) == 3
    assert all("I am app" in t for t in seen["app"]) and all("I am lib" in t for t in seen["lib"])
    assert (served.workdirs["app"] / "mine.txt").read_text() == "app"
    assert (served.workdirs["lib"] / "mine.txt").read_text() == "lib"


@pytest.mark.parametrize("mode", VERSIONS)
def test_the_allowlist_is_the_only_way_in(served: Served, mode: str) -> None:
    async def scenario() -> list[Any]:
        async with served.client(mode) as client:
            handle = await open_conversation(client, "app")
            return [
                await client.call_tool("open_conversation", {"workdir": "/etc"}),
                await client.call_tool("open_conversation", {"workdir": "host"}),
                await client.call_tool(
                    "read", {"conversation": handle, "path": "../lib/whoami.txt"}
                ),
                await client.call_tool("read", {"conversation": "c-forged", "path": "whoami.txt"}),
                await client.call_tool("read", {"path": "whoami.txt"}),
            ]

    path, place, escape, forged, missing = anyio.run(scenario)
    assert path.is_error and "no workdir '/etc' on this server; it serves app, lib" in text(path)
    assert place.is_error and "no workdir 'host'" in text(place)
    assert escape.is_error and "I am lib" not in text(escape)
    assert forged.is_error and "no open conversation 'c-forged'" in text(forged)
    assert missing.is_error and "pass the 'conversation' argument" in text(missing)


@pytest.mark.parametrize("mode", VERSIONS)
def test_mcp_as_the_spec_says(served: Served, mode: str) -> None:
    from mcp.shared.exceptions import MCPError

    async def scenario() -> tuple[Any, Any, Any, Any]:
        async with served.client(mode) as client:
            tools = (await client.list_tools()).tools
            handle = await open_conversation(client, "app")
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("no_such_tool", {"conversation": handle})
            invalid = await client.call_tool("read", {"conversation": handle, "path": 7})
            return tools, unknown.value, invalid, getattr(client, "server_info", None)

    tools, unknown, invalid, info = anyio.run(scenario)
    by_name = {t.name: t for t in tools}
    assert unknown.error.code == -32602 and "unknown tool 'no_such_tool'" in unknown.error.message
    assert invalid.is_error and "path" in text(invalid)  # a validation failure is a result
    assert by_name["ast_edit"].annotations.destructive_hint is False  # it only stages
    assert by_name["write"].annotations.destructive_hint is True
    assert (
        by_name["read"].title == "Read a file" and by_name["read"].output_schema["type"] == "object"
    )
    conversation = by_name["read"].input_schema["properties"]["conversation"]
    assert conversation["x-mcp-header"] == "Conversation"
    assert "conversation" in by_name["read"].input_schema["required"]
    if mode == "legacy":
        assert info is not None and info.version == "0.1.0"


def test_a_request_without_the_token_gets_401_before_it_is_read(served: Served) -> None:
    garbage = b"\xff not json at all"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": served.token}):
        r = httpx2.post(served.url, content=garbage, headers=headers, timeout=10)
        assert r.status_code == 401 and "bearer token" in r.json()["error"], r.text
        assert r.headers["www-authenticate"].startswith("Bearer")
    r = httpx2.get(served.base + "/metrics", timeout=10)
    assert r.status_code == 401
    mode = stat.S_IMODE((served.state_dir / "serve-token").stat().st_mode)
    assert mode == 0o600


def test_a_foreign_host_or_origin_is_refused(served: Served) -> None:
    auth = {"Authorization": f"Bearer {served.token}"}
    rebound = httpx2.post(served.url, headers={**auth, "Host": "evil.example:80"}, timeout=10)
    assert rebound.status_code == 403 and "DNS rebinding" in rebound.json()["error"]
    origin = httpx2.post(served.url, headers={**auth, "Origin": "https://evil.example"}, timeout=10)
    assert origin.status_code == 403 and "Origin" in origin.json()["error"]


def test_probes_and_metrics_each_on_their_own_path(tmp_path: Any) -> None:
    server = start_server(tmp_path, "--max-conversations", "1")
    try:
        auth = {"Authorization": f"Bearer {server.token}"}
        assert httpx2.get(server.base + "/healthz", timeout=10).status_code == 200
        assert httpx2.get(server.base + "/readyz", timeout=10).json()["ready"] is True

        async def scenario() -> Any:
            async with server.client() as client:
                await open_conversation(client, "app")
                return await client.call_tool("open_conversation", {"workdir": "lib"})

        refused = anyio.run(scenario)
        assert refused.is_error and "its limit (max_conversations)" in text(refused)
        full = httpx2.get(server.base + "/readyz", timeout=10)
        assert full.status_code == 503 and full.headers["retry-after"] == "30"
        assert full.json()["conversations"] == 1
        metrics = httpx2.get(server.base + "/metrics", headers=auth, timeout=10)
        assert metrics.status_code == 200
        assert "tether_serve_conversations 1.0" in metrics.text
        assert 'tether_tool_calls_total{outcome="ok",tool="open_conversation"}' not in metrics.text
        assert "tether_memory_budget_bytes" in metrics.text  # the runtime's capacity
        assert httpx2.get(server.base + "/other", headers=auth, timeout=10).status_code == 404
        promtool = shutil.which("promtool")
        if promtool:  # (apt-get install -y prometheus)
            lint = subprocess.run(
                [promtool, "check", "metrics"], input=metrics.content, capture_output=True
            )
            assert lint.returncode == 0, lint.stdout + lint.stderr
    finally:
        server.stop()


def test_a_restarted_server_resumes_a_conversation_by_its_handle_and_says_what_was_lost(
    tmp_path: Any,
) -> None:
    first = start_server(tmp_path)
    try:

        async def before() -> str:
            async with first.client() as client:
                handle = await open_conversation(client, "app")
                wrote = await client.call_tool(
                    "write", {"conversation": handle, "path": "kept.txt", "content": "kept\n"}
                )
                assert not wrote.is_error, text(wrote)
                return handle

        handle = anyio.run(before)
    finally:
        assert first.stop() == 0
    second = start_server(tmp_path)
    try:

        async def after() -> tuple[Any, Any]:
            async with second.client("2026-07-28") as client:
                args = {"conversation": handle, "path": "kept.txt"}
                return await client.call_tool("read", args), await client.call_tool("read", args)

        resumed, again = anyio.run(after)
        assert not resumed.is_error and "kept" in text(resumed)
        assert text(resumed).startswith("(this conversation was resumed by a restarted server")
        assert "interpreter variables" in text(resumed)
        assert not again.is_error and "resumed" not in text(again)  # said once
    finally:
        second.stop()
