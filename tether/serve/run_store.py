"""Where and when a served run's state is written: one private file per conversation.

`run_state` says what is kept and checks it when read back; this module keeps it in
`<state dir>/serve-runs/<handle>.state` (a directory of its own, 0700; files 0600, written
whole by `tether.atomic_files`, read only when they are regular files of this user that no
one else may read or write), on a saver thread, after the calls that may change it: each
served run's calls pass `keeping_registry`'s outermost wrapper, so neither the run nor the
MCP face needs a hook.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from tether import atomic_files
from tether.json_types import JSONObject
from tether.private_dirs import ensure_private_dir
from tether.serve.run_state import HANDLE, RunStateError
from tether.tools.families import Wrapper
from tether.tools.registry import Registry
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

DIRECTORY = "serve-runs"  # (a directory of its own: nothing else in the state dir is read)
SUFFIX = ".state"
REFUSED = ".refused"  # a refused file is set aside under this suffix, for the operator
MAX_BYTES = 256 << 20  # staged edits carry whole files; more than this is not ours


# ---- the hook: every call of a served run passes it --------------------------------------

AfterCall = Callable[[str, str, ToolResult], ToolResult]  # (run id, tool, result) -> result


def keeping_registry(after: AfterCall) -> Registry:
    """The default registry with `after` as every tool's outermost wrapper: it sees each
    call's result on the call's thread (bridged calls from a cell too), so the served runs
    are saved as they change without a hook in the run or the MCP face. Embedded runs keep
    the default registry and never pass it."""
    base = Registry.default()
    wrappers = {n: (_after(n, after), *base.wrappers_for(n)) for n in base.names()}
    return Registry(base.specs(), wrappers=wrappers, families=base.families)


def _after(tool: str, after: AfterCall) -> Wrapper:
    def keep(ctx: ToolContext, args: JSONObject, inner: Callable[[], ToolResult]) -> ToolResult:
        return after(str(ctx.run_id), tool, inner())

    keep.__name__ = f"serve_keep_{tool}"
    return keep


# ---- the store: one file per conversation ------------------------------------------------


class Store:
    """`<state dir>/serve-runs/<handle>.state`: written whole, read only if it is ours."""

    def __init__(self, state_dir: Path):
        self.directory = state_dir / DIRECTORY

    def path(self, handle: str) -> Path:
        if not HANDLE.fullmatch(handle):  # (a handle from a file names no path of its own)
            raise RunStateError(f"{handle!r} is not a conversation handle of this server")
        return self.directory / f"{handle}{SUFFIX}"

    def save(self, handle: str, data: bytes) -> None:
        ensure_private_dir(self.directory)
        write_private(self.path(handle), data)

    def load(self, handle: str) -> bytes | None:
        """The file's bytes (None: no file), or RunStateError when it is not ours to read."""
        return read_private(self.path(handle), MAX_BYTES)

    def set_aside(self, handle: str) -> Path | None:
        """Move a refused file out of the way (kept for the operator, never read again)."""
        path = self.path(handle)
        aside = path.with_name(path.name + REFUSED)
        try:
            os.replace(path, aside)
        except OSError:
            return None
        return aside

    def remove(self, handle: str) -> None:
        with contextlib.suppress(OSError, RunStateError):
            self.path(handle).unlink()

    def handles(self) -> list[str]:
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        return [n[: -len(SUFFIX)] for n in names if n.endswith(SUFFIX)]


def read_private(path: Path, limit: int) -> bytes | None:
    """The bytes of `path` if it is a regular file of this user that no one else may read
    or write, at most `limit` of them; None if there is none; else RunStateError saying why
    (a symlink, a FIFO, another owner, a group or other bit: not a file this server wrote)."""
    try:
        f = atomic_files.open_regular(path)
    except FileNotFoundError:
        return None
    except OSError as e:  # ELOOP for a symlink, NotRegularFile for a FIFO or a directory
        raise RunStateError(f"{path} is not a regular file ({e.strerror or e})") from None
    with f:
        info = os.fstat(f.fileno())
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise RunStateError(
                f"{path} was not written by this server (owner uid {info.st_uid}, mode "
                f"{stat.S_IMODE(info.st_mode):o}; ours are 0600 and yours)"
            )
        data = f.read(limit + 1)
    if len(data) > limit:
        raise RunStateError(f"{path} is over {limit >> 20} MiB")
    return data


def write_private(path: Path, data: bytes) -> None:
    """`path` holds `data`, mode 0600, replaced whole (`tether.atomic_files`)."""
    atomic_files.commit([atomic_files.Write(path, data, 0o600)])


# ---- the saver: writes off the event loop ------------------------------------------------


class Saver:
    """A thread that saves the conversations marked changed, one at a time (each save takes
    the state as it is then, so the last save of a conversation is its newest state)."""

    def __init__(self, save: Callable[[str], None]):
        self._save = save
        self._dirty: list[str] = []
        self._busy = False
        self._stopped = False
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    def mark(self, handle: str) -> None:
        with self._cv:
            if self._stopped:
                return
            if handle not in self._dirty:
                self._dirty.append(handle)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="tether-keep", daemon=True)
                self._thread.start()
            self._cv.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._dirty or self._stopped)
                if not self._dirty:
                    return
                handle = self._dirty.pop(0)
                self._busy = True
            try:
                self._save(handle)  # (says its own failures: never raises)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until every marked conversation was saved (True) or `timeout` passed."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._dirty and not self._busy, timeout)

    def stop(self, timeout: float) -> None:
        self.flush(timeout)
        with self._cv:
            self._stopped = True
            self._cv.notify_all()
