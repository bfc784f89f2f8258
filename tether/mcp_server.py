"""`tether mcp`: one run's tools served over MCP stdio (the `mcp` SDK, 2.x).

An MCP client (an editor, an agent CLI) starts `tether mcp --workdir DIR [--surface S]` as a
subprocess and talks JSON-RPC on its stdin/stdout. The server is a thin face on one `Run`:
`tools/list` is the run's visible tools in MCP's shape (tiers as annotations: read tools
`readOnlyHint`, write and exec tools `destructiveHint`; `tether.tools.export`), and
`tools/call` is `Run.acall`, whose `ToolResult` becomes a `CallToolResult` (images as image
content, an error as `isError`; `ToolResult.to_mcp`). Nothing is decided here that the run
does not already decide: guardrails, tiers and the surface are the run's.

The runtime starts inside `stdio_server()`, which points fd 1 at stderr while it serves, so
the actor tree and the servers it starts (forked from this process) can never write into
the protocol stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from tether.run import Run
from tether.tools.spec import Surface

SERVER_NAME = "tether"


class McpFace:
    """One run, shown over MCP. The runtime behind it is started with the face and shut
    down with it (`opened`)."""

    def __init__(self, run: Run):
        self.run = run

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = [types.Tool.model_validate(t) for t in self.run.tool_schemas("mcp")]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        result = await self.run.acall(params.name, dict(params.arguments or {}))
        return types.CallToolResult.model_validate(result.to_mcp())

    def server(self) -> Server[Any]:
        return Server(SERVER_NAME, on_list_tools=self.list_tools, on_call_tool=self.call_tool)


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
