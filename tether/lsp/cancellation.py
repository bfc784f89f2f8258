"""pyright's file-based cancellation, for the servers whose row names its argument.

A pyright-family server (basedpyright) reads its messages only between requests: a
`$/cancelRequest` sent while it computes a slow hover is read when that hover is done, so
cancelling by message frees nobody (measured: the next hover still waited 9 s). Started
with `--cancellationReceive=file:<folder>`, it instead checks, every few milliseconds of
its work, whether `<tmpdir>/python-languageserver-cancellation/<folder>/cancellation-<id>.tmp`
exists, and aborts the request when it does (the next hover answered 0.01 s after the
file was made). <tmpdir> is the server's TMPDIR: its private scratch directory
(`tether.scratch`, inside the runtime's 0700 one), so no other user can plant or
remove a cancellation, and it is removed when the server ends. In a sandbox place the
server's TMPDIR is the place's private /tmp, which tether cannot see: the folder is made
before the server starts, and the sandbox binds what its given TMPDIR holds into that /tmp
at the same names (`tether.places.sandbox.tmp_entries`; without it no cancellation file
was ever seen there). In a prefix place the scratch is passed as TMPDIR only where the
runtime's state dir is mapped into the environment; elsewhere only `$/cancelRequest` is
sent, heard between requests.

A host may trade that away for memory (`wanted`: the language_server kind config's
`file_cancellation`, default true). pyright starts its background checker thread (a
second V8 isolate with a program of its own) only when it was given a cancellation
folder; without one it checks on its main thread: ~60 MiB less per basedpyright
(`benchmarks/conversation_memory.py --no-file-cancellation`: 147 -> 63-80 MiB USS each
conversation after the first), but a hover waits behind a check in progress, and a
request past its budget is cancelled by `$/cancelRequest` alone, which it reads only
once the slow request is done (status says so: `MESSAGE_ONLY`).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Mapping
from pathlib import Path

from tether.json_types import JSONValue

LAYOUT = "python-languageserver-cancellation"  # pyright's folder under its TMPDIR
OPTION = "file_cancellation"  # the language_server kind config's switch (bool, default true)
# how a server's requests are cancelled, as its status says it
BY_FILE = "a cancellation file and $/cancelRequest"
MESSAGE_ONLY = "$/cancelRequest only"


def wanted(config: Mapping[str, JSONValue]) -> bool:
    """Whether a server whose row polls a cancellation file is started with one: the kind
    config's `file_cancellation` (default true). Raises ValueError on a non-bool."""
    value = config.get(OPTION, True)
    if not isinstance(value, bool):
        raise ValueError(
            f"language_server: {OPTION} must be true (the default) or false, got {value!r}"
        )
    return value


class FileCancellation:
    """One server's cancellation folder under its TMPDIR `tmpdir`: the argument to start it
    with (`arg`), `cancel(id)`."""

    def __init__(self, arg_template: str, tmpdir: Path) -> None:
        self.folder = secrets.token_hex(12)
        self.dir = tmpdir / LAYOUT / self.folder
        self.dir.mkdir(parents=True, mode=0o700)
        self.arg = arg_template.format(folder=self.folder)
        self._made: set[int] = set()  # the ids whose file `cancel` made (or tried to)

    def _file(self, rid: int) -> Path:
        return self.dir / f"cancellation-{rid}.tmp"

    def cancel(self, rid: int) -> None:
        self._made.add(rid)
        with contextlib.suppress(OSError):  # a missing file only means no early stop
            self._file(rid).touch()

    def forget(self, rid: int) -> None:
        """The request was answered: remove its file, if `cancel` made one (only this
        client makes them; `forget` runs on every answer, between the server's answer and
        the call's reply, so an answer nobody cancelled costs no unlink)."""
        if rid not in self._made:
            return
        self._made.discard(rid)
        with contextlib.suppress(OSError):
            self._file(rid).unlink(missing_ok=True)
