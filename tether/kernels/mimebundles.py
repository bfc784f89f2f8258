"""Which representation of a rich output (a Jupyter mimebundle) the transcript shows.

A kernel offers one value in several formats; a notebook shows the richest it can. The
transcript can show text and raster images, so the choice, first match wins:

1. `image/png`, `image/jpeg`, `image/gif`, `image/webp` - an image (base64 as sent), with
   the bundle's `text/plain` as its caption (`<Figure size 640x480 with 1 Axes>`).
2. `text/markdown` - how tether shows a DataFrame, and what `Markdown(...)` displays.
3. `text/plain` - the repr, ANSI colours removed (Deno colours its echoes).
4. `text/latex`, then `application/json` (indented).
5. `text/html`, only as a fallback: turned into text (tables into markdown tables),
   scripts and styles dropped - a notebook's HTML is markup, not content.

`image/svg+xml` is never shown as an image (the transcript takes raster images only);
its bundle falls back to text and a note says so. Any other type is named, not shown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from tether.json_types import JSONObject, JSONValue

IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


@dataclass(frozen=True)
class Image:
    """An image output: its MIME type and its data, base64 as the kernel sent it."""

    mime: str
    data: str

    @property
    def size(self) -> int:
        """Decoded size in bytes (close enough: base64 padding and line breaks aside)."""
        return len(self.data) * 3 // 4


@dataclass(frozen=True)
class Choice:
    """What of a bundle to show: an image with its caption, or a text."""

    text: str
    image: Image | None = None
    notes: list[str] = field(default_factory=list)


def choose(data: JSONObject) -> Choice:
    """The representation of mimebundle `data` to show (see the module doc for the order)."""
    notes = []
    for mime in IMAGE_MIMES:
        if mime in data:
            caption = strip_ansi(_text(data.get("text/plain", ""))).strip()
            return Choice(caption, Image(mime, _text(data[mime])))
    if "image/svg+xml" in data:
        notes.append("an image/svg+xml output is shown as text: SVG images are not rendered")
    if "text/markdown" in data:
        return Choice(_text(data["text/markdown"]), notes=notes)
    if "text/plain" in data:
        return Choice(strip_ansi(_text(data["text/plain"])), notes=notes)
    if "text/latex" in data:
        return Choice(_text(data["text/latex"]), notes=notes)
    if "application/json" in data:
        return Choice(json.dumps(data["application/json"], indent=2, default=str), notes=notes)
    if "text/html" in data:
        return Choice(html_to_text(_text(data["text/html"])), notes=notes)
    kinds = ", ".join(sorted(data)) or "nothing"
    return Choice(f"[an output of type {kinds}, not shown]", notes=notes)


def _text(value: JSONValue) -> str:
    """Bundle values may be lists of lines (the notebook file format's habit)."""
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return value if isinstance(value, str) else json.dumps(value, default=str)


def html_to_text(html: str) -> str:
    """Readable text from HTML: block elements on their own lines, tables as markdown."""
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    return parser.text()


_BLOCKS = {
    "p", "div", "br", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol", "pre",
    "section", "article", "hr", "blockquote", "caption", "header", "footer",
}  # fmt: skip
_SKIPPED = {"script", "style", "head", "template"}


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skipping = 0
        self.rows: list[list[str]] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self.skipping += 1
        elif tag == "table":
            self.rows = []
        elif tag == "tr" and self.rows is not None:
            self.rows.append([])
        elif tag in ("td", "th") and self.rows is not None:
            self.cell = []
        elif tag in _BLOCKS:
            self._write("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self.skipping = max(0, self.skipping - 1)
        elif tag in ("td", "th") and self.rows and self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split()).replace("|", "\\|"))
            self.cell = None
        elif tag == "table" and self.rows is not None:
            rows, self.rows = self.rows, None
            self._write("\n" + _markdown_table(rows) + "\n")
        elif tag in _BLOCKS:
            self._write("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self._write(data)

    def _write(self, text: str) -> None:
        if self.cell is not None:
            self.cell.append(text)
        elif self.rows is None:
            self.out.append(text)

    def text(self) -> str:
        lines = [" ".join(line.split()) for line in "".join(self.out).splitlines()]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _markdown_table(rows: list[list[str]]) -> str:
    rows = [row for row in rows if row]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("---" for _ in range(width)) + "|")
    return "\n".join(lines)
