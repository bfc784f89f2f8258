"""JSON whose shape a foreign peer decides: LSP and DAP messages, Jupyter replies, a
model's tool arguments, a checker's report.

One name for it, so a signature says "this is decoded JSON" instead of a bare `dict` or
`list`, and so the type is the real one: a value is a scalar, a list of values or an object
of values, nothing else. Code that reaches into a foreign object narrows first
(`isinstance(v, dict)`): the peer may send any of these where the spec says one.
"""

from __future__ import annotations

from typing import TypeAlias

JSONScalar: TypeAlias = str | int | float | bool | None
JSONValue: TypeAlias = JSONScalar | list["JSONValue"] | dict[str, "JSONValue"]
JSONObject: TypeAlias = dict[str, JSONValue]
