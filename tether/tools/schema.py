"""Argument validation against a tool's JSON Schema, with errors a model can act on.

A model that sends bad arguments needs three things to fix its next call: which argument
was wrong, what was expected, and a call that would have worked. `validate(schema, args)`
returns those as a list of `ArgumentError`s (`tether.tools.validation`, re-exported
here); `format_errors` renders them with a correct example built from the schema (its
`examples` if it has any, else synthesized). This module holds the subset a schema may
use (`check_schema`) and the examples.

Why not the `jsonschema` package: our schemas use a small subset (type, properties,
required, enum, const, minimum/maximum, minLength/maxLength, pattern, items,
minItems/maxItems, additionalProperties, anyOf/oneOf), and its messages ("'abc' is not of
type 'integer'") name neither the argument path in a model's terms nor a fix. Wrapping it
would cost a dependency (plus attrs, referencing, rpds-py) and still need the example
synthesis below. `check_schema` rejects keywords outside the subset, so a family that
reaches for one finds out in tests, not from a model.

Numbers are bounded: `check_schema` wants a minimum and a maximum on every integer or
number argument (a line of 2**63 once reached a handler and overflowed there), and the
validator refuses NaN, infinities and integers beyond what a JSON number holds exactly,
whatever the schema says.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from collections.abc import Mapping

from tether.json_types import JSONObject, JSONValue

# the validator (tether.tools.validation), its names importable from here too
from tether.tools.validation import JSON_SAFE_INTEGER as JSON_SAFE_INTEGER
from tether.tools.validation import ArgumentError as ArgumentError
from tether.tools.validation import Schema, _list, _number, _properties, _schemas
from tether.tools.validation import describe as describe
from tether.tools.validation import validate as validate

# Keywords that only annotate; the validator ignores them.
ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "$schema", "deprecated"}
)
# Keywords the validator enforces.
SUPPORTED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "anyOf",
        "oneOf",
        "minProperties",
        "maxProperties",
    }
)

MAX_LINE = 100_000_000  # the largest line number a tool accepts (far beyond any real file)


class SchemaError(ValueError):
    """A tool's schema uses something the validator does not support (a bug in the family)."""


def check_schema(schema: object, where: str = "schema") -> None:
    """Raise SchemaError if `schema` uses a keyword outside the supported subset."""
    if not isinstance(schema, Mapping):
        raise SchemaError(f"{where}: a schema must be an object, got {type(schema).__name__}")
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        if key not in SUPPORTED:
            raise SchemaError(
                f"{where}: keyword {key!r} is not supported by tether.tools.schema "
                f"(supported: {', '.join(sorted(SUPPORTED))})"
            )
        if key == "properties":
            if not isinstance(value, Mapping):
                raise SchemaError(f"{where}: properties must be an object, got {value!r}")
            for name, sub in value.items():
                check_schema(sub, f"{where}.properties.{name}")
        elif key == "items" or (key == "additionalProperties" and isinstance(value, Mapping)):
            check_schema(value, f"{where}.{key}")
        elif key in ("anyOf", "oneOf"):
            if not isinstance(value, list | tuple):
                raise SchemaError(f"{where}: {key} must be a list of schemas, got {value!r}")
            for i, sub in enumerate(value):
                check_schema(sub, f"{where}.{key}[{i}]")
        elif key == "pattern":
            if not isinstance(value, str):
                raise SchemaError(f"{where}: pattern {value!r} is not a string")
            try:
                re.compile(value)
            except re.error as e:
                raise SchemaError(f"{where}: pattern {value!r} does not compile: {e}") from e
    _check_bounded(schema, where)


def _check_bounded(schema: Schema, where: str) -> None:
    t = schema.get("type")
    types = t if isinstance(t, list) else [t]
    if not {"integer", "number"} & set(types):
        return
    low = "minimum" in schema or "exclusiveMinimum" in schema
    high = "maximum" in schema or "exclusiveMaximum" in schema
    if not (low and high):
        raise SchemaError(
            f"{where}: a numeric argument needs both a minimum and a maximum (a model will "
            "send 2**63 one day); give the range that makes sense for it"
        )


# ---- examples ---------------------------------------------------------------------------

