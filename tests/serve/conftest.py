"""A real `tether serve` process, and the SDK's streamable-HTTP client to drive it.

A test that only calls tools through a server takes `served`: the module's server
(`SharedServer`; a module overrides `shared_server` for projects of its own), its
conversations closed and app, lib emptied after each test. A test that stops, restarts,
drains or kills its server, or starts it with options, calls `start_server(tmp_path)`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import tree_problems, wait_until

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


def scratch_workdir(d: Path, name: str) -> None:
    """`d` as a fresh server's default workdir `name` has it: whoami.txt only."""
    d.mkdir(exist_ok=True)
    for entry in d.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    (d / "whoami.txt").write_text(f"I am {name}\n")


def served_health(state_dir: Path) -> Any:
    """The health tree of the runtime a server on `state_dir` runs, read from this process
    as `tether status` does (the port file and the transport secret are in the state dir)."""
    from tether.health_view import fetch_health

    (port,) = [int(p.stem) for p in state_dir.glob("*.json") if p.stem.isdigit()]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TETHER_STATE_DIR", str(state_dir))
        return fetch_health(port)


class SharedServer:
    """One `tether serve` for the tests of a module that only call tools through it (a
    server of a test's own proves nothing more for them). It serves `app` and `lib`
    (scratch: emptied to their whoami.txt after each test) and the read-only `projects`
    a module gives it. After each test every conversation it left is closed (their runs
    and kernels stop) and the server must be as a fresh one is: running, no conversation
    or call open, its tree healthy with no run left; if not, the test fails in its teardown
    saying what it left, and the next test gets a new server."""

    def __init__(self, tmp: Path, *extra: str, projects: dict[str, Path] | None = None):
        self.tmp = tmp
        self.extra = extra
        self.workdirs = {"app": tmp / "app", "lib": tmp / "lib", **(projects or {})}
        self.server: Served | None = None
        self.last = "the server's start"  # the test that had it last

    def served(self) -> Served:
        if self.server is None or self.server.proc.poll() is not None:
            for scratch in ("app", "lib"):
                scratch_workdir(self.workdirs[scratch], scratch)
            self.server = start_server(self.tmp, *self.extra, workdirs=self.workdirs)
        return self.server

    def problems(self, timeout: float = 30.0) -> list[str]:
        """What keeps the server from serving the next test as a fresh one would, after
        waiting (bounded) for it to settle."""
        assert self.server is not None
        server = self.server

        def found() -> list[str]:
            if server.proc.poll() is not None:
                return [f"the server exited ({server.proc.returncode})"]
            ready = httpx2.get(server.base + "/readyz", timeout=10).json()
            if ready["conversations"] or ready["in_flight"] or not ready["ready"]:
                return [f"/readyz: {ready}"]
            return tree_problems(served_health(server.state_dir), prefix="c-")

        try:
            wait_until(lambda: not found(), timeout, 0.25)  # (each look walks the tree)
            return []
        except AssertionError:
            return found()

    def test(self, name: str) -> Iterator[Served]:
        server = self.served()
        left = self.problems()
        if left:  # (a fault that showed only after the last test's end: not this test's)
            self.replace()
            raise AssertionError(f"{self.last} left the shared server unhealthy: {left}")
        self.last = name
        yield server
        try:
            self.close_conversations()
            for scratch in ("app", "lib"):
                scratch_workdir(self.workdirs[scratch], scratch)
            left = self.problems()
        except Exception:  # a server that cannot close a conversation serves no one
            self.replace()
            raise
        if left:
            self.replace()
            raise AssertionError(f"the test left the shared server unhealthy: {left}")

    def close_conversations(self) -> None:
        """Close every conversation the server holds (its store of open handles)."""
        assert self.server is not None
        server = self.server
        if server.proc.poll() is not None:
            raise AssertionError(f"the server exited ({server.proc.returncode}) during the test")
        store = server.state_dir / "serve-conversations"
        handles = list(json.loads(store.read_bytes())) if store.exists() else []
        if not handles:
            return

        async def close() -> None:
            async with server.client() as client:
                for handle in handles:
                    closed = await client.call_tool("close_conversation", {"conversation": handle})
                    assert not closed.is_error, text(closed)

        anyio.run(close)

    def replace(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            stop(server)

    def close(self) -> None:
        self.replace()


def stop(server: Served) -> None:
    server.stop()
    if server.proc.poll() is None:
        server.proc.kill()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """The module's server (app, lib); a module overrides it for projects or options."""
    shared = SharedServer(tmp_path_factory.mktemp("served"))
    yield shared
    shared.close()


@pytest.fixture
def served(shared_server: SharedServer, request: pytest.FixtureRequest) -> Iterator[Served]:
    """The module's server, as a fresh one would serve the test (SharedServer)."""
    yield from shared_server.test(request.node.nodeid)


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)
