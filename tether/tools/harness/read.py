"""`read`: numbered lines of a text file, capped, saying how to read on.

A file over MAX_WHOLE_READ_BYTES is read only by range (start_line / end_line): at that
size it is data or generated code, and its first 2000 lines are rarely what the agent is
after. The refusal says the size and shows the call that reads a range.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import BinaryIO

from tether.json_types import JSONObject, JSONValue
from tether.tools.harness.files import open_checked
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

MAX_READ_LINES = 2000
MAX_READ_BYTES = 256 * 1024
MAX_LINE_CHARS = 2000
COUNT_LINES_UP_TO = 32 * 1024 * 1024  # beyond this, read does not count the total lines
MAX_WHOLE_READ_BYTES = 8 * 1024 * 1024  # a larger file is read by range only

_CHUNK = 64 * 1024


def _bounded_lines(f: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary file, each cut to 64 KiB: a file that is one huge line (a
    minified bundle, a data dump) must not be loaded whole to show its first characters."""
    while True:
        line = f.readline(_CHUNK)
        if not line:
            return
        if not line.endswith(b"\n") and len(line) == _CHUNK:
            while True:  # skip the rest of this line
                rest = f.readline(_CHUNK)
                if not rest or rest.endswith(b"\n"):
                    break
        yield line


def _line(value: JSONValue) -> int:
    """A line argument (validated: an integer, or a float that is one)."""
    if isinstance(value, int | float):
        return int(value)
    raise TypeError(f"a line number, not {value!r}")


def read(ctx: ToolContext, args: JSONObject) -> ToolResult:
    rel = str(args["path"])  # (validated: a string)
    path = ctx.resolve_path(rel)
    start = _line(args.get("start_line", 1))
    end = _line(args["end_line"]) if "end_line" in args else None
    if end is not None and end < start:
        return ToolResult.error(
            f"end_line ({end}) is before start_line ({start}); give start_line <= end_line."
        )
    opened = open_checked(ctx, path, rel)
    if isinstance(opened, ToolResult):
        return opened
    f, size = opened
    if size > MAX_WHOLE_READ_BYTES and "start_line" not in args and "end_line" not in args:
        f.close()
        return ToolResult.error(
            f"'{rel}' is {size / 2**20:.1f} MiB, over the {MAX_WHOLE_READ_BYTES // 2**20} MiB "
            "read shows without a range. Read a range: read "
            f'{{"path": {json.dumps(rel)}, "start_line": 1, "end_line": 200}} (at most '
            f"{MAX_READ_LINES} lines a call), or find the part you need first with ast_grep.",
            data={"path": rel, "size": size, "limit": MAX_WHOLE_READ_BYTES},
        )
    with f:
        head = f.read(8192)
        if b"\x00" in head:
            return ToolResult.error(
                f"'{rel}' is a binary file ({size} bytes); read shows text only."
            )
        f.seek(0)
        shown: list[str] = []
        used = 0
        number = 0
        truncated = ""
        long_lines = 0
        for raw in _bounded_lines(f):
            number += 1
            if number < start:
                continue
            if end is not None and number > end:
                if size > COUNT_LINES_UP_TO:
                    break
                continue
            if truncated:
                if size > COUNT_LINES_UP_TO:
                    break
                continue
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + " [... line cut]"
                long_lines += 1
            entry = f"{number:>6}\t{line}"
            if len(shown) >= MAX_READ_LINES:
                truncated = "lines"
                continue
            if used + len(entry) + 1 > MAX_READ_BYTES and shown:
                truncated = "bytes"
                continue
            shown.append(entry)
            used += len(entry) + 1
        total = number if size <= COUNT_LINES_UP_TO or not truncated else None
    if number == 0:
        return ToolResult.ok(f"'{rel}' is empty.", data={"path": rel, "total_lines": 0})
    if start > number:
        return ToolResult.error(
            f"start_line {start} is past the end of '{rel}', which has {number} lines."
        )
    last = start + len(shown) - 1
    notes = []
    if truncated:
        cap = f"{MAX_READ_LINES} lines" if truncated == "lines" else f"{MAX_READ_BYTES // 1024} KiB"
        of = f" of {total}" if total is not None else ""
        notes.append(
            f"[showing lines {start}-{last}{of}: output is capped at {cap}; "
            f"call read with start_line={last + 1} for more]"
        )
    if long_lines:
        notes.append(f"[{long_lines} line(s) longer than {MAX_LINE_CHARS} characters were cut]")
    text = "\n".join(shown + notes)
    data = {
        "path": rel,
        "start_line": start,
        "end_line": last,
        "total_lines": total,
        "truncated": bool(truncated),
    }
    return ToolResult.ok(text, data=data)
