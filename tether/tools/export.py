"""A tool's declaration in each provider's wire shape: Anthropic, OpenAI, MCP.

The spec is the one source; these are views of it. MCP's tool annotations are derived
from the tier, never declared per tool.
"""

from __future__ import annotations

from collections.abc import Mapping

from tether.json_types import JSONObject, JSONValue
from tether.tools.spec import Tier, ToolSpec

# MCP tool annotations derived from the tier (MCP spec 2025-03-26, ToolAnnotations).
TIER_ANNOTATIONS: dict[Tier, dict[str, bool]] = {
    Tier.READ: {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
    Tier.WRITE: {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    },
    Tier.EXEC: {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    },
}

SCHEMA_FORMATS = ("anthropic", "openai", "mcp")


def export_schema(spec: ToolSpec, fmt: str) -> JSONObject:
    """One tool's declaration in a provider's wire shape."""
    schema = _plain(spec.schema)
    if fmt == "anthropic":
        return {"name": spec.name, "description": spec.description, "input_schema": schema}
    if fmt == "openai":
        return {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": schema,
            },
        }
    if fmt == "mcp":
        return {
            "name": spec.name,
            "description": spec.description,
            "inputSchema": schema,
            "annotations": {"title": spec.name, **TIER_ANNOTATIONS[spec.tier]},
        }
    raise ValueError(f"unknown schema format {fmt!r}: use one of {', '.join(SCHEMA_FORMATS)}")


def _plain(value: object) -> JSONValue:
    """Deep copy into plain dicts and lists (specs may hold MappingProxy or tuples)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"a tool schema holds {value!r}, which is not JSON")
