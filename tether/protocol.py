"""Content-Length framing for JSON messages over a byte stream: the one codec LSP and DAP share.

Both protocols frame each JSON body with HTTP-like headers terminated by a blank line:

    Content-Length: 52\r\n
    \r\n
    {"jsonrpc":"2.0","id":1,"method":"initialize",...}

The codec is sans-io: `FrameDecoder.feed(bytes)` returns the complete messages found so far
and keeps any partial frame for the next call; `encode(msg)` returns the bytes to write.
No reads, no writes, no threads - the caller owns the pipe (an actor's ThespianWatch loop,
a test's selector, a benchmark's raw client), so the same code serves all of them.

Headers other than Content-Length (e.g. Content-Type) are accepted and ignored. A frame whose
headers carry no Content-Length, or whose body is not JSON, raises `FramingError`: the stream
is corrupt and the peer must be restarted - guessing a resynchronisation point would deliver
garbage as messages.
"""

from __future__ import annotations

import json

from tether.json_types import JSONValue

_HEADER_END = b"\r\n\r\n"
_MAX_HEADER = 8192  # a header block longer than this means we are not reading a framed stream


class FramingError(ValueError):
    """The byte stream is not Content-Length framed JSON; the peer must be restarted."""


def encode(msg: JSONValue) -> bytes:
    """Frame one JSON-able message (compact JSON, UTF-8, Content-Length in bytes)."""
    body = json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class FrameDecoder:
    """Incremental decoder: feed bytes as they arrive, get whole messages back."""

    __slots__ = ("_buf", "_need")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._need = -1  # body length of the frame being read, -1 while reading headers

    def feed(self, data: bytes) -> list[JSONValue]:
        self._buf += data
        out: list[JSONValue] = []
        while True:
            if self._need < 0:
                end = self._buf.find(_HEADER_END)
                if end < 0:
                    if len(self._buf) > _MAX_HEADER:
                        raise FramingError(
                            f"no header terminator in {len(self._buf)} bytes: "
                            f"{bytes(self._buf[:80])!r}"
                        )
                    return out
                self._need = _content_length(bytes(self._buf[:end]))
                del self._buf[: end + len(_HEADER_END)]
            if len(self._buf) < self._need:
                return out
            body = bytes(self._buf[: self._need])
            del self._buf[: self._need]
            self._need = -1
            try:
                out.append(json.loads(body))
            except ValueError as e:
                raise FramingError(f"frame body is not JSON ({e}): {body[:80]!r}") from e

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)


def _content_length(header_block: bytes) -> int:
    for line in header_block.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"content-length":
            try:
                n = int(value.strip())
            except ValueError:
                break
            if n >= 0:
                return n
            break
    raise FramingError(f"frame header has no valid Content-Length: {header_block[:200]!r}")
