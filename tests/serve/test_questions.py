"""ask_user over MCP: answered by the client's human through elicitation in a 2025-11-25
session; refused at once (fail closed) where the client cannot be asked."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from tests.serve.conftest import Served, start_server, text

QUESTION = {
    "question": "Which database should the service use?",
    "options": [{"label": "Postgres", "description": "the default"}, {"label": "SQLite"}],
}


def test_ask_user_is_answered_through_the_clients_elicitation(served: Served) -> None:
    asked: list[Any] = []

    async def human(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"choice": "SQLite"})

    async def scenario() -> Any:
        async with served.client("legacy", elicitation_callback=human) as client:
            opened = await client.call_tool("open_conversation", {"workdir": "app"})
            handle = opened.structured_content["conversation"]
            return await client.call_tool("ask_user", {"conversation": handle, **QUESTION})

    result = anyio.run(scenario)
    assert not result.is_error, text(result)
    assert "SQLite" in text(result)
    assert len(asked) == 1 and "Which database" in asked[0].message
    assert asked[0].requested_schema["properties"]["choice"]["enum"] == ["Postgres", "SQLite"]


def test_a_client_that_cannot_be_asked_gets_a_refusal_not_a_wait(served: Served) -> None:
    async def scenario(mode: str) -> tuple[Any, float]:
        async with served.client(mode) as client:
            opened = await client.call_tool("open_conversation", {"workdir": "app"})
            handle = opened.structured_content["conversation"]
            started = time.monotonic()
            result = await client.call_tool("ask_user", {"conversation": handle, **QUESTION})
            return result, time.monotonic() - started

    for mode in ("legacy", "2026-07-28"):  # no elicitation callback; no back channel
        result, took = anyio.run(scenario, mode)
        assert result.is_error and "nobody is connected to answer" in text(result), text(result)
        assert result.structured_content == {"status": "no_human"}
        assert took < 5.0


def test_a_permission_card_asks_the_clients_human_and_fails_closed_without_one(
    tmp_path: Path,
) -> None:
    gated = tmp_path / "gated"
    gated.mkdir()
    config = tmp_path / "serve-config"
    workdirs = {"gated": {"path": str(gated), "approval": {"write": "ask"}}}
    config.write_text(json.dumps({"workdirs": workdirs}))
    server = start_server(tmp_path, "--config", str(config), workdirs={})
    asked: list[Any] = []

    async def allow(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"choice": "allow"})

    async def write(mode: str, path: str, **options: Any) -> Any:
        async with server.client(mode, **options) as client:
            opened = await client.call_tool("open_conversation", {"workdir": "gated"})
            handle = opened.structured_content["conversation"]
            args = {"conversation": handle, "path": path, "content": "x\n"}
            return await client.call_tool("write", args)

    try:
        allowed = anyio.run(lambda: write("legacy", "allowed.txt", elicitation_callback=allow))
        refused = anyio.run(lambda: write("2026-07-28", "refused.txt"))
    finally:
        server.stop()
    assert not allowed.is_error, text(allowed)
    assert (gated / "allowed.txt").exists()
    assert len(asked) == 1 and "write" in asked[0].message
    assert refused.is_error and not (gated / "refused.txt").exists(), text(refused)
