"""A path that turns into a FIFO between the tools' check and their open never holds a call.

The check (stat) and the open are two looks at a name: a neighbour who can write in the
workspace can swap a FIFO in between, and a blocking open of a FIFO waits for a writer for
ever. The file tools open without blocking and check what they opened (fstat); a swap is a
clear error or the old file's content, never a hang."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from pathlib import Path

import pytest

from tether import atomic_files
from tether.run import Run

TEXT = "alpha = 1\nbeta = 2\n"
CALLS = {
    "read": {"path": "swap.py"},
    "edit": {"path": "swap.py", "old_string": "beta = 2", "new_string": "beta = 3"},
    "apply_patch": {
        "patch": "--- a/swap.py\n+++ b/swap.py\n@@ -1,2 +1,2 @@\n alpha = 1\n-beta = 2\n+beta = 3\n"
    },
}

# what a call may answer while the file flips: its work, or one of these clear words
CLEAR = (
    "FIFO",  # the check or the open saw the FIFO
    "(a pipe, socket or device)",  # the commit's own check saw it
    "no such file",  # between two renames (the commit's link of the original, too)
    "was not found in 'swap.py'",  # edit: an earlier edit's text, not rewritten yet
    "Nothing was changed",  # apply_patch: the same, for its hunk
)


def test_open_regular_refuses_a_fifo_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(atomic_files.NotRegularFile) as info:
        atomic_files.open_regular(tmp_path / "pipe")  # a blocking open would never return
    assert info.value.st_mode and not os.path.isfile(tmp_path / "pipe")


def test_open_regular_refuses_a_final_symlink_unless_asked_to_follow(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("x")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    with pytest.raises(OSError) as info:
        atomic_files.open_regular(tmp_path / "link.txt")
    assert info.value.errno == errno.ELOOP
    with atomic_files.open_regular(tmp_path / "link.txt", follow=True) as f:
        assert f.read() == b"x"


class _Swapper(threading.Thread):
    """Turns `path` into a FIFO and back into a regular file, over and over. Every FIFO
    keeps a second name, so a reader stuck on one can be set free at the end."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.stop, self.fifos, self.swaps = path, threading.Event(), [], 0

    def run(self) -> None:
        spare = self.path.with_name("spare.py")
        while not self.stop.is_set():
            fifo = self.path.with_name(f"fifo-{self.swaps}")
            os.mkfifo(fifo)
            self.fifos.append(fifo)
            os.link(fifo, self.path.with_name(f"fifo-{self.swaps}.swapped"))
            os.replace(fifo, self.path)
            spare.write_text(TEXT)
            os.replace(spare, self.path)
            self.swaps += 1

    def free_readers(self) -> None:
        for fifo in self.fifos:  # a reader blocked in open() gets a writer, then EOF
            with contextlib.suppress(OSError):
                os.close(os.open(f"{fifo}.swapped", os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.parametrize("tool", sorted(CALLS))
def test_no_call_hangs_while_the_file_is_swapped_for_a_fifo(
    run: Run, workdir: Path, tool: str
) -> None:
    path = workdir / "swap.py"
    path.write_text(TEXT)
    swapper = _Swapper(path)
    outcomes: list[str] = []
    done = threading.Event()

    def calls() -> None:
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            res = run.call(tool, CALLS[tool])
            outcomes.append(res.text if res.is_error else "ok")
        done.set()

    swapper.start()
    caller = threading.Thread(target=calls, daemon=True)
    caller.start()
    try:
        finished = done.wait(30.0)
    finally:
        swapper.stop.set()
        swapper.join(5.0)
        swapper.free_readers()
        caller.join(5.0)
    assert finished, f"{tool}: a call hung on a FIFO swapped in ({len(outcomes)} calls done)"
    assert swapper.swaps > 100 and len(outcomes) > 20, (swapper.swaps, len(outcomes))
    odd = [o for o in outcomes if o != "ok" and not any(w.lower() in o.lower() for w in CLEAR)]
    assert not odd, odd[:3]  # the file, or a clear word on what it became
