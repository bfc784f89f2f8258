"""`tether mcp`: one run's tools served over MCP stdio (the `mcp` SDK, 2.x).

An MCP client (an editor, an agent CLI) starts `tether mcp --workdir DIR [--surface S]` as a
subprocess and talks JSON-RPC on its stdin/stdout. The server is a thin face on one `Run`:
`tools/list` is the run's visible tools in MCP's shape (tiers as annotations: read tools
`readOnlyHint`, write and exec tools `destructiveHint`; `tether.tools.export`), and
`tools/call` is `Run.acall`, whose `ToolResult` becomes a `CallToolResult` (images as image
content, an error as `isError`; `ToolResult.to_mcp`). Nothing is decided here that the run
does not already decide: guardrails, tiers and the surface are the run's.

The conversion is shared with `tether serve` (tether.serve): `mcp_tool` (a title, annotations
that say what the tool does rather than only its tier - ast_edit only stages, so it is not
destructive - and an `outputSchema`, since results carry `structuredContent`), `mcp_result`
and `unknown_tool` (a protocol error, as MCP says, not an `isError` result). The text block
of a result is what the model reads, not the structured content serialised: the structured
content is for programs, the text is written for the model.

The runtime starts inside `stdio_server()`, which points fd 1 at stderr while it serves, so
the actor tree and the servers it starts (forked from this process) can never write into
the protocol stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from tether.json_types import JSONObject, JSONValue
from tether.run import Run
from tether.tools.results import ToolResult
from tether.tools.spec import Surface

SERVER_NAME = "tether"

TITLES = {
    "read": "Read a file",
    "write": "Write a file",
    "edit": "Edit a file",
    "apply_patch": "Apply a patch",
    "lsp": "Language server query",
    "lsp_rename": "Rename a symbol project-wide",
    "ast_grep": "Structural search",
    "ast_edit": "Structural rewrite (staged)",
    "resolve": "Accept or discard a staged change",
    "debug": "Drive a debugger",
    "eval": "Run a cell in a persistent interpreter",
    "ask_user": "Ask the human",
    "vibe_spawn": "Start a background worker",
    "vibe_send": "Message a background worker",
    "vibe_wait": "Wait for a background worker",
    "vibe_kill": "Stop a background worker",
    "vibe_list": "List background workers",
}

# Where a tool's effect is not its tier's (tether.tools.export.TIER_ANNOTATIONS): ast_edit
# writes nothing (it stages; resolve writes), ask_user reaches a human, a vibe worker is an
# agent of its own that may edit (the gate is on its tools), stopping one loses its work.
ANNOTATIONS: dict[str, dict[str, bool]] = {
    "ast_edit": {"destructiveHint": False},
    "ask_user": {"idempotentHint": False, "openWorldHint": True},
    "vibe_spawn": {"readOnlyHint": False, "idempotentHint": False, "openWorldHint": True},
    "vibe_send": {"readOnlyHint": False, "idempotentHint": False, "openWorldHint": True},
    "vibe_kill": {"readOnlyHint": False, "destructiveHint": True},
    "vibe_wait": {"idempotentHint": False},
}

# Every result may carry `structuredContent` (the ToolResult's data), of a shape per tool
# and action: the schema says it is an object, and each result is one.
OUTPUT_SCHEMA: JSONObject = {"type": "object", "additionalProperties": True}


def mcp_tool(schema: JSONObject) -> types.Tool:
    """A tool declaration (`export_schema(spec, "mcp")`) as MCP's `Tool`."""
    name = str(schema["name"])
    title = TITLES.get(name, name)
    given = schema.get("annotations") or {}
    assert isinstance(given, dict)  # (export_schema's, or serve.face's own)
    annotations = {**given, **ANNOTATIONS.get(name, {}), "title": title}
    return types.Tool.model_validate(
        {**schema, "title": title, "annotations": annotations, "outputSchema": OUTPUT_SCHEMA}
    )


def mcp_result(result: ToolResult) -> types.CallToolResult:
    out = result.to_mcp()
    if not result.is_error and "structuredContent" not in out:
        # A declared outputSchema means every success carries structured content.
        out["structuredContent"] = {} if result.data is None else {"value": _plain(result.data)}
    return types.CallToolResult.model_validate(out)


def _plain(value: object) -> JSONValue:  # (any data a tool gave: JSON, or its text)
    import json

    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def unknown_tool(name: str, known: list[str]) -> MCPError:
    """MCP (server/tools, error handling): an unknown tool is a protocol error."""
    return MCPError(
        code=types.INVALID_PARAMS,
        message=f"unknown tool {name!r}: call tools/list; this server has {', '.join(known)}",
    )


def server_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tether")
    except PackageNotFoundError:
        return "0+unknown"


class McpFace:
    """One run, shown over MCP. The runtime behind it is started with the face and shut
    down with it (`opened`)."""

    def __init__(self, run: Run):
        self.run = run

    async def list_tools(
        self,
        ctx: ServerRequestContext[JSONObject, object],
        params: types.PaginatedRequestParams | None,
    ) -> types.ListToolsResult:
        tools = [mcp_tool(t) for t in self.run.tool_schemas("mcp")]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[JSONObject, object], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        known = [t.name for t in self.run.tools()]
        if params.name not in known:
            raise unknown_tool(params.name, known)
        result = await self.run.acall(params.name, dict(params.arguments or {}))
        return mcp_result(result)

    # (Server's parameter is its lifespan's context: the default lifespan's, `{}`)
    def server(self) -> Server[JSONObject]:
        return Server(
            SERVER_NAME,
            version=server_version(),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )


@contextlib.contextmanager
def opened(workdir: str, surface: Surface, run_id: str = "mcp") -> Iterator[Run]:
    """A runtime and one run on `workdir` (the runtime lives as long as the run)."""
    from tether.runtime import Runtime

    with Runtime.start() as rt:
        run = rt.open_run(run_id, workdir=workdir, surface=surface)
        try:
            yield run
        finally:
            run.close()


async def serve(workdir: str, surface: Surface) -> None:
    async with stdio_server() as (read_stream, write_stream):
        # (inside stdio_server: fd 1 is stderr now, for us and every process we start)
        with opened(workdir, surface) as run:
            server = McpFace(run).server()
            await server.run(read_stream, write_stream, server.create_initialization_options())


def main(workdir: str, surface: str) -> int:
    anyio.run(serve, workdir, Surface(surface))
    return 0
