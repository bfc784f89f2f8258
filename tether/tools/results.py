"""What every tool call returns: `ToolResult`, the one shape the model and the host see.

A result is text for the model, an error flag, structured `data` for hosts and tests
(JSON-able: dicts, lists, str, int, float, bool, None), and images. Converters to the
Anthropic, OpenAI and MCP wire shapes live here too, so a host never hand-builds them.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from tether.json_types import JSONObject, JSONValue


@dataclass(frozen=True)
class Image:
    """An image the transcript shows (a matplotlib figure, a screenshot)."""

    data: bytes
    mime: str = "image/png"

    def b64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False
    # JSON-able by contract (see the module doc); JSONValue once every family's data is
    # typed so (the lsp, debug, structural and vibe families do not type theirs yet)
    data: Any = None
    images: tuple[Image, ...] = field(default_factory=tuple)

    @classmethod
    def ok(cls, text: str, data: Any = None, images: tuple[Image, ...] = ()) -> ToolResult:
        return cls(text=text, is_error=False, data=data, images=tuple(images))

    @classmethod
    def error(cls, text: str, data: Any = None) -> ToolResult:
        """An error the model can act on: say what was wrong and what to do instead."""
        return cls(text=text, is_error=True, data=data)

    # ---- wire shapes ----------------------------------------------------------------------
    def to_anthropic(self, tool_use_id: str) -> JSONObject:
        """An Anthropic Messages API `tool_result` content block (images as base64 blocks)."""
        content: list[JSONValue] = [{"type": "text", "text": self.text or _EMPTY}]
        for image in self.images:
            content.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": image.mime, "data": image.b64()},
                }
            )
        block: JSONObject = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": content,
        }
        if self.is_error:
            block["is_error"] = True
        return block

    def to_openai(self, tool_call_id: str) -> JSONObject:
        """An OpenAI Chat Completions `tool` message. Tool messages carry text only, so
        images are named in the text; `to_openai_messages` also sends them."""
        text = self.text or _EMPTY
        if self.is_error:
            text = f"Error: {text}"
        if self.images:
            text += f"\n[{len(self.images)} image(s) attached in the next message]"
        return {"role": "tool", "tool_call_id": tool_call_id, "content": text}

    def to_openai_messages(self, tool_call_id: str) -> list[JSONObject]:
        """The tool message, plus a user message carrying the images as data URLs."""
        messages = [self.to_openai(tool_call_id)]
        if self.images:
            parts: list[JSONValue] = [
                {"type": "text", "text": f"Images returned by tool call {tool_call_id}:"}
            ]
            for image in self.images:
                parts.append(
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:{image.mime};base64,{image.b64()}"},
                    }
                )
            messages.append({"role": "user", "content": parts})
        return messages

    def to_mcp(self) -> JSONObject:
        """An MCP `CallToolResult` (structuredContent when `data` is a JSON object)."""
        content: list[JSONValue] = [{"type": "text", "text": self.text}]
        for image in self.images:
            content.append({"type": "image", "data": image.b64(), "mimeType": image.mime})
        out: JSONObject = {"content": content, "isError": self.is_error}
        if isinstance(self.data, dict):
            try:
                out["structuredContent"] = json.loads(json.dumps(self.data, default=str))
            except (TypeError, ValueError):
                pass
        return out

    def to_json(self) -> JSONObject:
        """A plain JSON-able rendering (the `tether call --json` output)."""
        return {
            "text": self.text,
            "is_error": self.is_error,
            "data": json.loads(json.dumps(self.data, default=str)),
            "images": [{"mime": i.mime, "data": i.b64()} for i in self.images],
        }


_EMPTY = "(no output)"
