"""Cutting output down to size while keeping both ends: the start says what began, the end
says how it finished (the last lines of a log, the final result).

`clip_middle` cuts one text. `Window` cuts a growing sequence as it arrives - the output
of a cell that prints for an hour must not grow in memory - keeping the first half of its
budget and a sliding last half, and leaving one `Cut` marker where the middle went.
"""

from __future__ import annotations

from collections import deque
from collections.abc import MutableSequence
from typing import Protocol

_LINE_SLACK = 200  # how far a cut may move to land on a line break


def head_end(text: str, at: int) -> int:
    """Where to end a head of about `at` chars: after the last line break before `at`,
    if one is near."""
    brk = text.rfind("\n", max(0, at - _LINE_SLACK), at)
    return brk + 1 if brk >= 0 else at


def tail_start(text: str, at: int) -> int:
    """Where to start a tail of about `len(text) - at` chars: after the first line break
    from `at` on, if one is near."""
    brk = text.find("\n", at, at + _LINE_SLACK)
    return brk + 1 if brk >= 0 else at


def cut_marker(count: int, what: str = "chars") -> str:
    return f"[… {count:,} {what} cut …]"


def clip_middle(text: str, limit: int) -> tuple[str, int]:
    """`text` at most `limit` characters long, marker included (unless `limit` is smaller
    than the marker): its head and tail, cut at line breaks when near, around a marker
    saying how much went. Returns the text and the number of characters cut."""
    if len(text) <= limit:
        return text, 0
    room = max(0, limit - len(f"\n{cut_marker(len(text))}\n"))  # the longest marker it can need
    head = head_end(text, room - room // 2)
    tail = tail_start(text, len(text) - room // 2) if room // 2 else len(text)
    cut = tail - head
    before = "" if head == 0 or text[head - 1] == "\n" else "\n"
    return f"{text[:head]}{before}{cut_marker(cut)}\n{text[tail:]}", cut


class Piece(Protocol):
    """A part of a sequence a `Window` can shorten from its front."""

    @property
    def size(self) -> int: ...

    def trim_front(self, units: int) -> int:
        """Drop up to `units` from the front; return how many went."""
        ...

    def take_front(self, units: int) -> Piece:
        """Split off the first `units` as a new piece (this one keeps the rest)."""
        ...


class Cut:
    """Where a window cut the middle of a sequence, and how much it cut."""

    size = 0

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.count = 0

    def trim_front(self, units: int) -> int:
        return 0

    def take_front(self, units: int) -> Piece:
        raise ValueError("a cut marker has nothing to split")


class Window:
    """Admits pieces into `items` keeping the first `limit - limit // 2` units and the last
    `limit // 2`; the middle is trimmed away as later pieces arrive, and one `Cut` marker
    for `channel` (inserted before the first trimmed piece) counts it."""

    def __init__(self, channel: str, limit: int, items: MutableSequence[object]) -> None:
        self.channel = channel
        self.head_left = limit - limit // 2
        self.tail_limit = limit // 2
        self.items = items
        self.tail: deque[Piece] = deque()
        self.tail_size = 0
        self.cut: Cut | None = None

    def admit(self, piece: Piece) -> None:
        """Count `piece` (already appended to `items`) against the budget; a piece that
        straddles the end of the head is split there."""
        if self.head_left >= piece.size:
            self.head_left -= piece.size
            return
        if self.head_left:
            self.items.insert(_index(self.items, piece), piece.take_front(self.head_left))
            self.head_left = 0
        self.tail.append(piece)
        self.tail_size += piece.size
        self._trim()

    def adopt(self, cut: Cut) -> None:
        """Count further cuts into an existing marker (a replay over already-cut output)."""
        if self.cut is None:
            self.cut = cut

    def _trim(self) -> None:
        while self.tail_size > self.tail_limit and self.tail:
            first = self.tail[0]
            if self.cut is None:
                self.cut = Cut(self.channel)
                self.items.insert(_index(self.items, first), self.cut)
            removed = first.trim_front(self.tail_size - self.tail_limit)
            self.cut.count += removed
            self.tail_size -= removed
            if first.size == 0:
                self.tail.popleft()


def _index(items: MutableSequence[object], piece: object) -> int:
    for i in range(len(items) - 1, -1, -1):  # the first trimmed piece is near the end
        if items[i] is piece:
            return i
    raise ValueError("a window trimmed a piece that is not in its sequence")
