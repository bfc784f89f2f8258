"""Isolation between conversations on one shared basedpyright: a file too large for it is
refused before it is sent, a request past its budget is cancelled (by file, which
basedpyright polls while it works) so the others keep answering, and a server that
answers nobody is restarted. All against the real server, one runtime per test (their
limits are the kind's config)."""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until
from lsp_support import health_nodes, in_background, kinds, need, slow_source, timed

from tether.lsp.limits import MB
from tether.messages.calls import ResourceError
from tether.messages.language_server_ops import Navigate

pytestmark = [pytest.mark.slow, need("basedpyright-langserver")]
_ids = itertools.count()

SMALL = "def hello(x: int) -> int:\n    return x\n\n\nhello(1)\n"


def project(tmp_path: Path) -> Path:
    root = tmp_path / f"p{next(_ids)}"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "a.py").write_text(SMALL)
    return root.resolve()


def hover(run: Any, file: str = "a.py", line: int = 1, symbol: str = "hello") -> Any:
    return run.call("lsp", {"action": "hover", "file": file, "line": line, "symbol": symbol})


def warm(run: Any) -> None:
    """The server is up and has analysed a.py (its first answer can take longer than the
    short budgets of these tests on a loaded machine: those first tries may fail)."""
    wait_until(lambda: not hover(run).is_error, timeout=60, interval=0.2)


def ask_actor(run: Any, root: Path, op: Any) -> Any:
    """Straight to the actor, past the host's checks."""
    return run.context().call_resource("language_server", f"basedpyright:{root}", op, None, 30)


def server_status(run: Any) -> dict:
    return run.call("lsp", {"action": "status"}).data["running"][0]


