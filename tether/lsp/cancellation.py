"""pyright's file-based cancellation, for the servers whose row names its argument.

A pyright-family server (basedpyright) reads its messages only between requests: a
`$/cancelRequest` sent while it computes a slow hover is read when that hover is done, so
cancelling by message frees nobody (measured: the next hover still waited 9 s). Started
with `--cancellationReceive=file:<folder>`, it instead checks, every few milliseconds of
its work, whether `<tmpdir>/python-languageserver-cancellation/<folder>/cancellation-<id>.tmp`
exists, and aborts the request when it does (the next hover answered 0.01 s after the
file was made). <tmpdir> is the server's TMPDIR: we give it a fresh private directory
(mode 0700, random name), so no other user can plant or remove a cancellation, and it is
removed when the server stops. The directory's name carries the owning process's pid, so
the next one removes what a killed process left (`reap`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from pathlib import Path

PREFIX = "tether-lsp-cancel-"
LAYOUT = "python-languageserver-cancellation"  # pyright's folder under its TMPDIR


class FileCancellation:
    """One server's cancellation folder: `argv`/`env` to start it with, `cancel(id)`."""

    def __init__(self, arg_template: str) -> None:
        reap()
        self.base = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        self.folder = secrets.token_hex(12)
        self.dir = self.base / LAYOUT / self.folder
        self.dir.mkdir(parents=True, mode=0o700)
        self.arg = arg_template.format(folder=self.folder)

    def env(self) -> dict[str, str]:
        """The server's environment: ours, with TMPDIR pointing at the private base."""
        return {**os.environ, "TMPDIR": str(self.base)}

    def _file(self, rid: int) -> Path:
        return self.dir / f"cancellation-{rid}.tmp"

    def cancel(self, rid: int) -> None:
        with contextlib.suppress(OSError):  # a missing file only means no early stop
            self._file(rid).touch()

    def forget(self, rid: int) -> None:
        with contextlib.suppress(OSError):
            self._file(rid).unlink(missing_ok=True)

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def reap(tmp: str | None = None) -> None:
    """Remove the cancellation directories of our uid whose process is gone."""
    root = Path(tmp or tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for d in root.glob(f"{PREFIX}*-*"):
            pid = d.name[len(PREFIX) :].split("-", 1)[0]
            with contextlib.suppress(OSError, ValueError):
                if d.lstat().st_uid == os.getuid() and not _alive(int(pid)):
                    shutil.rmtree(d, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
