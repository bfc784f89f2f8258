"""The MCP face of `tether serve`: one tool list, every call routed to its conversation.

`tools/list` is the same for every client: `open_conversation` / `close_conversation`, and
the tools a conversation on this server can have (the default surface with every resource
kind connected; a conversation on a narrower surface refuses the others, saying so). Each
of those takes a required `conversation` argument, the handle `open_conversation` minted.

Why an argument and not a header or the MCP session: an argument works the same on both
protocol versions the SDK speaks (2025-11-25 has sessions, 2026-07-28 may have none), lets
one client connection drive several conversations, and survives a reconnect. It is
annotated `x-mcp-header: Conversation`, so a 2026-07-28 client also mirrors it into an
`Mcp-Param-Conversation` HTTP header (and the SDK checks the two agree): a load balancer
keys affinity on that header without reading the body.

A call is `Run.acall` under a `CallScope` with the server's call timeout. When the client
cancels (2025-11-25: `notifications/cancelled`; 2026-07-28: closing the response stream;
either: a disconnect), the SDK cancels this handler's task, `acall` cancels the scope, and
the resource stops its work (a kernel cell is interrupted).

A 2026-07-28 call of a client that can elicit runs as a `parking.Park`: when it raises a
card (ask_user, a permission prompt, a card from inside its cell) its response is
`input_required`, and the client's retry (the answer, the sealed `requestState`) resumes
it where it waits, until its result is the response.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError

from tether.call_scope import CallScope
from tether.json_types import JSONObject
from tether.mcp_server import SERVER_NAME, mcp_result, mcp_tool, server_version, unknown_tool
from tether.serve.config import ConfigError
from tether.serve.conversations import Conversation, ConversationError, Conversations, Full
from tether.serve.elicit import can_be_asked, can_park
from tether.serve.parking import KEEP_FINISHED, Park, Parking, Pending
from tether.serve.progress import Probe, probe_for
from tether.tools.export import export_schema
from tether.tools.registry import Registry
from tether.tools.results import ToolResult
from tether.tools.spec import Needs

if TYPE_CHECKING:
    from tether.run import Run

CONVERSATION_HEADER = "Conversation"  # -> Mcp-Param-Conversation on 2026-07-28
CANCELLED_BY_CLIENT = "the client cancelled the call (or went away)"
PROGRESS_AFTER = 1.0  # a call with a progress token hears from us after this, then each second
INSTRUCTIONS = (
    "Call open_conversation with one of the server's workdirs first; pass the handle it "
    "returns as 'conversation' on every other call."
)


def conversation_property() -> JSONObject:
    """The `conversation` argument's schema."""
    return {
        "type": "string",
        "description": "the conversation's handle, from open_conversation",
        "x-mcp-header": CONVERSATION_HEADER,
    }


@contextlib.asynccontextmanager
async def stateless(_: Server[None]) -> AsyncIterator[None]:
    """The server's lifespan: it keeps no state there (the SDK's default keeps an empty
    dict), so a request's context is a `ServerRequestContext[None, object]` (its request
    object is never read here)."""
    yield None


