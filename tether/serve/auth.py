"""Who may talk to `tether serve`: the Host/Origin check, then a bearer token.

A browser page on any site can send requests to 127.0.0.1, and a DNS name that rebinds to
127.0.0.1 makes them look same-origin to the browser: so every request's `Host` must be a
loopback name (or one the operator listed) and an `Origin`, when a browser sends one, must
be loopback too (MCP transports: "Servers MUST validate the Origin header").

Then the token. It is made once per state dir (`serve-token`, 0600, in the 0700 runtime
dir), so only the user who runs the server, or whoever that user hands it to, can call.
The gate is plain ASGI and answers from the request line and headers alone: a request
without the right `Authorization: Bearer <token>` gets 401 before its body is read, let
alone parsed as JSON-RPC. Probes (`/healthz`, `/readyz`) are open: they say nothing of
what the server holds.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
from collections.abc import Collection
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from tether.private_dirs import ensure_private_dir

TOKEN_FILE = "serve-token"
STATE_KEY_FILE = "serve-state-key"
OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def token(state_dir: Path) -> str:
    """The server's bearer token: read from `state_dir/serve-token`, made (0600) if absent."""
    return _secret(state_dir, TOKEN_FILE, "token")


def state_key(state_dir: Path) -> str:
    """The key that seals a parked call's `requestState` (`serve-state-key`, 0600, made if
    absent): kept across restarts, so a state minted before one is still recognised as
    ours and refused by what it names (a call that is gone), not as a forgery."""
    return _secret(state_dir, STATE_KEY_FILE, "key")


def _secret(state_dir: Path, name: str, what: str) -> str:
    ensure_private_dir(state_dir)
    path = state_dir / name
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise PermissionError(
            f"{path} is mode {mode:o}: others may read the server's {what}; "
            f"chmod 600 {path} or remove it (a new one is made)"
        )
    value = path.read_text().strip()
    if len(value) < 16:
        raise PermissionError(f"{path} holds no usable {what}; remove it (a new one is made)")
    return value


def host_allowed(host: str, port: int, extra: Collection[str]) -> bool:
    """A loopback Host (with or without our port), or one the operator listed."""
    names = {"127.0.0.1", "localhost", "[::1]", *extra}
    return host in names or host in {f"{n}:{port}" for n in names}


def origin_allowed(origin: str, port: int, extra: Collection[str]) -> bool:
    for scheme in ("http://", "https://"):
        if origin.startswith(scheme):
            return host_allowed(origin[len(scheme) :], port, extra)
    return False


class Gate:
    """ASGI middleware in front of every route: Host/Origin (403), then the token (401)."""

    def __init__(self, app: ASGIApp, secret: str, port: int, allowed_hosts: Collection[str] = ()):
        self.app = app
        self._expected = f"Bearer {secret}".encode()
        self.port = port  # set again once the socket is bound (port 0)
        self.allowed_hosts = tuple(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin", b"").decode("latin-1")
        if not host_allowed(host, self.port, self.allowed_hosts):
            await refuse(send, 403, f"Host {host!r} is not this server's (DNS rebinding?)")
            return
        if origin and not origin_allowed(origin, self.port, self.allowed_hosts):
            await refuse(send, 403, f"Origin {origin!r} may not call this server")
            return
        if scope.get("path") not in OPEN_PATHS:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await refuse(
                    send,
                    401,
                    "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                    "with the token from the server's state dir (serve-token)",
                    [(b"www-authenticate", b'Bearer realm="tether"')],
                )
                return
        await self.app(scope, receive, send)


async def refuse(
    send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
