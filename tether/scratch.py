"""A process's private scratch directory: where it may write besides the workspace.

Every process tether starts gets one: language servers and project checkers, debug
adapters (and so their debuggees), kernels (ipykernel, Deno), vibe workers. A debuggee, a
user's cell or a worker writing to TMPDIR is the user's program: its temp files land in
the scratch too, which lives as long as the process and is removed after it.

Language servers and project checkers write beside their work: tsserver its cancellation
pipes and logs under TMPDIR, gopls and `go vet` their build cache under ~/.cache/go-build,
basedpyright its cancellation folder. "Nothing outside the workspace is written, whoever
asks": each such process gets a fresh directory inside the runtime's own private one
(`tether.private_dirs`, 0700, checked), with TMPDIR and the XDG state and data homes
pointed into it (`env`), removed when the process ends (`close`). Caches (the XDG cache
home, GOCACHE) go to one cache directory beside those, shared by every server and checker
and kept: a fresh cache per process made each gopls start recompute what it knows of the
standard library, and diagnostics after a write came late (measured: the go and typescript
write/diagnostics tests of tests/lsp/test_lsp_servers.py failed 1 run in 2 under load; the
caches trim themselves, and several processes may share them). HOME and the
XDG config home are left alone: a server reads its user's configuration there, and writes
nothing (tests/lsp/test_lsp_private_dirs.py checks it, for every server installed). The
user's Go module cache is read but never filled (GOPROXY=off, GOTOOLCHAIN=local: nothing
is downloaded for a server), and where there is none a private empty one stands in.

The directory's name starts with the owning (actor) process's pid - the process that
started it, which it dies with - so the next scratch made removes what a killed process
left (`reap`). Kernels keep theirs under `kernels` (`under`), their connection file in it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tether.private_dirs import default_state_dir, ensure_private_dir

SUBDIR = "scratch"  # (default) under the runtime's private directory: one directory per process
CACHE = "cache"  # beside it: the caches every server and checker shares, kept


# Go is never asked to download for a server or checker: a missing module is reported
GO_OFFLINE = {"GOPROXY": "off", "GOTOOLCHAIN": "local"}


class ProcessScratch:
    """One process's private directory: `env()` to start it with, `close()` when it ended."""

    def __init__(self, name: str, state: Path | None = None, under: str = SUBDIR) -> None:
        state = ensure_private_dir(state or default_state_dir())
        parent = ensure_private_dir(state / under)
        reap(parent)
        self.base = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-{name}-", dir=parent))
        self.tmp = self.base / "tmp"
        for d in (self.tmp, self.base / "state", self.base / "data"):
            d.mkdir(mode=0o700)
        self.cache = ensure_private_dir(state / CACHE)

    def env(
        self, go_offline: bool = False, given: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """This process's environment (ours, with every place it writes to pointed here).
        go_offline: Go downloads nothing (`GO_OFFLINE`; servers and checkers). given: the
        variables a configuration asks for (a vibe backend's env); the places a process
        writes to stay here whatever they say."""
        return {
            **os.environ,
            **(given or {}),
            "TMPDIR": str(self.tmp),
            "TMP": str(self.tmp),
            "TEMP": str(self.tmp),
            "XDG_CACHE_HOME": str(self.cache),
            "XDG_STATE_HOME": str(self.base / "state"),
            "XDG_DATA_HOME": str(self.base / "data"),
            "GOCACHE": str(self.cache / "go-build"),
            "GOMODCACHE": go_module_cache() or str(self.cache / "go-mod"),
            "PIP_CACHE_DIR": str(self.cache / "pip"),  # (a kernel's %pip)
            **(GO_OFFLINE if go_offline else {}),
        }

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def go_module_cache() -> str:
    """The user's Go module cache, if there is one ("" when none): read for the modules
    already downloaded. Where there is none, a private one (empty) replaces it, so that Go
    does not create one outside the workspace just to lock it."""
    if os.environ.get("GOMODCACHE"):
        found = Path(os.environ["GOMODCACHE"])
    else:
        gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0]
        found = Path(gopath or Path.home() / "go") / "pkg" / "mod"
    return str(found) if found.is_dir() else ""


def reap(parent: Path) -> None:
    """Remove the scratch directories under `parent` whose owning process is gone."""
    with contextlib.suppress(OSError):
        for d in parent.iterdir():
            pid = d.name.split("-", 1)[0]
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
