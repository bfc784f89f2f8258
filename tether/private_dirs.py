"""The runtime's private directory: where it is, and making sure it is ours alone.

A leaf (standard library only), so the host (port files, secrets) and the kernel library
(connection files, kernels' state) use the same directory and the same checks.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


class StateDirError(RuntimeError):
    """The runtime directory (or a port file in it) is not private to this user."""


STATE_DIR_ENV = "TETHER_STATE_DIR"  # (a runtime sets it for its tree: the one it was given)


def default_state_dir() -> Path:
    if os.environ.get(STATE_DIR_ENV):
        return Path(os.environ[STATE_DIR_ENV])
    if os.environ.get("XDG_RUNTIME_DIR"):  # per user, 0700, cleared at logout
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "tether"
    return Path(tempfile.gettempdir()) / f"tether-{os.getuid()}"


def ensure_private_dir(directory: Path) -> Path:
    """Create `directory` (0700), or check the one there (`check_private_dir`)."""
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700, parents=True)
    check_private_dir(directory)
    return directory


def check_private_dir(directory: Path) -> None:
    """Raise StateDirError unless `directory` is a real directory (not a symlink) owned
    by this user. Group/other permission bits are removed (through a descriptor opened
    without following links): the directory is ours, and every file in it is checked
    again when read, so nothing planted while it was open is trusted."""
    fix = "remove it, or point TETHER_STATE_DIR at a directory of your own (mode 0700)"
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        kind = "is a symlink" if directory.is_symlink() else f"cannot be opened ({exc.strerror})"
        raise StateDirError(f"the runtime directory {directory} {kind}; {fix}") from exc
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid():
            raise StateDirError(
                f"the runtime directory {directory} belongs to uid {info.st_uid}, not to you "
                f"(uid {os.getuid()}): its owner could plant port files there; {fix}"
            )
        if info.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
