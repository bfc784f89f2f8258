"""A cell's output the way a notebook shows it, as text and images for a transcript.

`CellOutput` takes the iopub messages of one cell, in arrival order, through
`add(msg_type, content)`; `render(caps)` gives a `RenderedCell`. What it does with them:

- `stream`: stdout and stderr interleaved as they arrived, consecutive chunks of one
  stream merged; a carriage return overwrites its line (progress bars show their last
  state, not every frame).
- `execute_result` (the echoed last expression), `display_data` (`display()`): one rich
  output each, its representation chosen by `mimebundles.choose` - images go to
  `images`, with a `[image N: caption]` line in the text where they appeared. An image
  identical to one already shown is dropped: matplotlib's inline backend sends a figure
  that is also the cell's last expression twice (once echoed, once flushed).
- `update_display_data` replaces the output with the same `display_id`.
- `clear_output` clears what came before; with `wait=True`, only when the next output
  arrives (so a progress display does not flicker to nothing).
- `error` (or an `execute_reply` with status error, for kernels that publish no error
  message - Deno on a syntax error) becomes `error`: a clean traceback (`tracebacks`).
  With the cell's own `source`, the traceback quotes the user's lines, not their rewrite.
  `status` and other types are ignored (`execute_input` gives the execution count).

Everything is capped (`OutputCaps`) and `notes` says what was cut and why. Caps hold
while output arrives, not only at render: each stream keeps its first half-budget and a
sliding last half (`clipping.Window`), so a cell printing for an hour stays small.
`render(caps)` can narrow the caps the accumulator was built with, not widen them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tether.json_types import JSONObject
from tether.kernels.caps import OutputCaps
from tether.kernels.clipping import Cut, Window, clip_middle, cut_marker, head_end, tail_start
from tether.kernels.mimebundles import Choice, Image, choose
from tether.kernels.tracebacks import clean_traceback

__all__ = ["CellOutput", "Image", "OutputCaps", "RenderedCell"]

_PRUNE_EVERY = 256


@dataclass(frozen=True)
class RenderedCell:
    """What a cell showed: text in order, images, what was cut, and its error if any."""

    text: str
    images: list[Image] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None


class _Text:
    """A run of one stream's text."""

    __slots__ = ("name", "text")

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text

    @property
    def size(self) -> int:
        return len(self.text)

    def trim_front(self, units: int) -> int:
        gone = tail_start(self.text, units) if units < len(self.text) else len(self.text)
        self.text = self.text[gone:]
        return gone

    def take_front(self, units: int) -> _Text:
        end = head_end(self.text, units)
        front = _Text(self.name, self.text[:end])
        self.text = self.text[end:]
        return front


class _Rich:
    """One rich output: a text, or an image with its caption; size 1 until trimmed."""

    __slots__ = ("display_id", "text", "image", "notes", "size")

    def __init__(self, display_id: str | None) -> None:
        self.display_id = display_id
        self.text = ""
        self.image: Image | None = None
        self.notes: list[str] = []
        self.size = 1

    def fill(self, choice: Choice, caps: OutputCaps) -> _Rich:
        self.text, cut = clip_middle(choice.text, caps.display_chars)
        self.image = choice.image
        self.notes = list(choice.notes)
        if cut:
            self.notes.append(
                f"a rich output was cut by {cut:,} chars in the middle "
                f"(cap {caps.display_chars:,} per output)"
            )
        if self.image is not None and self.image.size > caps.image_bytes:
            self.notes.append(
                f"an {self.image.mime} image of {self.image.size:,} bytes is not shown: "
                f"over the {caps.image_bytes:,}-byte cap"
            )
            self.image = None
            self.text = self.text or "[image not shown: too large]"
        return self

    def trim_front(self, units: int) -> int:
        gone, self.size = self.size, 0
        return gone

    def take_front(self, units: int) -> _Rich:
        raise ValueError("a rich output is never split")