_PLACEHOLDERS = {
    "path": "src/app.py",
    "file": "src/app.py",
    "content": "print('hello')\n",
    "old_string": "old text",
    "new_string": "new text",
    "pattern": "print($X)",
    "question": "Which database should I use?",
    "language": "python",
    "symbol": "load_config",
    "new_name": "load_settings",
    "query": "Config",
    "rewrite": "print($X, flush=True)",
    "edit_id": "edit_1",
    "code": "print(1 + 1)",
    "description": "check the arithmetic works",
    "label": "Postgres",
    "brief": "add a --verbose flag to the CLI",
    "worker_id": "w1",
    "message": "also update the README",
    "program": "main.py",
    "expression": "len(items)",
}


def example(schema: Schema, name: str = "") -> JSONValue:
    """A value that satisfies `schema`: its first `examples` entry, else a synthesized one."""
    if schema.get("examples"):
        return _list(schema, "examples")[0]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return _list(schema, "enum")[0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return example(_schemas(schema, key)[0], name)
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), t[0] if t else None)
    if t == "object" or "properties" in schema:
        props = _properties(schema)
        return {k: example(props.get(k, {}), k) for k in _required(schema)}
    if t == "array":
        items = schema.get("items", {})
        count = max(1, int(_number(schema, "minItems")) if "minItems" in schema else 1)
        return (
            [example(items, name) for _ in range(count)]
            if isinstance(items, Mapping) and items
            else []
        )
    if t == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float):
            return int(low)
        return 1 if not isinstance(high, int | float) or high >= 1 else int(high)
    if t == "number":
        return schema.get("minimum", 1.0)
    if t == "boolean":
        return False
    if t == "null":
        return None
    text = _PLACEHOLDERS.get(name, name or "text")
    need = int(_number(schema, "minLength")) if "minLength" in schema else 0
    return text + "x" * max(0, need - len(text))


def _required(schema: Schema) -> list[str]:
    return [str(k) for k in _list(schema, "required")] if "required" in schema else []


def _mend(schema: Schema, value: JSONValue, name: str) -> JSONValue:
    """The nearest valid value to a bad one: "5" -> 5, "hovr" -> "hover", else an example."""
    candidates: list[JSONValue] = []
    if isinstance(value, str) and schema.get("enum"):
        enum = _list(schema, "enum")
        close = difflib.get_close_matches(value, [str(e) for e in enum], n=1)
        candidates += [e for e in enum if close and str(e) == close[0]]
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("true", "false"):
            candidates.append(text.lower() == "true")
        with contextlib.suppress(ValueError):
            candidates.append(int(text))
        with contextlib.suppress(ValueError):
            candidates.append(float(text))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and value < low:
            candidates.append(low)
        if isinstance(high, int | float) and value > high:
            candidates.append(high)
        with contextlib.suppress(ValueError):  # no str() for a 10**5000
            candidates.append(str(value))
    for candidate in candidates:
        if not validate(schema, candidate):
            return candidate
    return example(schema, name)


def repair(schema: Schema, args: object) -> JSONValue:
    """The model's own call made valid: good arguments kept, bad ones replaced by an
    example value, missing required ones added, unknown ones dropped. Falls back to
    `example(schema)` when that does not validate (e.g. anyOf constraints)."""
    if not isinstance(args, dict) or "properties" not in schema:
        return example(schema)
    props = _properties(schema)
    fixed: JSONObject = {}
    for name, value in args.items():
        if name in props:
            fixed[name] = (
                value if not validate(props[name], value) else _mend(props[name], value, name)
            )
        elif schema.get("additionalProperties", True) is not False:
            fixed[name] = value
    for name in _required(schema):
        if name not in fixed:
            fixed[name] = example(props.get(name, {}), name)
    return fixed if not validate(schema, fixed) else example(schema)


def format_errors(
    tool: str, schema: Schema, errors: list[ArgumentError], args: object = None
) -> str:
    """The model-facing message for a failed validation; with `args`, the correct call shown
    is the model's own call repaired."""
    shown = errors[:8]
    lines = [f"invalid arguments for {tool}:"]
    lines += [f"- {e}" for e in shown]
    if len(errors) > len(shown):
        lines.append(f"- ... and {len(errors) - len(shown)} more")
    ex = repair(schema, args) if args is not None else example(schema)
    lines.append(f"A correct call looks like: {tool} {json.dumps(ex, ensure_ascii=False)}")
    return "\n".join(lines)
