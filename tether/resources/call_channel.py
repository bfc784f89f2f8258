"""`CallChannel`: the actor's end of its call channel (tether.channels), as the actor uses it.

The host sends a warm call straight to its actor on a Unix socket instead of through
thespian. The actor watches the channel's descriptors beside its own; what this part adds
to the listener is the order of delivery: frames read are decoded into `arrived` (calls)
or handed back (cancels, acted on at once: a cancel may name a call read in the same
batch, which then gets it right after on_call), and the actor takes `arrived` one call at
a time. Calls wait in `arrived`, not in a local list, so that a long handler which takes
the calls already waiting (`ResourceActor.serve_arrivals`) takes those read with it in the
same batch too. A reply the socket did not take stays in its peer's buffer; `flush` is
retried on a timer by the actor until nothing is left.
"""

from __future__ import annotations

import select
from collections import deque

from tether.channels import ChannelListener, ChannelPeer
from tether.messages.calls import Call
from tether.messages.codec import CodecError, decode
from tether.messages.control import CancelCall


class CallChannel:
    def __init__(self) -> None:
        self.listener: ChannelListener | None = None  # None: the host calls via thespian
        self.arrived: deque[tuple[Call, ChannelPeer]] = deque()  # read, not yet delivered

    def open(self, host_pid: int) -> str:
        """Listen for host `host_pid`; "" or why not (then calls keep coming via thespian)."""
        listener = ChannelListener(host_pid)
        why_not = listener.open()
        if not why_not:
            self.listener = listener
        return why_not

    def fds(self) -> list[int]:
        return self.listener.fds() if self.listener is not None else []

    def ready_now(self) -> list[int]:
        """The channel's descriptors ready at this moment (never waits)."""
        if self.listener is None:
            return []
        ready, _, _ = select.select(self.listener.fds(), [], [], 0)
        return ready

    def read(self, ready: list[int]) -> tuple[list[CancelCall], str]:
        """Read what is ready: calls join `arrived`; returns the cancels read, in order,
        and the last frame that could not be decoded ("" when none)."""
        cancels: list[CancelCall] = []
        error = ""
        if self.listener is None:
            return cancels, error
        for peer, data in self.listener.read(ready):
            try:
                msg = decode(data)
            except CodecError as exc:
                error = f"call channel: {exc}"
                continue
            if isinstance(msg, Call):
                self.arrived.append((msg, peer))
            elif isinstance(msg, CancelCall):
                cancels.append(msg)
        return cancels, error

    def next_arrival(self) -> tuple[Call, ChannelPeer] | None:
        return self.arrived.popleft() if self.arrived else None

    def flush(self) -> bool:
        """Write the replies the socket did not take; True when nothing is left."""
        return self.listener.flush() if self.listener is not None else True

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None

    def health(self) -> dict[str, int] | None:
        if self.listener is None:
            return None
        return {"connections": len(self.listener.peers), "refused": self.listener.refused}
