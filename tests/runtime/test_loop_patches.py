"""The two patches tether applies to thespian's actor loop for speed (tether.thespian_patches)."""

from __future__ import annotations

import errno
import os
import selectors
import socket

import pytest

import tether.runtime  # noqa: F401  (applies both patches at import)
from tether.thespian_patches import _PollSelector


def test_thespian_transport_waits_with_poll() -> None:
    from thespian.system.transport import TCPTransport

    assert TCPTransport.selectors.DefaultSelector is _PollSelector


def test_thespian_actor_loop_runs_in_a_fresh_stack_chunk() -> None:
    from thespian.system.actorManager import ActorManager

    assert getattr(ActorManager.run, "__wrapped__", None) is not None


def test_poll_selector_reports_readable() -> None:
    a, b = socket.socketpair()
    with a, b:
        sel = _PollSelector()
        sel.register(a.fileno(), selectors.EVENT_READ)
        assert sel.select(0) == []
        b.send(b"x")
        assert [(key.fd, ev) for key, ev in sel.select(0)] == [(a.fileno(), selectors.EVENT_READ)]
        sel.close()


def test_poll_selector_fails_on_a_closed_fd_like_epoll() -> None:
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    sel = _PollSelector()
    sel.register(r, selectors.EVENT_READ)
    with pytest.raises(OSError) as exc:
        sel.select(0)
    assert exc.value.errno == errno.EBADF
