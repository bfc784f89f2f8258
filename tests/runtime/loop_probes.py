"""Measure, from inside or outside a process, what the thespian loop patches are for.

- `data_stack_room()`: bytes of CPython's frame stack left in the chunk the caller runs in,
  i.e. how deep calls can go before one crosses into a fresh chunk (an mmap on the way in,
  an munmap on the way out: what `run_actors_in_fresh_stack_chunk` keeps out of the
  message path). Measured by recursing and reading where each frame lives: frames of one
  function sit a fixed stride apart in a chunk, and the first other step is a new chunk.
- `eventpoll_fds(pid)`: the epoll descriptors a process holds. Thespian's transport builds
  an epoll for every loop turn and holds it while it waits (`poll_instead_of_epoll`
  replaces it), so an idle, unpatched actor process always holds one.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Set as AbstractSet

CHUNK = 16 * 1024  # CPython's frame-stack chunk (_PY_DATA_STACK_CHUNK_SIZE, 3.11-3.13)
_F_FRAME = 3 * ctypes.sizeof(ctypes.c_void_p)  # PyFrameObject: refcnt, type, f_back, f_frame


def _interpreter_frame(frame: object) -> int:
    """Address of the frame's _PyInterpreterFrame: where it lives in the frame stack."""
    return int(ctypes.c_void_p.from_address(id(frame) + _F_FRAME).value or 0)


def _descend(addresses: list[int], levels: int) -> None:
    addresses.append(_interpreter_frame(sys._getframe()))
    if levels:
        _descend(addresses, levels - 1)


def data_stack_room(levels: int = 400) -> int:
    """Bytes of frame stack left in the current chunk (at most `levels` small frames)."""
    addresses: list[int] = []
    _descend(addresses, levels)
    steps = [b - a for a, b in zip(addresses, addresses[1:], strict=False)]
    stride = max(set(steps), key=steps.count)  # one frame of _descend; other steps: new chunks
    assert 0 < stride < 1024, f"frames are not laid out as in CPython 3.11-3.13 ({stride})"
    for i, step in enumerate(steps):
        if step != stride:
            return i * stride
    return levels * stride


def eventpoll_fd_numbers(pid: int) -> set[int]:
    """The descriptors of the epoll instances process `pid` holds open (none if it is gone)."""
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[eventpoll]":
                found.add(int(fd))
        except OSError:
            continue
    return found


def eventpoll_fds(pid: int, inherited: AbstractSet[int] = frozenset()) -> int:
    """How many epoll instances process `pid` holds open (0 if it is gone), not counting
    the descriptors in `inherited` (a fork keeps its parent's at the same numbers)."""
    return len(eventpoll_fd_numbers(pid) - inherited)
