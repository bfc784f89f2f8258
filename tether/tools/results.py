"""What every tool call returns: `ToolResult`, the one shape the model and the host see.

A result is text for the model, an error flag, structured `data` for hosts and tests
(JSON-able: dicts, lists, str, int, float, bool, None), and images. Converters to the
Anthropic, OpenAI and MCP wire shapes live here too, so a host never hand-builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Image:
    """An image the transcript shows (a matplotlib figure, a screenshot)."""

    data: bytes
    mime: str = "image/png"


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False
    data: Any = None
    images: tuple[Image, ...] = field(default_factory=tuple)

    @classmethod
    def ok(cls, text: str, data: Any = None, images: tuple[Image, ...] = ()) -> ToolResult:
        return cls(text=text, is_error=False, data=data, images=tuple(images))

    @classmethod
    def error(cls, text: str, data: Any = None) -> ToolResult:
        """An error the model can act on: say what was wrong and what to do instead."""
        return cls(text=text, is_error=True, data=data)
