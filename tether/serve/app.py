"""`tether serve`: one runtime, many conversations, over MCP streamable HTTP.

    tether serve --workdir app=/srv/app [--workdir lib=/srv/lib] [--port 8765]

Routes: `/mcp` (the SDK's streamable-HTTP transport: 2025-11-25 clients get sessions,
2026-07-28 clients single requests), `/healthz` (the process answers), `/readyz` (200 while
a new conversation can be opened, else 503 with Retry-After; existing conversations are
served either way, so an orchestrator does not cut them off), `/metrics` (Prometheus text,
on that path only). Every route is behind `auth.Gate` (Host/Origin, then the bearer token
from `<state dir>/serve-token`; the probes need no token).

SIGTERM (or SIGINT) drains: `/readyz` turns 503 and new conversations and calls are
refused, the calls in flight get `grace` seconds to finish and are cancelled after that
(the resource stops: a kernel cell is interrupted), then the HTTP server stops, every run
is closed and the runtime shuts its tree down, so no process of ours is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tether.metrics import Metrics
from tether.serve.auth import Gate, state_key, token
from tether.serve.config import ServeConfig
from tether.serve.conversations import Conversations, Full
from tether.serve.face import ServeFace

SERVE_FILE = "serve-url"  # JSON {url, pid}; (no .json: see conversations.STORE)


class ServeCollector:
    """The server's own gauges, read at scrape time."""

    def __init__(self, conversations: Conversations):
        self.conversations = conversations

    def collect(self) -> Iterator[Metric]:
        c = self.conversations
        yield _gauge("tether_serve_conversations", "Open conversations", len(c))
        yield _gauge(
            "tether_serve_conversations_limit",
            "Conversations this server may hold",
            c.config.max_conversations,
        )
        yield _gauge("tether_tool_calls_in_flight", "Tool calls being served now", c.in_flight)
        yield _gauge(
            "tether_serve_draining", "1 while the server drains for shutdown", int(c.draining)
        )


def _gauge(name: str, doc: str, value: float) -> Metric:
    family = GaugeMetricFamily(name, doc)
    family.add_metric([], value)
    return family


class Requests:
    """ASGI middleware counting the POSTs being answered. A call's handler returns before its
    response is written to the client: a drain that stopped the HTTP server as soon as the
    calls were done would cut those responses off, so it waits for this count too."""

    def __init__(self, app: ASGIApp):
        self.app = app
        self._count = 0
        self._zero = threading.Condition()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        with self._zero:
            self._count += 1
        try:
            await self.app(scope, receive, send)
        finally:
            with self._zero:
                self._count -= 1
                self._zero.notify_all()

    def wait_none(self, timeout: float) -> bool:
        with self._zero:
            return self._zero.wait_for(lambda: self._count == 0, timeout)


def ops_routes(conversations: Conversations, metrics: Metrics) -> list[Route]:
    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True, "pid": os.getpid()})

    async def readyz(request: Request) -> Response:
        why = conversations.room()
        body = {
            "ready": not why,
            "conversations": len(conversations),
            "limit": conversations.config.max_conversations,
            "in_flight": conversations.in_flight,
        }
        if not why:
            return JSONResponse(body)
        headers = {"Retry-After": str(Full.retry_after)}
        return JSONResponse({**body, "why": why}, status_code=503, headers=headers)

    async def scrape(request: Request) -> Response:
        # (reads the tree: a blocking health() of up to SCRAPE_HEALTH_TIMEOUT, off the loop)
        text = await anyio.to_thread.run_sync(generate_latest, metrics.registry)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", scrape, methods=["GET"]),
    ]


def security(config: ServeConfig) -> TransportSecuritySettings:
    """The SDK's own Host/Origin check on /mcp, the same rule as `auth.Gate` (both: a
    request that reaches the transport some other way is checked too)."""
    hosts = ["127.0.0.1", "localhost", "[::1]", *config.allowed_hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for n in hosts for h in (n, f"{n}:*")],
        allowed_origins=[o for n in hosts for o in (f"http://{n}", f"http://{n}:*")],
    )


