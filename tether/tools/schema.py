"""Argument validation against a tool's JSON Schema, with errors a model can act on.

A model that sends bad arguments needs three things to fix its next call: which argument
was wrong, what was expected, and a call that would have worked. `validate(schema, args)`
returns those as a list of `ArgumentError`s; `format_errors` renders them with a correct
example built from the schema (its `examples` if it has any, else synthesized).

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
import math
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from tether.json_types import JSONValue

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

# |integer| above this is not exact in a JSON number (an IEEE double), whatever the schema
JSON_SAFE_INTEGER = 2**53 - 1
MAX_LINE = 100_000_000  # the largest line number a tool accepts (far beyond any real file)

_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "null": "null",
}


@dataclass(frozen=True)
class ArgumentError:
    where: str  # "`start_line`", "`options[2].label`", or "the arguments"
    problem: str  # what was expected, and what came instead

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


class SchemaError(ValueError):
    """A tool's schema uses something the validator does not support (a bug in the family)."""


def check_schema(schema: Mapping[str, Any], where: str = "schema") -> None:
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
            for name, sub in value.items():
                check_schema(sub, f"{where}.properties.{name}")
        elif key == "items" or (key == "additionalProperties" and isinstance(value, Mapping)):
            check_schema(value, f"{where}.{key}")
        elif key in ("anyOf", "oneOf"):
            for i, sub in enumerate(value):
                check_schema(sub, f"{where}.{key}[{i}]")
        elif key == "pattern":
            try:
                re.compile(value)
            except re.error as e:
                raise SchemaError(f"{where}: pattern {value!r} does not compile: {e}") from e
    _check_bounded(schema, where)


def _check_bounded(schema: Mapping[str, Any], where: str) -> None:
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


def _type_matches(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list | tuple)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "null":
        return value is None
    return True


def describe(value: Any) -> str:
    """A short rendering of a value a model sent, with its JSON type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true (a boolean)" if value else "false (a boolean)"
    kind = (
        "a string"
        if isinstance(value, str)
        else "an integer"
        if isinstance(value, int)
        else "a number"
        if isinstance(value, float)
        else "an array"
        if isinstance(value, list | tuple)
        else "an object"
        if isinstance(value, dict)
        else type(value).__name__
    )
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        try:
            text = repr(value)
        except ValueError:  # an int beyond str()'s digit limit, maybe inside a list
            text = _number_text(value) if isinstance(value, int) else f"a {type(value).__name__}"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({kind})"


def _expected(schema: Mapping[str, Any]) -> str:
    t = schema.get("type")
    if isinstance(t, list):
        return " or ".join(_TYPE_NAMES.get(str(x), str(x)) for x in t)
    if isinstance(t, str):
        return _TYPE_NAMES.get(t, t)
    return "a value"


def _join(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _label(path: str) -> str:
    return f"`{path}`" if path else "the arguments"


def validate(schema: Mapping[str, Any], value: Any, path: str = "") -> list[ArgumentError]:
    """Every way `value` breaks `schema` (empty list: valid)."""
    errors: list[ArgumentError] = []
    _validate(schema, value, path, errors)
    return errors


def _validate(schema: Mapping[str, Any], value: Any, path: str, out: list[ArgumentError]) -> None:
    where = _label(path)
    t = schema.get("type")
    if t is not None:
        names = t if isinstance(t, list) else [t]
        if not any(_type_matches(value, n) for n in names):
            out.append(ArgumentError(where, f"expected {_expected(schema)}, got {describe(value)}"))
            return
    if "const" in schema and value != schema["const"]:
        out.append(
            ArgumentError(where, f"must be {json.dumps(schema['const'])}, got {describe(value)}")
        )
        return
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(json.dumps(c) for c in schema["enum"])
        close = (
            difflib.get_close_matches(value, [str(c) for c in schema["enum"]], n=1)
            if isinstance(value, str)
            else []
        )
        hint = f" (did you mean {json.dumps(close[0])}?)" if close else ""
        out.append(ArgumentError(where, f"must be one of {choices}; got {describe(value)}{hint}"))
        return
    if isinstance(value, str):
        _check_string(schema, value, where, out)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(schema, value, where, out)
    elif isinstance(value, list | tuple):
        _check_array(schema, value, path, out)
    elif isinstance(value, dict):
        _check_object(schema, value, path, out)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            _check_alternatives(key, schema[key], value, path, out)


def _check_string(
    schema: Mapping[str, Any], value: str, where: str, out: list[ArgumentError]
) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        need = schema["minLength"]
        what = "must not be empty" if need == 1 else f"must be at least {need} characters long"
        out.append(ArgumentError(where, f"{what}; got {describe(value)}"))
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        out.append(
            ArgumentError(
                where, f"must be at most {schema['maxLength']} characters long; got {len(value)}"
            )
        )
    if "pattern" in schema and not re.search(schema["pattern"], value):
        out.append(
            ArgumentError(
                where, f"must match the pattern {schema['pattern']!r}; got {describe(value)}"
            )
        )


def _number_text(value: float) -> str:
    """A number as the error shows it (a 10**5000 has no str() in Python 3.11)."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    return str(value)


