"""Narrowing a server's JSON (`JSONValue`) to what the code reading it expects.

A server may send any JSON value where the spec says one shape; these read it as that shape
or as the empty one (an object that is not one reads as `{}`, a list as `[]`, a string as
the default), so one malformed field costs its own answer, not the session.
"""

from __future__ import annotations

from tether.json_types import JSONObject, JSONValue


def obj(value: JSONValue) -> JSONObject:
    """`value` if it is an object, else {}."""
    return value if isinstance(value, dict) else {}


def objs(value: JSONValue) -> list[JSONObject]:
    """The objects of `value` if it is a list (its other items skipped), else []."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def text(value: JSONValue, default: str = "") -> str:
    """`value` if it is a string, else `default`."""
    return value if isinstance(value, str) else default


def whole(value: JSONValue, default: int = 0) -> int:
    """`value` if it is a whole number (an int, or a float with no fraction), else
    `default`."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return default
