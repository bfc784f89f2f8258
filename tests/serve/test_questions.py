"""ask_user over MCP: answered by the client's human through elicitation in a 2025-11-25
session, by input_required and the client's retry at 2026-07-28 (a card from inside a
running cell too; a forged, foreign or replayed requestState refused); refused at once
(fail closed) where the client cannot be asked."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.serve.conftest import VERSIONS, Served, SharedServer, text

QUESTION = {
    "question": "Which database should the service use?",
    "options": [{"label": "Postgres", "description": "the default"}, {"label": "SQLite"}],
}


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """The module's server, with a workdir `gated` whose writes ask the client's human
    (the config's workdirs beside app and lib)."""
    tmp = tmp_path_factory.mktemp("served")
    gated = tmp / "gated"
    gated.mkdir()
    config = tmp / "serve-config"
    workdirs = {"gated": {"path": str(gated), "approval": {"write": "ask"}}}
    config.write_text(json.dumps({"workdirs": workdirs}))
    shared = SharedServer(tmp, "--config", str(config))
    yield shared
    shared.close()


@pytest.mark.parametrize("mode", VERSIONS)
def test_ask_user_is_answered_through_the_clients_elicitation(served: Served, mode: str) -> None:
    """2025-11-25: an elicitation request in the session; 2026-07-28: input_required, the
    callback, and the SDK's retry with the sealed state."""
    asked: list[Any] = []

    async def human(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return await _human(context, params)

    async def scenario() -> Any:
        async with served.client(mode, elicitation_callback=human) as client:
            assert "ask_user" in {tool.name for tool in (await client.list_tools()).tools}
            opened = await client.call_tool("open_conversation", {"workdir": "app"})
            handle = opened.structured_content["conversation"]
            return await client.call_tool("ask_user", {"conversation": handle, **QUESTION})

    result = anyio.run(scenario)
    assert not result.is_error, text(result)
    assert "SQLite" in text(result)
    assert len(asked) == 1 and "Which database" in asked[0].message
    assert asked[0].requested_schema["properties"]["choice"]["enum"] == ["Postgres", "SQLite"]


def test_a_client_that_cannot_be_asked_is_not_shown_ask_user_and_is_refused_at_once(
    served: Served,
) -> None:
    async def scenario(mode: str) -> tuple[Any, float]:
        async with served.client(mode) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert "ask_user" not in listed and "read" in listed  # SPEC: only with a port
            opened = await client.call_tool("open_conversation", {"workdir": "app"})
            handle = opened.structured_content["conversation"]
            started = time.monotonic()  # called anyway: refused at once, never a wait
            try:
                result: Any = await client.call_tool(
                    "ask_user", {"conversation": handle, **QUESTION}
                )
            except MCPError as e:  # 2026-07-28: an unlisted tool's routing header is unknown
                result = e
            return result, time.monotonic() - started

    legacy, took = anyio.run(scenario, "legacy")  # no elicitation callback
    assert legacy.is_error and "nobody is connected to answer" in text(legacy), text(legacy)
    assert legacy.structured_content == {"status": "no_human"}
    assert took < 5.0
    modern, took = anyio.run(scenario, "2026-07-28")  # no elicitation, no back channel
    assert isinstance(modern, MCPError) and "Mcp-Param-Conversation" in str(modern)
    assert took < 5.0


def test_a_permission_card_asks_the_clients_human_and_fails_closed_without_one(
    served: Served,
) -> None:
    gated = served.state_dir.parent / "gated"
    asked: list[Any] = []

    async def allow(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"choice": "allow"})

    async def write(mode: str, path: str, **options: Any) -> Any:
        async with served.client(mode, **options) as client:
            opened = await client.call_tool("open_conversation", {"workdir": "gated"})
            handle = opened.structured_content["conversation"]
            args = {"conversation": handle, "path": path, "content": "x\n"}
            return await client.call_tool("write", args)

    allowed = anyio.run(lambda: write("legacy", "allowed.txt", elicitation_callback=allow))
    refused = anyio.run(lambda: write("2026-07-28", "refused.txt"))
    parked = anyio.run(lambda: write("2026-07-28", "parked.txt", elicitation_callback=allow))
    assert not allowed.is_error, text(allowed)
    assert (gated / "allowed.txt").exists()
    assert not parked.is_error and (gated / "parked.txt").exists(), text(parked)  # input_required
    assert len(asked) == 2 and all("write" in a.message for a in asked)
    assert refused.is_error and not (gated / "refused.txt").exists(), text(refused)


# ---- 2026-07-28: input_required, the call parked until the client retries -------------------


async def _human(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"choice": "SQLite"})


def test_a_parked_call_takes_only_its_own_sealed_state_and_each_round_once(
    served: Served,
) -> None:
    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with served.client("2026-07-28", elicitation_callback=_human) as client:
            session = client.session
            handles = []
            for _ in range(2):
                opened = await client.call_tool("open_conversation", {"workdir": "app"})
                handles.append(opened.structured_content["conversation"])
            mine, other = ({"conversation": h, **QUESTION} for h in handles)
            first = await session.call_tool("ask_user", mine, allow_input_required=True)
            out["first"] = first
            (key,) = first.input_requests
            answer = {key: types.ElicitResult(action="accept", content={"choice": "Postgres"})}
            state = first.request_state

            async def retry(args: dict[str, Any], request_state: str) -> Any:
                try:
                    return await session.call_tool(
                        "ask_user", args, input_responses=answer, request_state=request_state
                    )
                except MCPError as e:
                    return e

            out["forged"] = await retry(mine, "v1." + "A" * 60)
            out["tampered"] = await retry(
                mine, state[:-4] + ("AAAA" if state[-4:] != "AAAA" else "BBBB")
            )
            out["other"] = await retry(other, state)  # another conversation's call
            out["answered"] = await retry(mine, state)
            out["replayed"] = await retry(mine, state)
        return out

    out = anyio.run(scenario)
    assert isinstance(out["first"], types.InputRequiredResult)
    for refused in ("forged", "tampered", "other"):
        assert isinstance(out[refused], MCPError), (refused, out[refused])
        assert out[refused].error.message == "Invalid or expired requestState"
    assert not out["answered"].is_error and "Postgres" in text(out["answered"])
    assert isinstance(out["replayed"], MCPError)
    assert "no longer parked here" in out["replayed"].error.message


def test_a_card_raised_inside_a_running_cell_is_answered_by_input_required(
    served: Served,
) -> None:
    code = (
        "import time\n"
        "before = 6 * 7\n"
        "picked = tool('ask_user', {'question': 'Which database?', "
        "'options': [{'label': 'Postgres'}, {'label': 'SQLite'}]})\n"
        "print('cell got:', picked, before)\n"
    )
    asked: list[Any] = []

    async def human(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return await _human(context, params)

    async def scenario() -> Any:
        async with served.client("2026-07-28", elicitation_callback=human) as client:
            opened = await client.call_tool("open_conversation", {"workdir": "app"})
            handle = opened.structured_content["conversation"]
            args = {
                "conversation": handle,
                "code": code,
                "description": "ask the human from inside a running cell",
            }
            return await client.call_tool("eval", args)

    result = anyio.run(scenario)
    assert not result.is_error, text(result)
    assert "cell got:" in text(result) and "SQLite" in text(result) and "42" in text(result)
    assert len(asked) == 1 and "Which database" in asked[0].message
