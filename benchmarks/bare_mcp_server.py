"""The anchor of benchmarks/serve.py: the `mcp` SDK's own streamable-HTTP server with a tool
that does nothing, so what the SDK's HTTP and JSON-RPC layers cost per call is measured in
the same run as `tether serve` (which adds the conversation, the call pipeline and the tree).

    python benchmarks/bare_mcp_server.py PORT REPLY_CHARS

Its tools take any arguments: `open_conversation` answers a handle as `tether serve` does,
every other tool answers REPLY_CHARS characters of text (the size of the tool's real reply).
Loopback only, no auth: it serves a benchmark on this machine, nothing else.
"""

from __future__ import annotations

import sys
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext

SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}


def main() -> None:
    port, chars = int(sys.argv[1]), int(sys.argv[2])
    names = ("open_conversation", "close_conversation", "read", "ast_grep", "lsp")
    tools = [types.Tool(name=n, description=n, input_schema=SCHEMA) for n in names]
    reply = "x" * chars

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name == "open_conversation":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="c1")],
                structured_content={"conversation": "c1"},
                is_error=False,
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text=reply)])

    server = Server(
        "bare",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda n: SCHEMA,
    )
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
