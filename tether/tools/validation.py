"""Does a value satisfy a tool's JSON Schema: every way it does not, in a model's terms.

`validate(schema, args)` returns a list of `ArgumentError`s, each naming the argument by
its path (`options[2].label`), what was expected and what came instead (`describe`), with
the nearest valid choice where there is one. `tether.tools.schema` checks the schemas
themselves and builds the correct call shown with the errors; it re-exports these names.

Numbers are bounded whatever the schema says: the validator refuses NaN, infinities and
integers beyond what a JSON number holds exactly.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from tether.json_types import JSONValue

# A JSON Schema as the tool families write it (Python literals; a MappingProxy or tuples
# are fine): check_schema checks its keywords, these helpers the types of their values
Schema = Mapping[str, JSONValue]

# |integer| above this is not exact in a JSON number (an IEEE double), whatever the schema
JSON_SAFE_INTEGER = 2**53 - 1

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


def _type_matches(value: object, name: str) -> bool:  # (anything a caller passes)
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


def describe(value: object) -> str:
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


def _expected(schema: Schema) -> str:
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


def validate(schema: Schema, value: object, path: str = "") -> list[ArgumentError]:
    """Every way `value` breaks `schema` (empty list: valid). `value`: whatever the model or
    a Python caller sent (a tuple, a key that is no string: each is refused, saying so)."""
    errors: list[ArgumentError] = []
    _validate(schema, value, path, errors)
    return errors


def _validate(schema: Schema, value: object, path: str, out: list[ArgumentError]) -> None:
    where = _label(path)
    t = schema.get("type")
    if t is not None:
        names = t if isinstance(t, list) else [t]
        if not any(_type_matches(value, str(n)) for n in names):
            out.append(ArgumentError(where, f"expected {_expected(schema)}, got {describe(value)}"))
            return
    if "const" in schema and value != schema["const"]:
        out.append(
            ArgumentError(where, f"must be {json.dumps(schema['const'])}, got {describe(value)}")
        )
        return
    if "enum" in schema and value not in (enum := _list(schema, "enum")):
        choices = ", ".join(json.dumps(c) for c in enum)
        close = (
            difflib.get_close_matches(value, [str(c) for c in enum], n=1)
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
            _check_alternatives(key, _schemas(schema, key), value, path, out)


def _check_string(schema: Schema, value: str, where: str, out: list[ArgumentError]) -> None:
    if "minLength" in schema and len(value) < (need := _number(schema, "minLength")):
        what = "must not be empty" if need == 1 else f"must be at least {need} characters long"
        out.append(ArgumentError(where, f"{what}; got {describe(value)}"))
    if "maxLength" in schema and len(value) > _number(schema, "maxLength"):
        out.append(
            ArgumentError(
                where, f"must be at most {schema['maxLength']} characters long; got {len(value)}"
            )
        )
    if "pattern" in schema and not re.search(_text(schema, "pattern"), value):
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


def _check_number(schema: Schema, value: float, where: str, out: list[ArgumentError]) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        out.append(ArgumentError(where, f"must be a finite number; got {value}"))
        return
    got = _number_text(value)
    before = len(out)
    if "minimum" in schema and value < _number(schema, "minimum"):
        out.append(ArgumentError(where, f"must be >= {schema['minimum']}; got {got}"))
    if "maximum" in schema and value > _number(schema, "maximum"):
        out.append(ArgumentError(where, f"must be <= {schema['maximum']}; got {got}"))
    if "exclusiveMinimum" in schema and value <= _number(schema, "exclusiveMinimum"):
        out.append(ArgumentError(where, f"must be > {schema['exclusiveMinimum']}; got {got}"))
    if "exclusiveMaximum" in schema and value >= _number(schema, "exclusiveMaximum"):
        out.append(ArgumentError(where, f"must be < {schema['exclusiveMaximum']}; got {got}"))
    if len(out) == before and abs(value) > JSON_SAFE_INTEGER:
        out.append(
            ArgumentError(
                where,
                f"must be between -{JSON_SAFE_INTEGER} and {JSON_SAFE_INTEGER}; got {got}",
            )
        )


def _check_array(
    schema: Schema,
    value: list[JSONValue] | tuple[JSONValue, ...],
    path: str,
    out: list[ArgumentError],
) -> None:
    where = _label(path)
    if "minItems" in schema and len(value) < _number(schema, "minItems"):
        out.append(
            ArgumentError(where, f"needs at least {schema['minItems']} item(s); got {len(value)}")
        )
    if "maxItems" in schema and len(value) > _number(schema, "maxItems"):
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
    schema: Schema,
    value: Mapping[Hashable, JSONValue],  # a Python caller's keys may be anything
    path: str,
    out: list[ArgumentError],
) -> None:
    where = _label(path)
    props = _properties(schema)
    required = _list(schema, "required") if "required" in schema else []
    for needed in map(str, required):  # (names: strings already)
        if needed not in value:
            sub = props.get(needed, {})
            hint = f" ({sub['description']})" if sub.get("description") else ""
            out.append(
                ArgumentError(
                    _label(_join(path, needed)), f"is required{hint}: expected {_expected(sub)}"
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
    if "minProperties" in schema and len(value) < _number(schema, "minProperties"):
        out.append(ArgumentError(where, f"needs at least {schema['minProperties']} argument(s)"))
    if "maxProperties" in schema and len(value) > _number(schema, "maxProperties"):
        out.append(ArgumentError(where, f"takes at most {schema['maxProperties']} argument(s)"))


def _check_alternatives(
    key: str, alts: list[Schema], value: object, path: str, out: list[ArgumentError]
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


# ---- a schema's values, by their types (a value of another type is a bug in the family's
# schema: TypeError, as comparing or iterating it raised before) -------------------------


def _number(schema: Schema, key: str) -> float:
    value = schema[key]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise TypeError(f"schema keyword {key!r} needs a number, got {value!r}")


def _text(schema: Schema, key: str) -> str:
    value = schema[key]
    if isinstance(value, str):
        return value
    raise TypeError(f"schema keyword {key!r} needs a string, got {value!r}")


def _list(schema: Schema, key: str) -> list[JSONValue]:
    value = schema[key]
    if isinstance(value, list | tuple):
        return list(value)
    raise TypeError(f"schema keyword {key!r} needs a list, got {value!r}")


def _schemas(schema: Schema, key: str) -> list[Schema]:
    """anyOf / oneOf: a list of schemas."""
    alts: list[Schema] = [alt for alt in _list(schema, key) if isinstance(alt, Mapping)]
    if len(alts) != len(_list(schema, key)):
        raise TypeError(f"schema keyword {key!r} needs a list of schemas")
    return alts


def _properties(schema: Schema) -> Mapping[str, Schema]:
    props = schema.get("properties", {})
    if not isinstance(props, Mapping) or not all(isinstance(p, Mapping) for p in props.values()):
        raise TypeError(f"schema keyword 'properties' needs an object of schemas, got {props!r}")
    return {name: sub for name, sub in props.items() if isinstance(sub, Mapping)}