def _check_number(
    schema: Mapping[str, Any], value: float, where: str, out: list[ArgumentError]
) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        out.append(ArgumentError(where, f"must be a finite number; got {value}"))
        return
    got = _number_text(value)
    before = len(out)
    if "minimum" in schema and value < schema["minimum"]:
        out.append(ArgumentError(where, f"must be >= {schema['minimum']}; got {got}"))
    if "maximum" in schema and value > schema["maximum"]:
        out.append(ArgumentError(where, f"must be <= {schema['maximum']}; got {got}"))
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        out.append(ArgumentError(where, f"must be > {schema['exclusiveMinimum']}; got {got}"))
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        out.append(ArgumentError(where, f"must be < {schema['exclusiveMaximum']}; got {got}"))
    if len(out) == before and abs(value) > JSON_SAFE_INTEGER:
        out.append(
            ArgumentError(
                where,
                f"must be between -{JSON_SAFE_INTEGER} and {JSON_SAFE_INTEGER}; got {got}",
            )
        )


def _check_array(
    schema: Mapping[str, Any],
    value: list[JSONValue] | tuple[JSONValue, ...],
    path: str,
    out: list[ArgumentError],
) -> None:
    where = _label(path)
    if "minItems" in schema and len(value) < schema["minItems"]:
        out.append(
            ArgumentError(where, f"needs at least {schema['minItems']} item(s); got {len(value)}")
        )
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        out.append(
            ArgumentError(where, f"takes at most {schema['maxItems']} item(s); got {len(value)}")
        )
    if schema.get("uniqueItems"):
        seen: list[JSONValue] = []
        for item in value:
            if item in seen:
                out.append(ArgumentError(where, f"items must be unique; {describe(item)} repeats"))
                break
            seen.append(item)
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            _validate(items, item, _join(path, i), out)


def _check_object(
    schema: Mapping[str, Any],
    value: Mapping[Hashable, JSONValue],  # a Python caller's keys may be anything
    path: str,
    out: list[ArgumentError],
) -> None:
    where = _label(path)
    props: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            sub = props.get(name, {})
            hint = f" ({sub['description']})" if sub.get("description") else ""
            out.append(
                ArgumentError(
                    _label(_join(path, name)), f"is required{hint}: expected {_expected(sub)}"
                )
            )
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if not isinstance(name, str):
            out.append(ArgumentError(where, f"argument names must be strings; got {name!r}"))
            continue
        if name in props:
            _validate(props[name], item, _join(path, name), out)
        elif extra is False:
            known = ", ".join(f"`{p}`" for p in props) or "none"
            out.append(
                ArgumentError(
                    _label(_join(path, name)), f"is not a known argument (known: {known})"
                )
            )
        elif isinstance(extra, Mapping):
            _validate(extra, item, _join(path, name), out)
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        out.append(ArgumentError(where, f"needs at least {schema['minProperties']} argument(s)"))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        out.append(ArgumentError(where, f"takes at most {schema['maxProperties']} argument(s)"))