class ServeFace:
    def __init__(
        self,
        conversations: Conversations,
        registry: Registry | None = None,
        state_key: str | None = None,
    ):
        self.conversations = conversations
        self.parking = Parking()
        # (no key given: one for this process only; a restart then reads old states as
        # forgeries)
        self._state_key = state_key
        self.registry = registry or Registry.default()
        self._tools = self._declare()
        self.names = [t.name for t in self._tools]
        self._input_schemas = {t.name: t.input_schema for t in self._tools}

    # ---- tools/list -------------------------------------------------------------------
    def _declare(self) -> list[types.Tool]:
        config = self.conversations.config
        workdirs = sorted(config.workdirs)
        opening: JSONObject = {
            "name": "open_conversation",
            "description": (
                "Open a conversation on one of this server's working directories; returns "
                "its handle, to pass as 'conversation' on every other call. Workdirs: "
                + ", ".join(f"{n} ({config.workdirs[n].path})" for n in workdirs)
            ),
            "inputSchema": {
                "type": "object",
                "properties": {"workdir": {"type": "string", "enum": [*workdirs]}},
                "required": ["workdir"],
                "additionalProperties": False,
            },
            "annotations": {
                "readOnlyHint": False,
                "destructiveHint": False,
                "idempotentHint": False,
                "openWorldHint": False,
            },
        }
        closing: JSONObject = {
            "name": "close_conversation",
            "description": "End a conversation: its resources (servers, kernels, sessions) stop.",
            "inputSchema": {
                "type": "object",
                "properties": {"conversation": conversation_property()},
                "required": ["conversation"],
                "additionalProperties": False,
            },
            "annotations": {
                "readOnlyHint": False,
                "destructiveHint": True,
                "idempotentHint": True,
                "openWorldHint": False,
            },
        }
        # every conversation has a question port (serve.elicit): ask_user is listed to a
        # client that can elicit (list_tools), and refused (fail closed) if called otherwise
        connected = frozenset(set(Needs) - {Needs.VIBE})
        tools = [mcp_tool(opening), mcp_tool(closing)]
        surfaces = {w.surface for w in config.workdirs.values()}
        seen: set[str] = set()
        for surface in sorted(surfaces, key=lambda s: s.value):
            for status in self.registry.status(surface, connected):
                if status.visible and status.name not in seen:
                    seen.add(status.name)
                    tools.append(mcp_tool(with_conversation(export_schema(status.spec, "mcp"))))
        return tools

    async def list_tools(
        self, ctx: ServerRequestContext[None, object], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if can_be_asked(ctx):
            return types.ListToolsResult(tools=self._tools)
        return types.ListToolsResult(tools=[t for t in self._tools if t.name != "ask_user"])

    # ---- tools/call -------------------------------------------------------------------
    async def call_tool(
        self, ctx: ServerRequestContext[None, object], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        name = params.name
        args: JSONObject = dict(params.arguments or {})
        if name not in self.names:
            raise unknown_tool(name, self.names)
        if name == "open_conversation":
            return await self._open(args)
        try:
            conversation = self.conversations.get(args.pop("conversation", None))
            if name == "close_conversation":
                await anyio.to_thread.run_sync(self.conversations.close, conversation.handle)
                return mcp_result(ToolResult.ok(f"closed {conversation.handle}"))
            if params.request_state is not None:  # (a parked call is in flight: a drain
                return await self._resume(ctx, conversation, name, params)  # lets it finish)
            if self.conversations.draining:
                raise ConversationError("the server is shutting down: no new calls")
        except ConversationError as e:
            return mcp_result(ToolResult.error(f"{name}: {e}"))
        config = self.conversations.config
        scope = CallScope.start(timeout=config.call_timeout, call_id=f"mcp-{ctx.request_id}")
        if can_park(ctx):
            return await self._park(ctx, conversation, name, args, scope)
        self.conversations.begin(conversation, scope)
        progress = _progress_task(ctx, name, conversation.run, args)
        try:
            with conversation.port.serving(ctx):
                result = await self._call(conversation.run, name, args, scope)
        finally:
            self.conversations.end(scope)
            if progress is not None:
                progress.cancel()
        return finished(conversation, result)

    # ---- 2026-07-28: a call parked while it waits on the client's human ----------------
    async def _park(
        self,
        ctx: ServerRequestContext[None, object],
        conversation: Conversation,
        name: str,
        args: JSONObject,
        scope: CallScope,
    ) -> types.CallToolResult | types.InputRequiredResult:
        park = Park(conversation.handle, name, scope, args)
        self.conversations.begin(conversation, scope)

        async def run() -> ToolResult:
            try:
                with conversation.port.parking(park):
                    return await self._call(conversation.run, name, args, scope)
            finally:
                park.finished_at = time.monotonic()
                self.conversations.end(scope)

        # a task of its own, not this handler's: the call runs on between the rounds
        park.task = asyncio.get_running_loop().create_task(run())
        self.parking.add(park)
        return await self._round(ctx, conversation, park)

    async def _resume(
        self,
        ctx: ServerRequestContext[None, object],
        conversation: Conversation,
        name: str,
        params: types.CallToolRequestParams,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A retry: (its requestState verified by the SDK's boundary) the answer goes to
        the card the parked call waits on, then the call's next step is the response."""
        assert params.request_state is not None
        park, round_ = self.parking.find(params.request_state, conversation.handle, name)
        pending = park.pending
        if pending is None or round_ != park.round:
            park.answer_round(round_, None)  # refused: a round already answered (a replay)
        assert pending is not None
        response = (params.input_responses or {}).get(pending.key)
        if response is None:
            return park.input_required(pending)  # not answered: the same question again
        if not isinstance(response, types.ElicitResult):
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"input_responses[{pending.key!r}] answers an elicitation/create: "
                "send an ElicitResult ({action, content})",
            )
        park.answer_round(round_, response)
        return await self._round(ctx, conversation, park)

    async def _round(
        self, ctx: ServerRequestContext[None, object], conversation: Conversation, park: Park
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Wait for the parked call's result or its next card. A client that goes away
        while waiting cancels the call, as it does an unparked one."""
        progress = _progress_task(ctx, park.tool, conversation.run, park.args)
        try:
            step = await park.next()
        except asyncio.CancelledError:
            park.scope.cancel(CANCELLED_BY_CLIENT)
            raise
        finally:
            if progress is not None:
                progress.cancel()
        if isinstance(step, Pending):
            return park.input_required(step)
        self.parking.drop(park)
        return finished(conversation, step)

    async def _call(self, run: Run, name: str, args: JSONObject, scope: CallScope) -> ToolResult:
        """`Run.acall`: `Run.call` on one of its reused threads; a cancelled task cancels the
        scope, and the resource stops. (Not anyio's to_thread: its limiter, cancel scope and
        queue cost more server CPU per call.)"""
        return await run.acall(name, args, scope, CANCELLED_BY_CLIENT)

    async def _open(self, args: JSONObject) -> types.CallToolResult:
        workdir = args.get("workdir")
        if not isinstance(workdir, str):
            names = ", ".join(sorted(self.conversations.config.workdirs))
            return mcp_result(
                ToolResult.error(f"open_conversation: name a 'workdir', one of {names}")
            )
        try:
            conversation = await anyio.to_thread.run_sync(self.conversations.open, workdir)
        except Full as e:
            return mcp_result(
                ToolResult.error(f"open_conversation: {e}", data={"retry_after": e.retry_after})
            )
        except (ConversationError, ConfigError, ValueError) as e:
            return mcp_result(ToolResult.error(f"open_conversation: {e}"))
        info = conversation.describe()
        text = (
            f"conversation {conversation.handle} on {workdir} ({info['path']}, place "
            f"{info['place']}, surface {info['surface']}): pass conversation="
            f"{conversation.handle!r} on every call"
        )
        return mcp_result(ToolResult.ok(text, data=info))

    def server(self) -> Server[None]:
        server = Server(
            SERVER_NAME,
            lifespan=stateless,
            version=server_version(),
            title="tether: server-bound coding tools",
            instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            # the 2026-07-28 Mcp-Param-* check reads the called tool's schema here, not by
            # running (and validating) the whole tools/list on every call
            get_tool_input_schema=self._input_schemas.get,
        )
        # The SDK's default OpenTelemetry middleware makes a span per message even with no
        # exporter installed: a cost on every call for nothing here. The request-state
        # boundary seals every requestState we send and verifies every one we get back
        # (a forged or altered one is refused before our handler sees it).
        key = self._state_key
        security = (
            RequestStateSecurity(keys=[key], ttl=KEEP_FINISHED, bind_principal=None)
            if key
            else RequestStateSecurity.ephemeral(ttl=KEEP_FINISHED)
        )
        server.middleware = [RequestStateBoundary(security, default_audience=SERVER_NAME)]
        return server


def finished(conversation: Conversation, result: ToolResult) -> types.CallToolResult:
    """The call's MCP result, with what the conversation has to say first (once)."""
    out = mcp_result(result)
    note = conversation.take_note()
    if note and out.content and isinstance(out.content[0], types.TextContent):
        out.content[0].text = f"{note}\n{out.content[0].text}"
    return out


def with_conversation(schema: JSONObject) -> JSONObject:
    """`schema` (an MCP tool declaration) with the required `conversation` argument."""
    given = schema.get("inputSchema") or {"type": "object"}
    inputs: JSONObject = dict(given) if isinstance(given, dict) else {"type": "object"}
    properties, required = inputs.get("properties") or {}, inputs.get("required") or []
    assert isinstance(properties, dict) and isinstance(required, list)  # (export_schema's)
    inputs["properties"] = {"conversation": conversation_property(), **properties}
    inputs["required"] = ["conversation", *required]
    return {**schema, "inputSchema": inputs}


def _progress_task(
    ctx: ServerRequestContext[None, object], name: str, run: Run, args: JSONObject
) -> Ticks | None:
    """With a progress token: a notification each second once the call took 1 s, saying
    what the tool's probe says the call waits on (serve.progress)."""
    meta: Mapping[str, object] = ctx.meta or {}  # (a TypedDict: the wire key, or its Python name)
    if meta.get("progressToken", meta.get("progress_token")) is None:
        return None
    return Ticks(ctx, name, probe_for(run, name, args))


class Ticks:
    """One call's progress notifications. Until `PROGRESS_AFTER` only a timer: most calls
    end sooner, and a timer costs less than a task sleeping (made and cancelled per call)."""

    def __init__(self, ctx: ServerRequestContext[None, object], name: str, probe: Probe | None):
        self.ctx, self.name, self.probe = ctx, name, probe
        self.started = time.monotonic()
        loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] | None = None
        self._timer = loop.call_later(PROGRESS_AFTER, self._start, loop)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._task = loop.create_task(self._tick())

    def cancel(self) -> None:
        self._timer.cancel()
        if self._task is not None:
            self._task.cancel()

    async def _tick(self) -> None:
        with contextlib.suppress(Exception):  # a closed stream ends the ticks, not the call
            while True:
                detail = ""
                if self.probe is not None:
                    with contextlib.suppress(Exception):  # (a probe never fails the call)
                        detail = await anyio.to_thread.run_sync(self.probe, abandon_on_cancel=True)
                elapsed = time.monotonic() - self.started
                message = f"{self.name}: {elapsed:.0f}s" + (f", {detail}" if detail else "")
                await self.ctx.session.report_progress(elapsed, None, message)
                await asyncio.sleep(1.0)
