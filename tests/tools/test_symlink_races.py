"""A directory swapped for a symlink out of the workspace between the guardrail's check and
the tools' open never lets a file tool read or write outside (issue 22, `tether.beneath`).

The guardrail resolves a path and checks it is inside; a neighbour who can write in the
workspace (a cell, a worker) can then turn a directory of that path into a symlink to
somewhere else before the tool opens it. The tools open the checked path following no
symlink at any component, so the swap is a clear refusal, never the outside file."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tether.run import Run
from tether.tools.results import ToolResult

SECRET = "SECRET-0xC0FFEE"
CALLS: dict[str, dict[str, Any]] = {
    "read": {"path": "d/f.txt"},
    # an edit that never matches answers with the file's closest lines: the outside one's
    # would show the secret
    "edit": {"path": "d/f.txt", "old_string": "insidX", "new_string": "y"},
    "write": {"path": "d/f.txt", "content": "inside, rewritten\n"},
    "write_new": {"path": "d/sub/new.txt", "content": "new\n"},
    "apply_patch": {"patch": "--- a/d/f.txt\n+++ b/d/f.txt\n@@ -1 +1 @@\n-nothing like this\n+x\n"},
}


_LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2  # linux/fcntl.h, linux/fs.h


def exchange(a: Path, b: Path) -> None:
    """renameat2(RENAME_EXCHANGE): the two names trade places in one step."""
    if _LIBC.renameat2(AT_FDCWD, bytes(a), AT_FDCWD, bytes(b), RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a))


class _Swapper(threading.Thread):
    """Trades ws/d (the real directory) and ws/d.link (a symlink to `outside`) over and
    over, atomically: ws/d is always there, a directory or a link out."""

    def __init__(self, ws: Path, outside: Path) -> None:
        super().__init__(daemon=True)
        self.ws, self.outside, self.stop, self.swaps = ws, outside, threading.Event(), 0

    def run(self) -> None:
        (self.ws / "d.link").symlink_to(self.outside)
        while not self.stop.is_set():
            exchange(self.ws / "d", self.ws / "d.link")
            self.swaps += 1
        if (self.ws / "d").is_symlink():
            exchange(self.ws / "d", self.ws / "d.link")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "f.txt").write_text(f"{SECRET}\n")
    return out


def race(call: Any, ws: Path, outside: Path, seconds: float = 3.0) -> tuple[list[str], int]:
    """`call()` over and over for `seconds` while ws/d flips; the result texts, the swaps."""
    (ws / "d").mkdir(exist_ok=True)
    (ws / "d" / "f.txt").write_text("inside\n")
    swapper = _Swapper(ws, outside)
    texts: list[str] = []
    swapper.start()
    try:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            texts.append(call())
    finally:
        swapper.stop.set()
        swapper.join(5.0)
    assert not swapper.is_alive()
    return texts, swapper.swaps


@pytest.mark.parametrize("tool", sorted(CALLS))
def test_no_file_tool_reads_or_writes_outside_through_a_swapped_directory(
    run: Run, workdir: Path, outside: Path, tool: str
) -> None:
    name = "write" if tool == "write_new" else tool

    def call() -> str:
        res: ToolResult = run.call(name, CALLS[tool])
        return res.text

    texts, swaps = race(call, workdir, outside)
    assert swaps > 100 and len(texts) > 50, (swaps, len(texts))
    leaked = [t for t in texts if SECRET in t]
    assert not leaked, f"{len(leaked)} of {len(texts)} calls showed the outside file: {leaked[0]}"
    assert sorted(os.listdir(outside)) == ["f.txt"]
    assert (outside / "f.txt").read_text() == f"{SECRET}\n"
    refused = [t for t in texts if "not followed" in t]
    odd = [t for t in texts if "symlink" in t and t not in refused and "leads out" not in t]
    assert not odd, odd[:3]  # a refusal says symlinks out of the workspace are not followed


def test_in_workspace_symlinks_still_work_for_the_file_tools(run: Run, workdir: Path) -> None:
    (workdir / "lib").symlink_to("src")  # a linked directory inside the workspace
    (workdir / "main.py").symlink_to(workdir / "src" / "app.py")  # an absolute file link
    assert "retries = 3" in run.call("read", {"path": "lib/app.py"}).text
    assert "retries = 3" in run.call("read", {"path": "main.py"}).text
    res = run.call(
        "edit", {"path": "main.py", "old_string": "retries = 3", "new_string": "retries = 4"}
    )
    assert not res.is_error, res.text
    assert (workdir / "main.py").is_symlink() and "retries = 4" in (
        workdir / "src/app.py"
    ).read_text()
    res = run.call("write", {"path": "lib/new/made.py", "content": "x = 1\n"})
    assert not res.is_error, res.text
    assert (workdir / "src" / "new" / "made.py").read_text() == "x = 1\n"


def test_a_link_out_is_refused_by_the_guardrail_as_before(run: Run, workdir: Path, outside: Path):
    (workdir / "d").symlink_to(outside)
    res = run.call("read", {"path": "d/f.txt"})
    assert res.is_error and "leads out of the workspace through a symlink" in res.text
    assert SECRET not in res.text


CELL = """
import ctypes, threading, time
libc = ctypes.CDLL(None, use_errno=True)
stop, swaps = threading.Event(), [0]
def swap():  # this cell is the neighbour: it trades d and d.link while it reads
    while not stop.is_set():
        libc.renameat2(-100, {d!r}, -100, {link!r}, 2)
        swaps[0] += 1
swapper = threading.Thread(target=swap)
swapper.start()
calls = seen = read = 0
until = time.monotonic() + 3.0
while time.monotonic() < until:
    try:
        text = tool('read', {{'path': 'd/f.txt'}})
        read += 'inside' in text
    except ToolError as e:
        text = str(e)
    calls += 1
    seen += {secret!r} in text
stop.set()
swapper.join()
if os.path.isdir({link!r}) and not os.path.islink({link!r}):
    libc.renameat2(-100, {d!r}, -100, {link!r}, 2)
print(f"calls={{calls}} swaps={{swaps[0]}} seen={{seen}} read={{read}}")
"""


def test_a_bridged_read_from_a_cell_that_swaps_the_directory_never_reads_outside(
    runtime_factory: Any, tmp_path: Path, outside: Path
) -> None:
    from tether.actors.kernel import kinds

    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "f.txt").write_text("inside\n")
    (ws / "d.link").symlink_to(outside)
    rt = runtime_factory(kinds=kinds(spares=0))
    run = rt.open_run("r1", workdir=ws)
    code = "import os\n" + CELL.format(
        d=os.fsencode(ws / "d"), link=os.fsencode(ws / "d.link"), secret=SECRET
    )
    res = run.call("eval", {"code": code, "description": "read a file while swapping its dir"})
    assert not res.is_error, res.text
    counts = dict(kv.split("=") for kv in res.text.split()[-4:])
    assert int(counts["swaps"]) > 100 and int(counts["calls"]) > 20, counts
    assert counts["seen"] == "0", f"a bridged read showed the outside file: {counts}"
    assert (outside / "f.txt").read_text() == f"{SECRET}\n"