class _Sequence:
    """Pieces of output in arrival order, each stream and the rich outputs windowed."""

    def __init__(self, caps: OutputCaps) -> None:
        self.caps = caps
        self.items: list[_Text | _Rich | Cut] = []
        self.windows: dict[str, Window] = {}
        self.added = 0

    def window(self, channel: str) -> Window:
        if channel not in self.windows:
            limit = self.caps.displays if channel == "display" else self.caps.stream_chars
            self.windows[channel] = Window(channel, limit, self.items)  # type: ignore[arg-type]
        return self.windows[channel]

    def add(self, piece: _Text | _Rich) -> None:
        self.items.append(piece)
        self.window(piece.name if isinstance(piece, _Text) else "display").admit(piece)
        self.added += 1
        if self.added % _PRUNE_EVERY == 0:  # trimmed pieces are dead weight
            self.items[:] = [i for i in self.items if isinstance(i, Cut) or i.size]

    def add_cut(self, cut: Cut) -> None:
        copy = Cut(cut.channel)
        copy.count = cut.count
        self.items.append(copy)
        self.window(cut.channel).adopt(copy)


class CellOutput:
    """The outputs of one cell as they arrive (see the module doc)."""

    def __init__(self, caps: OutputCaps | None = None, source: str | None = None) -> None:
        """`source` is the cell as the user wrote it, before `rewrite`: the traceback then
        quotes the user's lines rather than their rewritten form."""
        self._caps = caps or OutputCaps()
        self._source = source
        self._cell: int | None = None  # the execution count, from execute_input
        self._sequence = _Sequence(self._caps)
        self._open_name: str | None = None
        self._open = ""  # the stream's last, unfinished line: a \r may still overwrite it
        self._pending_clear = False
        self._clears = 0
        self._error: JSONObject | None = None

    def add(self, msg_type: str, content: JSONObject) -> None:
        """Take one iopub message (or the execute_reply) of this cell."""
        handler = _HANDLERS.get(msg_type)
        if handler is not None:
            handler(self, content)

    # ---- the messages ---------------------------------------------------------------------

    def _stream(self, content: JSONObject) -> None:
        self._output_arrives()
        name, text = str(content.get("name") or "stdout"), str(content.get("text") or "")
        if name != self._open_name:
            self._flush_open()
            self._open_name = name
        done, newline, rest = (self._open + text).replace("\r\n", "\n").rpartition("\n")
        if newline:
            self._sequence.add(_Text(name, _overwrite_lines(done + "\n")))
        self._open = _overwrite_open(rest)
        if len(self._open) > self._caps.stream_chars:  # one endless line: keep it windowed
            self._sequence.add(_Text(name, self._open))
            self._open = ""

    def _rich(self, content: JSONObject) -> None:
        self._output_arrives()
        self._flush_open()
        self._sequence.add(_Rich(_display_id(content)).fill(choose(_bundle(content)), self._caps))

    def _update(self, content: JSONObject) -> None:
        display_id = _display_id(content)
        targets = [
            i for i in self._sequence.items
            if isinstance(i, _Rich) and i.size and display_id and i.display_id == display_id
        ]  # fmt: skip
        if not targets:  # a display from an earlier cell: show the update here
            self._rich(content)
        for target in targets:
            target.fill(choose(_bundle(content)), self._caps)

    def _clear_output(self, content: JSONObject) -> None:
        if content.get("wait"):
            self._pending_clear = True
        else:
            self._clear()

    def _input(self, content: JSONObject) -> None:
        count = content.get("execution_count")
        self._cell = count if isinstance(count, int) else self._cell

    def _error_message(self, content: JSONObject) -> None:
        self._output_arrives()
        self._error = content

    def _reply(self, content: JSONObject) -> None:
        self._input(content)
        status = content.get("status")
        if status == "error" and self._error is None:
            self._error = content
        elif status == "aborted" and self._error is None:
            self._error = {"ename": "Aborted", "evalue": "the kernel did not run this cell"}

    def _output_arrives(self) -> None:
        if self._pending_clear:
            self._clear()

    def _clear(self) -> None:
        self._pending_clear = False
        if self._sequence.items or self._open:
            self._clears += 1
        self._sequence = _Sequence(self._caps)
        self._open_name, self._open = None, ""

    def _flush_open(self) -> None:
        if self._open.rstrip("\r") and self._open_name is not None:
            self._sequence.add(_Text(self._open_name, self._open.rstrip("\r")))
        self._open_name, self._open = None, ""

    # ---- the result -----------------------------------------------------------------------

    def render(self, caps: OutputCaps | None = None) -> RenderedCell:
        """The output so far (callable mid-cell, for partial output), capped by `caps`."""
        caps = caps or self._caps
        sequence = self._replay(caps)
        text, images, notes = _assemble(sequence, caps)
        if self._clears:
            times = "once" if self._clears == 1 else f"{self._clears} times"
            notes.insert(
                0, f"clear_output cleared earlier output {times}; shown is what came after"
            )
        text, cut = clip_middle(text, caps.text_chars)
        if cut:
            notes.append(
                f"{cut:,} chars cut from the middle of the output (cap {caps.text_chars:,} in all)"
            )
        error = None
        if self._error:
            error = clean_traceback(self._error, caps.error_chars, self._source, self._cell)
        return RenderedCell(text, images, list(dict.fromkeys(notes)), error)

    def _replay(self, caps: OutputCaps) -> _Sequence:
        """The retained pieces, copied through windows of `caps` (no-op if unchanged)."""
        sequence = _Sequence(caps)
        for item in self._sequence.items:
            if isinstance(item, Cut):
                sequence.add_cut(item)
            elif isinstance(item, _Text) and item.text:
                sequence.add(_Text(item.name, item.text))
            elif isinstance(item, _Rich) and item.size:
                sequence.add(_copy_rich(item, caps))
        if self._open.rstrip("\r") and self._open_name is not None:
            sequence.add(_Text(self._open_name, self._open.rstrip("\r")))
        return sequence


