"""Host-side thespian endpoints: one private() context per calling thread.

Thespian's `ask`/`listen` on one system object are not thread-safe: concurrent callers
get each other's replies. Each thread that calls into the runtime gets its own private()
context (its own loopback endpoint); contexts of threads that ended are closed when the
next one is made, and all of them at shutdown (thespian's shutdown waits ~10 s on open
ones).

`post` sends from such a context without waiting for the receiver to take the message:
thespian's `tell` waits (up to 60 s) for the receiving process to acknowledge it, so a
stopped or wedged receiver would hold the calling thread past its call's deadline.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (thespian publishes no types: mypy cannot check these)
    from thespian.actors import ActorAddress, ActorSystem, ExternalContext


class Contexts:
    """One thespian private() context per calling thread, closed when the thread is gone."""

    def __init__(self, asys: ActorSystem):
        self._asys = asys
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[
            tuple[
                weakref.ref[threading.Thread],
                AbstractContextManager[ExternalContext],
                ExternalContext,
            ]
        ] = []

    def get(self) -> ExternalContext:
        ctx = getattr(self._local, "ctx", None)
        if ctx is not None:
            return ctx
        with self._lock:
            self._reap_dead_threads()
            manager = self._asys.private()
            ctx = manager.__enter__()
            self._all.append((weakref.ref(threading.current_thread()), manager, ctx))
        self._local.ctx = ctx
        return ctx

    def _reap_dead_threads(self) -> None:
        alive = []
        for ref, manager, ctx in self._all:
            thread = ref()
            if thread is None or not thread.is_alive():
                with contextlib.suppress(Exception):
                    manager.__exit__(None, None, None)
            else:
                alive.append((ref, manager, ctx))
        self._all = alive

    def close_all(self) -> None:
        with self._lock:
            for _, manager, _ in self._all:
                with contextlib.suppress(Exception):
                    manager.__exit__(None, None, None)
            self._all = []
        self._local = threading.local()

    def __len__(self) -> int:
        return len(self._all)


def post(ctx: ExternalContext, address: ActorAddress, data: bytes) -> None:
    """Queue `data` for `address` on `ctx` (a private() context) and return at once. The
    transmit goes on while the thread next waits on `ctx` (`listen`), as thespian's own
    `ask` does; a receiver that never takes it holds nothing but that transmit (thespian
    fails it when its connection does). thespian_check checks that these internals are
    still there (`shape_problems`)."""
    ctx._systemBase._tx_to_actor(address, data)
