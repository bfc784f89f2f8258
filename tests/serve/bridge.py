"""A reverse proxy that adds the server's bearer token, for MCP clients that cannot send one.

The MCP conformance suite and the Inspector CLI take a URL and no headers; `tether serve`
answers 401 to any request without `Authorization: Bearer <token>`. This bridge, on a free
loopback port, forwards every request as it came (method, path, headers - `Host` and
`Origin` too, so the server's DNS-rebinding check still sees the client's, with only the
bridge's own port turned into the server's - and the body) with the token added, and
streams the response back (an SSE stream as it is written).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx
import uvicorn

from tests.conftest import wait_until

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length"}


class Bridge:
    def __init__(self, target: str, token: str, port: int) -> None:
        self.target = target.rstrip("/")  # http://127.0.0.1:PORT
        self.token = token
        self.port = port  # the bridge's own
        self.server_port = self.target.rsplit(":", 1)[1]
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(None))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [
            (k.decode(), self._port(k.decode(), v.decode()))
            for k, v in scope["headers"]
            if k.decode().lower() not in HOP_BY_HOP | {"authorization"}
        ]
        headers.append(("authorization", f"Bearer {self.token}"))
        path = scope["raw_path"].decode() or scope["path"]
        if scope.get("query_string"):
            path += "?" + scope["query_string"].decode()
        request = self.client.build_request(
            scope["method"], self.target + path, headers=headers, content=body
        )
        response = await self.client.send(request, stream=True)
        try:
            out = [
                (k.encode(), v.encode())
                for k, v in response.headers.multi_items()
                if k.lower() not in HOP_BY_HOP
            ]
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": out}
            )
            # (a stream the server ends mid-chunk, at its shutdown: the client's ends too)
            with contextlib.suppress(httpx.HTTPError):
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()

    def _port(self, name: str, value: str) -> str:
        if name.lower() in ("host", "origin") and value.endswith(f":{self.port}"):
            return value[: -len(str(self.port))] + self.server_port
        return value


@contextlib.contextmanager
def bridged(url: str, token: str) -> Iterator[str]:
    """The URL of a bridge to the MCP endpoint `url` (http://host:port/mcp)."""
    base, path = url.rsplit("/", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(Bridge(base, token, port), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=10)
    try:
        yield f"http://127.0.0.1:{port}/{path}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