def build_app(
    conversations: Conversations,
    metrics: Metrics,
    secret: str,
    port: int,
    request_key: str | None = None,
) -> tuple[Gate, Requests]:
    server = ServeFace(conversations, state_key=request_key).server()
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=security(conversations.config),
        host=conversations.config.host,
        custom_starlette_routes=ops_routes(conversations, metrics),
        # a conversation outlives its MCP session, so an idle session may go: the client
        # opens a new one and names the same conversation
        session_idle_timeout=600,
    )
    requests = Requests(app)
    return Gate(requests, secret, port, conversations.config.allowed_hosts), requests


class DrainingServer(uvicorn.Server):
    """uvicorn, whose SIGTERM/SIGINT first drains the conversations (a second one stops at
    once). Not uvicorn's own handler: that re-raises the signal once serving ends, which
    would kill the process before its runs and runtime are closed."""

    def __init__(
        self,
        config: uvicorn.Config,
        conversations: Conversations,
        requests: Requests,
        grace: float,
    ):
        super().__init__(config)
        self.conversations = conversations
        self.requests = requests
        self.grace = grace
        self._drain: threading.Thread | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._drain is not None:
            self.should_exit = self.force_exit = True
            return
        self._drain = threading.Thread(target=self.drain, name="tether-drain", daemon=True)
        self._drain.start()

    def drain(self) -> None:
        c = self.conversations
        c.draining = True
        log(f"draining: {c.in_flight} call(s) in flight, {self.grace:g} s to finish")
        if not c.wait_idle(self.grace):
            n = c.cancel_all("the server is shutting down (its drain grace passed)")
            log(f"cancelled {n} call(s) still running after {self.grace:g} s")
            c.wait_idle(5.0)
        self.requests.wait_none(5.0)  # the answers of those calls, written to their clients
        self.should_exit = True


def log(message: str) -> None:
    print(f"tether serve: {message}", file=sys.stderr, flush=True)


def bind(config: ServeConfig) -> socket.socket:
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    # proto named: asyncio sets TCP_NODELAY on accepted sockets only when their proto is
    # IPPROTO_TCP, and with 0 every small response waits on Nagle and a delayed ACK (40 ms)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, config.port))
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def write_serve_file(state_dir: Path, url: str) -> Path:
    path = state_dir / SERVE_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": url, "pid": os.getpid()}, f)
    os.replace(tmp, path)
    return path


def serve(config: ServeConfig, state_dir: str | None = None, admin_port: int | None = None) -> int:
    from tether.runtime import Runtime, RuntimeStartError

    try:
        sock = bind(config)
    except OSError as e:
        raise SystemExit(
            f"tether serve: cannot listen on {config.host}:{config.port} ({e})"
        ) from None
    try:
        rt = Runtime.start(admin_port=admin_port, state_dir=state_dir)
    except RuntimeStartError as e:
        sock.close()
        raise SystemExit(f"tether serve: {e}") from None
    with rt:
        rt.metrics = Metrics(lambda timeout: rt.health(timeout=timeout), rt.capacity)
        conversations = Conversations(rt, config, rt.state_dir)
        resumed = conversations.resume()
        for line in resumed:
            log(f"previous conversation {line}" if " " in line else f"resumed {line}")
        rt.metrics.registry.register(ServeCollector(conversations))  # type: ignore[arg-type]
        port = sock.getsockname()[1]
        app, requests = build_app(
            conversations, rt.metrics, token(rt.state_dir), port, state_key(rt.state_dir)
        )
        host = f"[{config.host}]" if ":" in config.host else config.host
        url = f"http://{host}:{port}/mcp"
        server = DrainingServer(
            uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2),
            conversations,
            requests,
            config.grace,
        )
        serve_file = write_serve_file(rt.state_dir, url)
        print(f"tether: serving MCP on {url} (token: {rt.state_dir / 'serve-token'})")
        print(f"tether: runtime admin port {rt.admin_port} (tether status --port {rt.admin_port})")
        print("tether: SIGTERM or Ctrl-C drains and stops", flush=True)
        try:
            server.run(sockets=[sock])
        finally:
            closed = conversations.close_all()
            with contextlib.suppress(OSError):
                serve_file.unlink()
            log(f"closed {closed} conversation(s); stopping the runtime")
    print("tether: stopped", flush=True)
    return 0
