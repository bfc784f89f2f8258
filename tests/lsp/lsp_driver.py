"""A plain harness that drives a `Session` against a real server process, no actors.

Used by the session tests (and as the reference the actor must match): a selector loop over
the server's stdout/stderr plus a heap of timers, run until the call being waited for settles.
"""

from __future__ import annotations

import heapq
import itertools
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tether.lsp.servers import BY_NAME, find_binary
from tether.lsp.session import Session
from tether.lsp.session.link import Sent
from tether.messages.calls import ResourceError
from tether.messages.language_server_ops import (
    LanguageServerOp,
    LanguageServerReply,
    reply_payload,
)


class Driver:
    def __init__(self, server: str, root: Path) -> None:
        self.row = BY_NAME[server]
        binary = find_binary(self.row, root)
        assert binary, f"{server} not installed"
        # the server's scratch (clangd's preambles, basedpyright's pyright-* dirs) beside the
        # test's project, as tether gives its servers one, not in the machine's /tmp
        self.scratch = tempfile.mkdtemp(prefix="driver-tmp-", dir=root.parent)
        self.proc = subprocess.Popen(
            [binary, *self.row.args],
            cwd=root,
            env={**os.environ, "TMPDIR": self.scratch},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        stdin, stdout, stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        assert stdin and stdout and stderr  # all three are pipes
        self.pipes = (stdin, stdout, stderr)
        os.set_blocking(stdout.fileno(), False)
        os.set_blocking(stderr.fileno(), False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(stdout, selectors.EVENT_READ, "out")
        self.sel.register(stderr, selectors.EVENT_READ, "err")
        self.timers: list[tuple[float, int, object]] = []
        self._seq = itertools.count()
        self.results: dict[int, tuple[bool, Any]] = {}
        self.stderr = bytearray()
        self.exited = False
        self.session = Session(self.row, root, self)
        self.session.start(self.proc.pid)

    # SessionIO
    def write(self, data: bytes) -> None:
        if not self.exited:
            try:
                self.pipes[0].write(data)
                self.pipes[0].flush()
            except BrokenPipeError:
                pass

    def after(self, seconds: float, tag: object) -> None:
        heapq.heappush(self.timers, (time.monotonic() + seconds, next(self._seq), tag))

    def done(self, token: Any, reply: LanguageServerReply) -> None:
        self.results[token] = (True, reply_payload(reply))  # as it crosses the wire

    def error(self, token: Any, code: str, message: str) -> None:
        self.results[token] = (False, ResourceError(code, message))

    # driving
    def pump(self, until: float) -> None:
        while True:
            now = time.monotonic()
            while self.timers and self.timers[0][0] <= now:
                _, _, tag = heapq.heappop(self.timers)
                self.session.on_timer(tag)
            if now >= until:
                return
            wait = until - now
            if self.timers:
                wait = min(wait, max(0.0, self.timers[0][0] - now))
            for key, _ in self.sel.select(wait):
                data = os.read(key.fd, 1 << 16)
                if not data:
                    self.sel.unregister(key.fileobj)
                    if key.data == "out" and not self.exited:
                        self.exited = True
                        self.session.on_exit(self.proc.wait(5))
                    continue
                if key.data == "out":
                    self.session.feed(data)
                else:
                    self.stderr += data
            return

    def start_call(self, op: LanguageServerOp, timeout: float = 30.0) -> int:
        token = next(self._seq)
        self.session.handle(op, token, time.monotonic() + timeout)
        return token

    def wait(self, token: int, timeout: float = 30.0) -> dict:
        end = time.monotonic() + timeout + 1
        while token not in self.results:
            assert time.monotonic() < end, f"call {token} never settled"
            self.pump(min(end, time.monotonic() + 0.05))
        ok, val = self.results.pop(token)
        if not ok:
            raise val
        return val

    def send(self, method: str, params: Any, timeout: float = 30.0) -> list:
        """Send a raw request to the server, outside any call; returns a list that will hold
        its Response (wait for it with `pump_until`)."""
        box: list = []
        _, data = self.session.link.rpc.request(
            method,
            params,
            deadline=time.monotonic() + timeout,
            context=Sent(None, box.append, time.monotonic()),
        )
        self.write(data)
        return box

    def pump_until(self, done: Any, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < end, "timed out waiting"
            self.pump(min(end, time.monotonic() + 0.05))

    def call(self, op: LanguageServerOp, timeout: float = 30.0) -> dict:
        return self.wait(self.start_call(op, timeout), timeout)

    def close(self) -> None:
        self.write(self.session.shutdown_bytes())
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(5)
        for f in self.pipes:
            f.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
