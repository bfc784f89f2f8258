"""Units of the isolation machinery, no server: limits, the request watch (budgets and the
stall verdict), pyright's cancellation folder, and the documents' refusal of odd files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tether import scratch
from tether.lsp.cancellation import FileCancellation
from tether.lsp.documents import Documents, file_problem, read_text
from tether.lsp.jsonrpc import Capabilities
from tether.lsp.limits import MB, LspLimits, size_text, too_large
from tether.lsp.servers import BY_NAME
from tether.lsp.session.budgets import RequestWatch
from tether.scratch import ProcessScratch

# --- limits ---------------------------------------------------------------------------------


def test_limits_from_a_kind_config() -> None:
    assert LspLimits.from_config({}) == LspLimits()
    got = LspLimits.from_config({"limits": {"request_budget": 3, "max_file_bytes": 10}})
    assert (got.request_budget, got.max_file_bytes, got.stall_timeout) == (3, 10, 30.0)
    with pytest.raises(ValueError, match=r"unknown lsp limit\(s\) \['budget'\]"):
        LspLimits.from_config({"limits": {"budget": 1}})
    with pytest.raises(ValueError, match="stall_timeout must be seconds"):
        LspLimits(stall_timeout=0)
    with pytest.raises(ValueError, match="max_file_bytes must be a positive int"):
        LspLimits(max_file_bytes=-1)


def test_too_large_says_size_limit_and_what_to_do() -> None:
    text = too_large("gen/big.py", 16 * MB + 1, 4 * MB)
    assert text.startswith("'gen/big.py' is 16.0 MB, over the 4.0 MB limit")
    assert "read (start_line / end_line)" in text and "ast_grep" in text
    assert (size_text(900), size_text(64 * 1024), size_text(3 * MB // 2)) == (
        "900 bytes",
        "64 KB",
        "1.5 MB",
    )


# --- the request watch ------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.cancelled: list[int] = []
        self.forgotten: list[int] = []

    def cancel(self, rid: int) -> None:
        self.cancelled.append(rid)

    def forget(self, rid: int) -> None:
        self.forgotten.append(rid)


def test_budget_caps_a_request_but_not_initialize() -> None:
    w = RequestWatch(LspLimits(request_budget=5), last_answer=0.0)
    assert w.deadline("textDocument/hover", sent=100.0, deadline=130.0) == 105.0
    assert w.deadline("textDocument/hover", sent=100.0, deadline=102.0) == 102.0
    assert w.deadline("initialize", sent=100.0, deadline=130.0) == 130.0


def test_abandon_cancels_by_message_and_by_file() -> None:
    rec = Recorder()
    w = RequestWatch(LspLimits(), last_answer=0.0, canceller=rec)
    data = w.abandon(7, "textDocument/hover", sent=1.0)
    body = json.loads(data.split(b"\r\n\r\n", 1)[1])
    assert body == {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}}
    assert (
        rec.cancelled == [7]
        and w.cancelled == 1
        and w.unanswered == {7: (1.0, "textDocument/hover")}
    )
    w.answered(7, now=2.0)  # its late answer (RequestCancelled) came
    assert rec.forgotten == [7] and w.unanswered == {}


def test_stall_verdict() -> None:
    w = RequestWatch(LspLimits(stall_timeout=10), last_answer=0.0)
    assert w.check([], now=100.0) == ("", None)  # nothing waits: an idle server is fine
    assert w.check([(95.0, "textDocument/hover")], now=100.0) == ("", 105.0)
    why, again = w.check([(89.0, "textDocument/hover"), (99.0, "x")], now=100.0)
    assert again is None and why == (
        "it stopped answering: no response to any request for 11 s while 2 waited "
        "(the oldest, textDocument/hover, sent 11 s ago)"
    )
    w.answered(3, now=95.0)  # an answer counts as life, whatever it answered
    assert w.check([(89.0, "textDocument/hover")], now=100.0) == ("", 105.0)


def test_an_abandoned_request_waits_until_anything_is_answered() -> None:
    w = RequestWatch(LspLimits(stall_timeout=10), last_answer=0.0)
    w.abandon(1, "textDocument/hover", sent=50.0)
    assert w.check([], now=61.0)[0].startswith("it stopped answering")
    w.answered(2, now=61.0)  # the server skips cancelled requests but answers others
    assert w.check([], now=200.0) == ("", None)


# --- pyright's cancellation folder ---------------------------------------------------------


def test_file_cancellation_is_where_basedpyright_looks(tmp_path: Path) -> None:
    box = ProcessScratch("basedpyright", state=tmp_path)
    fc = FileCancellation(BY_NAME["basedpyright"].file_cancellation, box.tmp)
    try:
        assert fc.arg == f"--cancellationReceive=file:{fc.folder}"
        assert box.env()["TMPDIR"] == str(box.tmp)
        assert stat.S_IMODE(box.base.stat().st_mode) == 0o700
        assert box.base.stat().st_uid == os.getuid()
        fc.cancel(12)
        target = box.tmp / "python-languageserver-cancellation" / fc.folder
        assert (target / "cancellation-12.tmp").exists()
        fc.forget(12)
        assert not (target / "cancellation-12.tmp").exists()
    finally:
        box.close()
    assert not box.base.exists()


def test_reap_removes_what_a_dead_process_left(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    left = tmp_path / f"{dead.stdout.strip()}-basedpyright-abc123"
    (left / "tmp").mkdir(parents=True)
    live = tmp_path / f"{os.getpid()}-gopls-def456"
    live.mkdir()
    scratch.reap(tmp_path)
    assert not left.exists() and live.exists()


# --- documents refuse what must not be read -------------------------------------------------


def test_a_fifo_is_never_read(tmp_path: Path) -> None:
    fifo = tmp_path / "p.py"
    os.mkfifo(fifo)
    assert read_text(fifo) is None  # returns at once: opened without blocking
    assert "is not a regular file" in (file_problem(fifo) or "")
    docs = Documents(Capabilities(), lambda p: "python")
    assert docs.ensure_open(fifo) == (None, [])


def test_a_document_is_read_beneath_the_session_root(tmp_path: Path) -> None:
    """A directory swapped for a link out of the root after a file was opened: its next
    read follows no link, so the outside file's text is never sent to the server (without
    the root it was); an in-tree link and a file outside the root (a library) still read."""
    root, outside = tmp_path / "proj", tmp_path / "other"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "m.py").write_text("SECRET = 'B'\n")
    (root / "pkg" / "m.py").write_text("x = 1\n")
    (root / "alias.py").symlink_to(root / "pkg" / "m.py")
    docs = Documents(Capabilities(), lambda p: "python", root=root)
    doc, msgs = docs.ensure_open(root / "pkg" / "m.py")
    assert doc is not None and doc.text == "x = 1\n" and msgs
    (root / "pkg").rename(root / "was")
    (root / "pkg").symlink_to(outside)  # (the stamp differs: the file is read again)
    doc, msgs = docs.ensure_open(root / "pkg" / "m.py")
    assert doc is not None and doc.text == "x = 1\n" and msgs == [], msgs
    assert read_text(root / "pkg" / "m.py", root=root) is None
    assert read_text(root / "pkg" / "m.py") == "SECRET = 'B'\n"  # (the difference)
    assert docs.ensure_open(root / "alias.py")[0] is None  # (it led into pkg, now outside)
    (root / "alias2.py").symlink_to(root / "was" / "m.py")
    assert read_text(root / "alias2.py", root=root) == "x = 1\n"
    assert read_text(outside / "m.py", root=root) == "SECRET = 'B'\n"  # not under the root
    assert docs.line(root / "pkg" / "m.py", 0) == "x = 1"  # (the open text, as sent)


def test_a_document_that_grows_past_the_limit_is_closed(tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    docs = Documents(Capabilities(), lambda p: "python", max_bytes=100)
    doc, msgs = docs.ensure_open(f)
    assert doc is not None and b"textDocument/didOpen" in msgs[0]
    f.write_text("x = 1\n" * 50)
    doc, msgs = docs.ensure_open(f)
    assert doc is None and len(msgs) == 1 and b"textDocument/didClose" in msgs[0]
    assert docs.get(f) is None
    assert "is 300 bytes, over the 100 bytes limit" in (docs.problem(f) or "")
    synced, out = docs.sync([f])
    assert synced == [] and not any(b"didChangeWatchedFiles" in m for m in out)
