"""The debuggee's output as a debug session keeps it: the tail, bounded.

A part of `tether.debug.session.Session`. What the program prints arrives as DAP `output`
events (or on delve's own stdout); a program that prints without end must not fill the
actor's memory, so only the last OUTPUT_CAP characters are kept, and how many were dropped
is counted (the `output` op says so).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

OUTPUT_CAP = 64 * 1024  # characters of debuggee output kept (the tail)


@dataclass
class OutputTail:
    """The last OUTPUT_CAP characters of the output, and how many went before them."""

    chunks: collections.deque[str] = field(default_factory=collections.deque)
    length: int = 0
    dropped: int = 0

    def add(self, text: str) -> None:
        """The debuggee's output (adapter events, or delve's own stdout): the tail is kept."""
        self.chunks.append(text)
        self.length += len(text)
        while self.length > OUTPUT_CAP and len(self.chunks) > 1:
            gone = self.chunks.popleft()
            self.length -= len(gone)
            self.dropped += len(gone)
        if self.length > OUTPUT_CAP:
            only = self.chunks.pop()
            self.dropped += len(only) - OUTPUT_CAP
            self.chunks.append(only[-OUTPUT_CAP:])
            self.length = OUTPUT_CAP

    def text(self, limit: int = OUTPUT_CAP) -> str:
        return "".join(self.chunks)[-limit:]
