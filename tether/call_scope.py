"""One tool call's identity, deadline and cancel handle, from the tool to the actor and back.

A host (an MCP server, an embedding agent loop) starts a call and may later give up on it:
the client cancelled, its task was cancelled, its deadline passed. Without a handle, the
call's thread runs on and so does the resource (an 8 s eval loop runs to its end, the next
cell waits for it). A `CallScope` is made once per top-level tool call and reaches every
resource call the tool makes:

    scope = CallScope.start(timeout=30)            # or CallScope.start(call_id="mcp-17")
    result = run.call("eval", {...}, scope=scope)   # in one thread ...
    scope.cancel("the client cancelled")            # ... from another: the call ends soon

- `deadline` is absolute `time.monotonic()`, like a wire `Call`'s: every resource call of
  the tool is clamped to it, so no part of a tool outlives the time its caller gave it.
- `CancelHandle` is thread-safe and one-shot. The host's wait sees it within its next look
  (`tether.host.engine`, a tenth of a second at most), tells the actor holding the call
  (`messages.control.CancelCall`; each kind cancels its own way: a kernel interrupts its
  cell, a language server sends `$/cancelRequest`) and answers the tool at once with
  `ErrorCode.CANCELLED`. Callbacks let a waiter that is not a resource call (a question
  card, a lock) give up too.

A leaf: plain threading, nothing of the tree.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_ids = itertools.count(1)


class CancelHandle:
    """Set once, from any thread; `cancelled` and `reason` say whether and why."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._reason = ""
        self._callbacks: list[Callable[[str], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str:
        return self._reason

    def cancel(self, reason: str = "cancelled by the caller") -> bool:
        """Cancel; False when it was cancelled already (the first reason stays)."""
        with self._lock:
            if self._event.is_set():
                return False
            self._reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(reason)
        return True

    def on_cancel(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call `callback(reason)` on cancel (at once if it was already); returns a function
        that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def unregister() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return unregister
        callback(self._reason)
        return lambda: None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or `timeout` passed; True when cancelled."""
        return self._event.wait(timeout)


@dataclass(frozen=True)
class CallScope:
    """A top-level tool call: its id (the host's, or ours), its deadline, its cancel handle."""

    call_id: str
    deadline: float | None = None  # absolute time.monotonic(); None: only the tools' own caps
    cancel_handle: CancelHandle = field(default_factory=CancelHandle)

    @classmethod
    def start(cls, timeout: float | None = None, call_id: str | None = None) -> CallScope:
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        return cls(call_id=call_id or f"call-{next(_ids)}", deadline=deadline)

    @property
    def cancelled(self) -> bool:
        return self.cancel_handle.cancelled

    def cancel(self, reason: str = "cancelled by the caller") -> bool:
        return self.cancel_handle.cancel(reason)

    def remaining(self) -> float | None:
        """Seconds left before the deadline (may be <= 0), or None without one."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def clamp(self, timeout: float) -> float:
        """`timeout`, shortened to what is left of this call (never below zero)."""
        left = self.remaining()
        return timeout if left is None else max(min(timeout, left), 0.0)