_HANDLERS: dict[str, Callable[[CellOutput, JSONObject], None]] = {
    "stream": CellOutput._stream,
    "display_data": CellOutput._rich,
    "execute_result": CellOutput._rich,
    "update_display_data": CellOutput._update,
    "clear_output": CellOutput._clear_output,
    "error": CellOutput._error_message,
    "execute_reply": CellOutput._reply,
    "execute_input": CellOutput._input,
}


def _display_id(content: JSONObject) -> str | None:
    transient = content.get("transient")
    found = transient.get("display_id") if isinstance(transient, dict) else None
    return None if found is None else str(found)


def _bundle(content: JSONObject) -> JSONObject:
    data = content.get("data")
    return data if isinstance(data, dict) else {}


def _copy_rich(item: _Rich, caps: OutputCaps) -> _Rich:
    copy = _Rich(item.display_id).fill(Choice(item.text, item.image), caps)
    copy.notes = list(dict.fromkeys([*item.notes, *copy.notes]))
    return copy


def _overwrite_lines(text: str) -> str:
    """Each line as a terminal leaves it after carriage returns: its last written part."""
    return "\n".join(_last_part(line) if "\r" in line else line for line in text.split("\n"))


def _overwrite_open(line: str) -> str:
    """The unfinished line, overwritten so far; a trailing \\r stays to overwrite later."""
    if "\r" not in line:
        return line
    return _last_part(line) + ("\r" if line.endswith("\r") else "")


def _last_part(line: str) -> str:
    parts = [part for part in line.split("\r") if part]
    return parts[-1] if parts else ""


def _assemble(sequence: _Sequence, caps: OutputCaps) -> tuple[str, list[Image], list[str]]:
    out: list[str] = []
    images: list[Image] = []
    notes: list[str] = []
    shown: set[str] = set()
    unshown = 0

    def block(text: str) -> None:
        if out and not out[-1].endswith("\n"):
            out.append("\n")
        out.append(text.rstrip("\n") + "\n")

    for item in sequence.items:
        if isinstance(item, Cut):
            if item.count:
                block(_cut_text(item))
                notes.append(_cut_note(item, caps))
        elif isinstance(item, _Text):
            out.append(item.text)
        elif item.size:
            notes.extend(item.notes)
            if item.image is None:
                block(item.text)
            elif item.image.data not in shown:  # a repeat is the inline backend's second copy
                shown.add(item.image.data)
                if len(images) < caps.images:
                    images.append(item.image)
                    block(f"[image {len(images)}: {item.text or item.image.mime}]")
                else:
                    unshown += 1
                    block(f"[image not shown: {item.text or item.image.mime}]")
    if unshown:
        notes.append(
            f"{unshown} images not shown (cap {caps.images} per cell; the first ones are kept)"
        )
    return "".join(out).rstrip(), images, notes


def _cut_text(cut: Cut) -> str:
    if cut.channel == "display":
        return cut_marker(cut.count, "rich outputs")
    return cut_marker(cut.count, f"chars of {cut.channel}")


def _cut_note(cut: Cut, caps: OutputCaps) -> str:
    if cut.channel == "display":
        return f"{cut.count:,} rich outputs cut from the middle (cap {caps.displays} per cell)"
    return f"{cut.channel}: {cut.count:,} chars cut from the middle (cap {caps.stream_chars:,} per stream)"
