"""ToolResult converters and the schema exports (with MCP annotations from the tier)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.run import Run
from tether.tools.export import TIER_ANNOTATIONS, export_schema
from tether.tools.results import Image, ToolResult
from tether.tools.spec import Tier

PNG = b"\x89PNG\r\n\x1a\n"
B64 = "iVBORw0KGgo="


def test_anthropic_text() -> None:
    assert ToolResult.ok("hi").to_anthropic("tu_1") == {
        "type": "tool_result",
        "tool_use_id": "tu_1",
        "content": [{"type": "text", "text": "hi"}],
    }


def test_anthropic_error_and_image() -> None:
    res = ToolResult(text="plot failed halfway", is_error=True, images=(Image(PNG),))
    assert res.to_anthropic("tu_2") == {
        "type": "tool_result",
        "tool_use_id": "tu_2",
        "content": [
            {"type": "text", "text": "plot failed halfway"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}},
        ],
        "is_error": True,
    }


def test_anthropic_empty_text_is_not_empty() -> None:
    assert ToolResult.ok("").to_anthropic("x")["content"][0]["text"] == "(no output)"


def test_openai_message() -> None:
    assert ToolResult.error("bad").to_openai("call_1") == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Error: bad",
    }


def test_openai_images_follow_as_user_message() -> None:
    msgs = ToolResult.ok("fig", images=(Image(PNG, "image/png"),)).to_openai_messages("c")
    assert msgs[0]["content"] == "fig\n[1 image(s) attached in the next message]"
    assert msgs[1]["role"] == "user"
    assert msgs[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{B64}"},
    }


def test_mcp_call_tool_result() -> None:
    res = ToolResult.ok("ok", data={"written": ["a.py"]}, images=(Image(PNG),))
    assert res.to_mcp() == {
        "content": [
            {"type": "text", "text": "ok"},
            {"type": "image", "data": B64, "mimeType": "image/png"},
        ],
        "isError": False,
        "structuredContent": {"written": ["a.py"]},
    }


def test_mcp_non_object_data_is_not_structured() -> None:
    assert "structuredContent" not in ToolResult.ok("x", data=[1, 2]).to_mcp()


def test_to_json_round_trips() -> None:
    res = ToolResult.ok("x", data={"p": Path("a")}, images=(Image(PNG),))
    assert json.loads(json.dumps(res.to_json())) == {
        "text": "x",
        "is_error": False,
        "data": {"p": "a"},
        "images": [{"mime": "image/png", "data": B64}],
    }


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "mcp"])
def test_tool_schemas_every_format(run: Run, fmt: str) -> None:
    out = run.tool_schemas(fmt)
    assert len(out) == len(run.tools())
    json.dumps(out)  # plain JSON
    first = out[0]
    if fmt == "anthropic":
        assert set(first) == {"name", "description", "input_schema"}
    elif fmt == "openai":
        assert first["type"] == "function" and set(first["function"]) == {
            "name",
            "description",
            "parameters",
        }
    else:
        assert set(first) == {"name", "description", "inputSchema", "annotations"}


def test_mcp_annotations_from_tier(run: Run) -> None:
    by_name = {s["name"]: s["annotations"] for s in run.tool_schemas("mcp")}
    assert by_name["read"] == {"title": "read", **TIER_ANNOTATIONS[Tier.READ]}
    assert by_name["read"]["readOnlyHint"] is True and by_name["read"]["destructiveHint"] is False
    assert by_name["write"]["readOnlyHint"] is False and by_name["write"]["destructiveHint"] is True
    assert TIER_ANNOTATIONS[Tier.EXEC]["openWorldHint"] is True


def test_unknown_format(run: Run) -> None:
    with pytest.raises(ValueError, match="unknown schema format 'gemini': use one of anthropic"):
        run.tool_schemas("gemini")


def test_export_is_a_copy(run: Run) -> None:
    spec = run.tools()[0].spec
    exported = export_schema(spec, "anthropic")
    exported["input_schema"]["properties"].clear()
    assert spec.schema["properties"]


def test_read_only_surface_schemas(workdir: Path) -> None:
    with Run(workdir=workdir, surface="readonly") as r:
        assert [s["function"]["name"] for s in r.tool_schemas("openai")] == ["read"]