def _check_alternatives(
    key: str, alts: list[Mapping[str, Any]], value: Any, path: str, out: list[ArgumentError]
) -> None:
    results = [validate(alt, value, path) for alt in alts]
    passing = sum(1 for r in results if not r)
    if key == "anyOf" and passing >= 1:
        return
    if key == "oneOf" and passing == 1:
        return
    if key == "oneOf" and passing > 1:
        out.append(ArgumentError(_label(path), "matches more than one allowed form; be specific"))
        return
    forms: list[str] = []
    for alt, errs in zip(alts, results, strict=True):
        title = alt.get("title") or alt.get("description") or f"form {len(forms) + 1}"
        forms.append(f"{title} ({'; '.join(str(e) for e in errs[:2])})")
    out.append(
        ArgumentError(_label(path), "matches none of the allowed forms: " + " | ".join(forms))
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


def example(schema: Mapping[str, Any], name: str = "") -> Any:
    """A value that satisfies `schema`: its first `examples` entry, else a synthesized one."""
    if schema.get("examples"):
        return schema["examples"][0]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return example(schema[key][0], name)
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), t[0] if t else None)
    if t == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: example(props.get(k, {}), k) for k in schema.get("required", ())}
    if t == "array":
        items = schema.get("items", {})
        count = max(1, schema.get("minItems", 1))
        return [example(items, name) for _ in range(count)] if items else []
    if t == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None:
            return int(low)
        return 1 if high is None or high >= 1 else int(high)
    if t == "number":
        return schema.get("minimum", 1.0)
    if t == "boolean":
        return False
    if t == "null":
        return None
    text = _PLACEHOLDERS.get(name, name or "text")
    need = schema.get("minLength", 0)
    return text + "x" * max(0, need - len(text))


def _mend(schema: Mapping[str, Any], value: Any, name: str) -> Any:
    """The nearest valid value to a bad one: "5" -> 5, "hovr" -> "hover", else an example."""
    candidates: list[Any] = []
    if isinstance(value, str) and schema.get("enum"):
        close = difflib.get_close_matches(value, [str(e) for e in schema["enum"]], n=1)
        candidates += [e for e in schema["enum"] if close and str(e) == close[0]]
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
        if low is not None and value < low:
            candidates.append(low)
        if high is not None and value > high:
            candidates.append(high)
        with contextlib.suppress(ValueError):  # no str() for a 10**5000
            candidates.append(str(value))
    for candidate in candidates:
        if not validate(schema, candidate):
            return candidate
    return example(schema, name)


def repair(schema: Mapping[str, Any], args: Any) -> Any:
    """The model's own call made valid: good arguments kept, bad ones replaced by an
    example value, missing required ones added, unknown ones dropped. Falls back to
    `example(schema)` when that does not validate (e.g. anyOf constraints)."""
    if not isinstance(args, dict) or "properties" not in schema:
        return example(schema)
    props: Mapping[str, Any] = schema["properties"]
    fixed: dict[str, Any] = {}
    for name, value in args.items():
        if name in props:
            fixed[name] = (
                value if not validate(props[name], value) else _mend(props[name], value, name)
            )
        elif schema.get("additionalProperties", True) is not False:
            fixed[name] = value
    for name in schema.get("required", ()):
        if name not in fixed:
            fixed[name] = example(props.get(name, {}), name)
    return fixed if not validate(schema, fixed) else example(schema)


def format_errors(
    tool: str, schema: Mapping[str, Any], errors: list[ArgumentError], args: Any = None
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
