"""A cancelled request frees a basedpyright that runs in a sandbox place.

basedpyright reads `$/cancelRequest` only between requests; what stops a slow one is the
cancellation file tether makes (`tether.lsp.cancellation`), which the server looks for
under its own TMPDIR. In a sandbox its TMPDIR is the place's private /tmp, which only the
sandbox sees, so the folder tether writes in (the server's scratch) has to be seen there
too (`tether.places.sandbox.tmp_entries`). Without it the cancel was heard only when the
slow hover was done: the next hover had no answer within its 30 s deadline (2 of 2 runs);
with it, 0.5-1.5 s after the cancel (5 runs, load average 7-8 on 2 cores)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.lsp.lsp_support import (
    health_nodes,
    hover,
    in_background,
    kinds,
    need,
    server_status,
    slow_source,
)
from tests.places.test_places import needs_sandbox
from tether.call_scope import CallScope

pytestmark = [pytest.mark.slow, needs_sandbox, need("basedpyright-langserver")]

NEXT_CALL = 2.0  # s from the cancel to the next call's answer


def test_a_cancelled_request_frees_a_sandboxed_basedpyright(
    runtime_factory: Any, tmp_path: Path
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "a.py").write_text("def hello(x: int) -> int:\n    return x\n")
    src = slow_source()
    (root / "slow.py").write_text(src)
    root = root.resolve()
    # a budget far past the test: only the caller's cancel stops the slow hover
    rt = runtime_factory(kinds=kinds(request_budget=120.0))
    a = rt.open_run("gives-up", workdir=str(root), place="sandbox")
    b = rt.open_run("next", workdir=str(root), place="sandbox")
    wait_until(lambda: not hover(b, "a.py", 1, "hello").is_error, timeout=120, interval=0.2)
    (server,) = health_nodes(rt)
    assert server["place"] == "sandbox (bubblewrap, network off)", server
    before = server_status(b)
    scope = CallScope.start(timeout=120)
    thread, box = in_background(hover, a, "slow.py", src.count("\n"), "r", scope)
    wait_until(
        lambda: any(n["extra"].get("pending_requests") for n in health_nodes(rt)), timeout=20
    )
    cancelled_at = time.monotonic()
    scope.cancel("the client cancelled")
    thread.join(10)
    assert box and box[0][0].is_error and "cancelled" in box[0][0].text, box
    answer = hover(b, "a.py", 1, "hello")
    took = time.monotonic() - cancelled_at
    assert not answer.is_error and "hello" in answer.text, answer.text
    assert took < NEXT_CALL, f"the next hover came {took:.1f} s after the cancel"
    after = server_status(b)
    assert (after["pid"], after["restarts"]) == (before["pid"], before["restarts"]), after
    assert after["cancelled_requests"] == before["cancelled_requests"] + 1, after
