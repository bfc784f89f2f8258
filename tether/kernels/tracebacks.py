"""A kernel's error as a clean traceback: no ANSI colours, only the frames that are the
user's business.

IPython sends a traceback as a list of entries - a dashed rule, a header, one entry per
frame (`Cell In[4], line 2` / `File /path/mod.py:12, in f()`), the exception line -
coloured with ANSI codes. Deno sends `Error: bad` followed by one `    at f (...)` line per
frame. Frames dropped:

- tether's own helpers (`<tether-prelude>`, `tether-prelude.js`) and, right below one of
  them, the standard-library frames it called (`subprocess`, `shlex`...): an idiom that
  failed should read as failing on the user's line;
- ipykernel's and IPython's own frames (a broken `_repr_html_` fails inside IPython's
  formatters), and Deno's internals (`ext:`).
"""

from __future__ import annotations

import re

from tether.json_types import JSONObject
from tether.kernels.clipping import clip_middle
from tether.kernels.mimebundles import strip_ansi
from tether.kernels.prelude import JAVASCRIPT_PRELUDE_FILE, PYTHON_PRELUDE_FILE

_FRAME = re.compile(r"^\s*(?:Cell In\s*\[|Input In\s*\[|File |at )")
_PRELUDE = re.compile(re.escape(PYTHON_PRELUDE_FILE) + "|" + re.escape(JAVASCRIPT_PRELUDE_FILE))
_KERNEL_OWN = re.compile(r"[/\\](?:ipykernel|IPython)[/\\]|^\s*at (?:.*\()?ext:")
_STDLIB = re.compile(
    r"^\s*File \"?[^\"\n]*[/\\]lib[/\\]python3\.\d+[/\\](?!site-packages|dist-packages)"
)
_HEADER = re.compile(r"^\S+\s+Traceback \(most recent call last\)\s*$", re.MULTILINE)


def clean_traceback(
    error: JSONObject, limit: int = 8_000, source: str | None = None, cell: int | None = None
) -> str:
    """The traceback of an `error` message (or an `execute_reply` with status error),
    cleaned (see the module doc) and clipped to `limit` characters around the middle.

    With the cell's `source` as the user wrote it and its execution count `cell`, a frame
    of that cell quoting a rewritten line (`----> 3 _tether_cd('/x')`) quotes the
    user's own line instead (`----> 3 %cd /x`): rewrites keep line numbers."""
    entries = error.get("traceback")
    entries = entries if isinstance(entries, list) else []
    blocks = [b for entry in entries for b in _blocks(strip_ansi(str(entry)))]
    kept = _drop_hidden(blocks)
    if source is not None and cell is not None:
        kept = [_quote_source(block, source.splitlines(), cell) for block in kept]
    text = _join([b.rstrip() for b in kept if b.strip() and not _is_rule(b)])
    text = _HEADER.sub("Traceback (most recent call last):", text)
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in text.splitlines()))
    name, value = str(error.get("ename") or "Error"), str(error.get("evalue") or "")
    if not any(line.startswith(name) for line in text.splitlines()):
        # the exception line is missing (Deno's `throw "str"`, an empty traceback)
        text = (text + "\n" if text.strip() else "") + (f"{name}: {value}" if value else name)
    return clip_middle(text.strip("\n"), limit)[0]


def _blocks(entry: str) -> list[str]:
    """An entry split where frames begin (one entry may hold several in plain mode)."""
    blocks: list[str] = []
    for line in entry.split("\n"):
        if not blocks or _FRAME.match(line):
            blocks.append(line)
        else:
            blocks[-1] += "\n" + line
    return blocks


def _drop_hidden(blocks: list[str]) -> list[str]:
    kept = []
    below_prelude = False
    for block in blocks:
        frame = bool(_FRAME.match(block))
        if frame and _PRELUDE.search(block):
            below_prelude = True
            continue
        if frame and (_KERNEL_OWN.search(block) or (below_prelude and _STDLIB.match(block))):
            continue
        below_prelude = False
        kept.append(block)
    return kept


_QUOTED_LINE = re.compile(r"^(?P<mark>\s*(?:-+>)?\s*)(?P<number>\d+) (?P<code>.*)$")


def _quote_source(block: str, source: list[str], cell: int) -> str:
    if not block.lstrip().startswith(f"Cell In[{cell}]"):
        return block
    lines = block.split("\n")
    for i, line in enumerate(lines[1:], start=1):
        quoted = _QUOTED_LINE.match(line)
        if quoted and "_tether_" in quoted["code"] and 0 < int(quoted["number"]) <= len(source):
            lines[i] = f"{quoted['mark']}{quoted['number']} {source[int(quoted['number']) - 1]}"
    return "\n".join(lines)


def _is_rule(block: str) -> bool:
    return set(block.strip()) == {"-"}


def _join(blocks: list[str]) -> str:
    """Blocks one per line, a blank line after a block of several (a frame with its code)."""
    parts: list[str] = []
    for block in blocks:
        if parts:
            parts.append("\n\n" if "\n" in parts[-1].strip("\n") else "\n")
        parts.append(block.strip("\n"))
    return "".join(parts)