def test_a_large_file_is_refused_at_once_and_the_server_keeps_answering(
    runtime_factory: Any, tmp_path: Path
) -> None:
    rt = runtime_factory(kinds=kinds())
    root = project(tmp_path)
    line = "def f(a: int, b: str = 'x') -> int:\n    return a + len(b)\n\n"
    (root / "big.py").write_text(line * (16 * MB // len(line) + 1))
    size_mb = (root / "big.py").stat().st_size / MB
    a, b = rt.open_run("conv-a", workdir=str(root)), rt.open_run("conv-b", workdir=str(root))
    assert not hover(b).is_error  # the server is up
    for args in (
        {"action": "hover", "file": "big.py", "line": 1, "symbol": "f"},
        {"action": "diagnostics", "file": "big.py"},
        {"action": "symbols", "file": "big.py"},
    ):
        r, took = timed(a.call, "lsp", args)
        assert r.is_error and took < 1.0, (took, r.text)
        assert f"'big.py' is {size_mb:.1f} MB, over the 4.0 MB limit" in r.text, r.text
        assert "read (start_line / end_line)" in r.text and "ast_grep" in r.text, r.text
    r, took = timed(hover, b)
    assert not r.is_error and took < 1.0, (took, r.text)
    # the actor refuses it too, whoever asks (the host check is only the early one)
    t0 = time.monotonic()
    with pytest.raises(ResourceError, match="over the 4.0 MB limit") as err:
        ask_actor(a, root, Navigate("hover", str(root / "big.py"), 0, 4))
    assert err.value.code == "bad_request" and time.monotonic() - t0 < 1.0
    assert server_status(b)["open_documents"] == 1  # a.py only: big.py was never sent
    # the harness read sends the agent to a range, which it serves
    r = a.call("read", {"path": "big.py"})
    assert r.is_error and '"start_line": 1, "end_line": 200' in r.text, r.text
    r = a.call("read", {"path": "big.py", "start_line": 4, "end_line": 5})
    assert (
        not r.is_error and r.text.splitlines()[0] == "     4\tdef f(a: int, b: str = 'x') -> int:"
    )


def test_a_large_written_file_is_not_given_to_the_server(
    runtime_factory: Any, tmp_path: Path
) -> None:
    rt = runtime_factory(kinds=kinds(max_file_bytes=64 * 1024))
    root = project(tmp_path)
    run = rt.open_run("conv", workdir=str(root))
    assert not hover(run).is_error
    r, took = timed(run.call, "write", {"path": "gen.py", "content": "x: int = 'no'\n" * 8000})
    assert not r.is_error and took < 2.0, (took, r.text)
    assert "no diagnostics for gen.py (109 KB): over the 64 KB limit" in r.text, r.text
    assert server_status(run)["open_documents"] == 1


def test_fifo_is_refused_without_blocking(runtime_factory: Any, tmp_path: Path) -> None:
    rt = runtime_factory(kinds=kinds())
    root = project(tmp_path)
    os.mkfifo(root / "pipe.py")
    run = rt.open_run("conv", workdir=str(root))
    for tool, args in (
        ("lsp", {"action": "hover", "file": "pipe.py", "line": 1, "symbol": "x"}),
        ("lsp", {"action": "diagnostics", "file": "pipe.py"}),
        ("lsp_rename", {"file": "pipe.py", "line": 1, "symbol": "x", "new_name": "y"}),
    ):
        t, box = in_background(run.call, tool, args)
        t.join(5)
        assert box, f"{tool} {args} blocked on a FIFO"
        r, took = box[0]
        assert r.is_error and "is a FIFO (named pipe), not a regular file" in r.text, r.text
    # and the server never saw it: the actor's own read does not block either
    with pytest.raises(ResourceError, match="not a regular file"):
        ask_actor(run, root, Navigate("hover", str(root / "pipe.py"), 0, 0))


def test_a_request_past_its_budget_is_cancelled_and_others_keep_answering(
    runtime_factory: Any, tmp_path: Path
) -> None:
    budget = 2.0
    rt = runtime_factory(kinds=kinds(request_budget=budget))
    root = project(tmp_path)
    src = slow_source()
    (root / "slow.py").write_text(src)
    last = src.count("\n")
    a, b = rt.open_run("conv-a", workdir=str(root)), rt.open_run("conv-b", workdir=str(root))
    warm(b)
    pid = server_status(b)["pid"]
    slow, box = in_background(hover, a, "slow.py", last, "r")
    wait_until(
        lambda: any(n["extra"].get("pending_requests") for n in health_nodes(rt)), timeout=10
    )
    answers = [timed(hover, b) for _ in range(5)]  # the first waits behind a's request
    slow.join(budget + 5)
    assert box, "the slow request never returned"
    r, took = box[0]
    assert r.is_error and took < budget + 2.5, (took, r.text)
    assert f"within {budget:g} s, the budget of one request" in r.text, r.text
    assert "it was cancelled so the others are not held up" in r.text, r.text
    assert all(not res.is_error for res, _ in answers), [res.text for res, _ in answers]
    assert answers[0][1] < budget + 2.0, answers  # not the ~25 s the hover takes whole
    assert all(t < 1.5 for _, t in answers[1:]), answers
    st = server_status(b)
    assert st["pid"] == pid and st["restarts"] == 0, st  # cancelled, not restarted
    assert st["cancelled_requests"] >= 1, st


def test_a_server_that_answers_nobody_is_restarted(runtime_factory: Any, tmp_path: Path) -> None:
    """Stopped (SIGSTOP): a's hover fails at its budget, and as nothing answers for the
    stall timeout the server is killed and restarted, and serves b."""
    stall = 2.5
    rt = runtime_factory(kinds=kinds(stall_timeout=stall, request_budget=1.5))
    root = project(tmp_path)
    a, b = rt.open_run("conv-a", workdir=str(root)), rt.open_run("conv-b", workdir=str(root))
    warm(a)
    pid, restarts = server_status(a)["pid"], server_status(a)["restarts"]
    os.killpg(pid, signal.SIGSTOP)  # its whole group: alive, answering no one
    t0 = time.monotonic()
    try:
        first, took_a = timed(hover, a)
        st = wait_until(
            lambda: (s := server_status(b)) and s.get("pid") not in (None, pid) and s,
            timeout=stall + 10,
        )
        restarted_in = time.monotonic() - t0
    finally:
        _resume(pid)  # a no-op once the restart killed it
    assert first.is_error and took_a < 3.0, (took_a, first.text)
    assert "within 1.5 s, the budget of one request" in first.text, first.text
    assert stall <= restarted_in < stall + 10, restarted_in
    assert st["restarts"] == restarts + 1, st
    wait_until(lambda: not _alive(pid), timeout=5)  # the stuck one was killed
    warm(b)  # the new server answers (its first analysis may take more than a 1.5 s budget)


def test_a_call_waiting_on_a_stuck_server_is_answered_by_the_restarted_one(
    runtime_factory: Any, tmp_path: Path
) -> None:
    """The budget is longer than the stall timeout: the waiting hover fails with
    resource_died when the server is declared stuck, and the runtime retries it (a query is
    idempotent) on the restarted server, so the caller gets the answer."""
    stall = 3.0
    rt = runtime_factory(kinds=kinds(stall_timeout=stall))
    root = project(tmp_path)
    run = rt.open_run("conv", workdir=str(root))
    warm(run)
    pid, restarts = server_status(run)["pid"], server_status(run)["restarts"]
    os.killpg(pid, signal.SIGSTOP)
    try:
        r, took = timed(hover, run)
    finally:
        _resume(pid)
    assert not r.is_error and "def hello(x: int) -> int" in r.text, r.text
    assert stall - 0.5 < took < stall + 10, took
    st = server_status(run)
    assert st["pid"] != pid and st["restarts"] == restarts + 1, st


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _resume(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGCONT)
    except ProcessLookupError:
        pass
