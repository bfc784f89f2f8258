"""A real `tether serve` process per test, and the SDK's streamable-HTTP client to drive it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import wait_until

VERSIONS = ["legacy", "2026-07-28"]  # 2025-11-25 (initialize, a session) and the stateless era


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    token: str
    state_dir: Path
    workdirs: dict[str, Path]

    @property
    def base(self) -> str:
        return self.url.rsplit("/mcp", 1)[0]

    @asynccontextmanager
    async def client(
        self, mode: str = "legacy", token: str | None = None, **options: Any
    ) -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {token or self.token}"}
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(self.url, http_client=http)
            async with Client(transport, mode=mode, **options) as client:  # type: ignore[arg-type]
                yield client

    def tree(self) -> list[psutil.Process]:
        """The server process's descendants (the actor tree, servers, kernels)."""
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)


def start_server(tmp_path: Path, *extra: str, workdirs: dict[str, Path] | None = None) -> Served:
    state = tmp_path / "state"
    state.mkdir(mode=0o700, exist_ok=True)  # (a second server on the same state: a restart)
    with contextlib.suppress(FileNotFoundError):
        (state / "serve-url").unlink()
    if workdirs is None:
        workdirs = {"app": tmp_path / "app", "lib": tmp_path / "lib"}
        for name, d in workdirs.items():
            if not d.exists():
                d.mkdir()
                (d / "whoami.txt").write_text(f"I am {name}\n")
    args = [f"--workdir={n}={d}" for n, d in workdirs.items()]
    env = {**os.environ, "TETHER_STATE_DIR": str(state)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tether.cli", "serve", "--port", "0", *args, *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "serve.err", "a"),  # noqa: SIM115 - the process holds it
        text=True,
    )

    def up() -> dict[str, Any] | None:
        assert proc.poll() is None, (tmp_path / "serve.err").read_text()
        try:
            return json.loads((state / "serve-url").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    info = wait_until(up, timeout=60)
    token = (state / "serve-token").read_text().strip()
    return Served(proc, info["url"], token, state, workdirs)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = start_server(tmp_path)
    yield server
    server.stop()
    if server.proc.poll() is None:
        server.proc.kill()


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)
