"""Faults: a server killed mid-request, a server that never answers, one that keeps crashing,
and reload. The misbehaving servers are small scripts put where the basedpyright row looks
first (the project's .venv/bin), so the real lookup, spawn and supervision paths run."""

from __future__ import annotations

import itertools
import os
import re
import signal
import textwrap
import threading
import time

import pytest
from conftest import wait_until as wait_for
from lsp_support import copy_project, health_nodes, lsp_rt, need  # noqa: F401 - fixtures

import tether.tools.lsp_tool.actions as lsp_actions

pytestmark = [pytest.mark.slow, need("basedpyright-langserver")]
_ids = itertools.count()

FAKE = textwrap.dedent(
    '''\
    #!{python}
    """A language server that misbehaves on purpose: MODE = {mode!r}."""
    import json, os, sys
    MODE = {mode!r}
    here = os.path.dirname(os.path.abspath(__file__))
    if MODE == "crash":
        sys.stderr.write("boom: this server cannot start\\n")
        sys.exit(3)
    if MODE == "hang-once":
        marker = os.path.join(here, "hung-once")
        if os.path.exists(marker):
            os.execvp("basedpyright-langserver", ["basedpyright-langserver", *sys.argv[1:]])
        open(marker, "w").close()

    def read():
        head = b""
        while not head.endswith(b"\\r\\n\\r\\n"):
            c = sys.stdin.buffer.read(1)
            if not c:
                sys.exit(0)
            head += c
        n = int(head.split(b":")[1].split(b"\\r\\n")[0])
        return json.loads(sys.stdin.buffer.read(n))

    def send(msg):
        b = json.dumps(msg).encode()
        sys.stdout.buffer.write(b"Content-Length: %d\\r\\n\\r\\n" % len(b) + b)
        sys.stdout.buffer.flush()

    caps = {{"hoverProvider": True, "textDocumentSync": 1,
             "diagnosticProvider": {{"interFileDependencies": False, "workspaceDiagnostics": False}}}}
    while True:
        m = read()
        if m.get("method") == "initialize":
            send({{"jsonrpc": "2.0", "id": m["id"], "result": {{"capabilities": caps}}}})
    '''
)


def project_with_fake(tmp_path, mode):
    root = copy_project("python", tmp_path)
    bindir = root / ".venv" / "bin"
    bindir.mkdir(parents=True)
    script = bindir / "basedpyright-langserver"
    script.write_text(
        FAKE.format(python=os.environ.get("PYTHON", "/usr/bin/env python3"), mode=mode)
    )
    script.chmod(0o755)
    return root


def hover(run):
    return run.call(
        "lsp", {"action": "hover", "file": "shapes/report.py", "line": 4, "symbol": "total_area"}
    )


def status(run):
    return run.call("lsp", {"action": "status"})


def test_killed_mid_request_is_retried_once_transparently(lsp_rt, tmp_path):  # noqa: F811
    root = project_with_fake(tmp_path, "hang-once")
    run = lsp_rt.open_run(f"f-{next(_ids)}", workdir=str(root))
    box = []
    t = threading.Thread(target=lambda: box.append(hover(run)))
    t.start()
    pid = wait_for(
        lambda: next(
            (
                s["pid"]
                for s in status(run).data["running"]
                if s.get("pid") and s.get("state") == "ready"
            ),
            None,
        ),
        timeout=20,
    )
    wait_for(
        lambda: any(
            n["pending"] for n in health_nodes(lsp_rt) if n["extra"].get("root") == str(root)
        ),
        timeout=10,
    )
    os.kill(pid, signal.SIGKILL)
    t.join(40)
    assert box, "the call never returned"
    r = box[0]
    assert not r.is_error and "def total_area(shapes: list[Shape]) -> float" in r.text, r.text
    s = status(run)
    assert s.data["running"][0]["restarts"] == 1 and s.data["running"][0]["pid"] != pid, s.text
    assert "1 restart(s)" in s.text
    assert any(
        n["restarts"] >= 1 for n in health_nodes(lsp_rt) if n["extra"].get("root") == str(root)
    )
    assert not hover(run).is_error  # the next call works
    run.close()


def test_server_that_never_answers_gets_a_deadline_error(lsp_rt, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(lsp_actions, "QUERY_TIMEOUT", 2.0)
    root = project_with_fake(tmp_path, "mute")
    run = lsp_rt.open_run(f"f-{next(_ids)}", workdir=str(root))
    t0 = time.monotonic()
    r = hover(run)
    took = time.monotonic() - t0
    # the session's deadline, or under load the host's, which ends at the same moment: either
    # names what did not answer
    assert r.is_error and r.data["code"] == "deadline", r.text
    assert re.search(r"did not answer (textDocument/hover in time|'hover' within 2 s)", r.text)
    assert took < 4.0, took
    assert "basedpyright for .: ready" in status(run).text  # still up; nothing hangs
    run.close()


def test_server_that_keeps_crashing_is_given_up_on(lsp_rt, tmp_path, monkeypatch):  # noqa: F811
    # (the runtime currently answers an idempotent call to a crash-looping resource only at
    # the host deadline, not with gave_up; bound it so this test stays short)
    monkeypatch.setattr(lsp_actions, "QUERY_TIMEOUT", 8.0)
    root = project_with_fake(tmp_path, "crash")
    run = lsp_rt.open_run(f"f-{next(_ids)}", workdir=str(root))
    r = hover(run)
    assert r.is_error, r.text
    final = wait_for(lambda: (s := status(run)) and "failed" in s.text and s, timeout=30)
    assert "boom: this server cannot start" in final.text and "gave up" in final.text, final.text
    assert final.data["running"][0]["state"] == "failed"
    run.close()


def test_reload_restarts_the_server(lsp_rt, tmp_path):  # noqa: F811
    root = copy_project("python", tmp_path)
    run = lsp_rt.open_run(f"f-{next(_ids)}", workdir=str(root))
    assert not hover(run).is_error
    pid = status(run).data["running"][0]["pid"]
    r = run.call("lsp", {"action": "reload"})
    assert not r.is_error and r.text.startswith("restarted basedpyright for . (pid "), r.text
    s = status(run)
    assert s.data["running"][0]["pid"] != pid and s.data["running"][0]["restarts"] == 1, s.text
    assert not hover(run).is_error
    run.close()


def test_reload_with_nothing_running(lsp_rt, tmp_path):  # noqa: F811
    run = lsp_rt.open_run(f"f-{next(_ids)}", workdir=str(tmp_path))
    r = run.call("lsp", {"action": "reload"})
    assert r.text.startswith("no language server is running for this workspace")
    run.close()
