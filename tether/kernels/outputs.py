"""Stand-in until the cells branch lands: a cell's iopub messages -> text, images, error.

The real module (issue 13, deliverable 2) replaces this file; only its interface is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Image:
    mime: str
    data: str  # base64


@dataclass(frozen=True)
class RenderedCell:
    text: str
    images: list[Image] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None


class CellOutput:
    def __init__(self, caps: Any = None) -> None:
        self._parts: list[str] = []
        self._images: list[Image] = []
        self._error: str | None = None

    def add(self, msg_type: str, content: dict[str, Any]) -> None:
        if msg_type == "stream":
            self._parts.append(str(content.get("text", "")))
        elif msg_type in ("execute_result", "display_data"):
            data = content.get("data", {})
            if "image/png" in data:
                self._images.append(Image("image/png", data["image/png"]))
            elif "text/plain" in data:
                self._parts.append(str(data["text/plain"]) + "\n")
        elif msg_type == "error":
            self._error = "\n".join(content.get("traceback") or []) or (
                f"{content.get('ename')}: {content.get('evalue')}"
            )

    def render(self, caps: Any = None) -> RenderedCell:
        return RenderedCell("".join(self._parts), list(self._images), [], self._error)
