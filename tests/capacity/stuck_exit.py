"""A resource actor whose exit hangs (tests/capacity/test_eviction_stop.py): the echo
process actor, whose release blocks its process for a minute before it lets its subprocess
go - as an actor stuck in its cleanup, or starved of CPU, would look to its supervisor."""

from __future__ import annotations

import time

from tether.actors.echo import EchoProcessActor

HANG = 60.0  # s: far past any shutdown_timeout


class StuckOnExit(EchoProcessActor):
    def release(self) -> None:
        time.sleep(HANG)
        super().release()
