"""Argument validation: errors name the argument, what was expected, and a correct call."""

from __future__ import annotations

from typing import Any

import pytest

from tether.tools.registry import Registry
from tether.tools.schema import SchemaError, check_schema, example, format_errors, validate

S: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "line": {"type": "integer", "minimum": 1, "maximum": 100},
        "action": {"type": "string", "enum": ["hover", "definition"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "opts": {
            "type": "object",
            "properties": {"deep": {"type": "boolean"}},
            "additionalProperties": False,
        },
        "ratio": {"type": "number"},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def _errs(value: Any, schema: dict = S) -> list[str]:
    return [str(e) for e in validate(schema, value)]


@pytest.mark.parametrize(
    "args,expected",
    [
        ({"path": "a"}, []),
        ({}, ["`path`: is required: expected a string"]),
        ({"path": ""}, ['`path`: must not be empty; got "" (a string)']),
        ({"path": 3}, ["`path`: expected a string, got 3 (an integer)"]),
        ({"path": "a", "line": 0}, ["`line`: must be >= 1; got 0"]),
        ({"path": "a", "line": 101}, ["`line`: must be <= 100; got 101"]),
        ({"path": "a", "line": "3"}, ['`line`: expected an integer, got "3" (a string)']),
        ({"path": "a", "line": True}, ["`line`: expected an integer, got true (a boolean)"]),
        ({"path": "a", "line": 2.0}, []),
        ({"path": "a", "line": 2.5}, ["`line`: expected an integer, got 2.5 (a number)"]),
        ({"path": "a", "ratio": 1}, []),
        (
            {"path": "a", "action": "hovr"},
            [
                '`action`: must be one of "hover", "definition"; got "hovr" (a string) '
                '(did you mean "hover"?)'
            ],
        ),
        ({"path": "a", "tags": ["x", 1]}, ["`tags[1]`: expected a string, got 1 (an integer)"]),
        ({"path": "a", "tags": ["x", "y", "z"]}, ["`tags`: takes at most 2 item(s); got 3"]),
        (
            {"path": "a", "opts": {"deep": 1}},
            ["`opts.deep`: expected a boolean (true or false), got 1 (an integer)"],
        ),
        (
            {"path": "a", "opts": {"wide": True}},
            ["`opts.wide`: is not a known argument (known: `deep`)"],
        ),
        (
            {"path": "a", "colum": 3},
            [
                "`colum`: is not a known argument (known: `path`, `line`, `action`, `tags`, "
                "`opts`, `ratio`)"
            ],
        ),
        ([], ["the arguments: expected an object, got [] (an array)"]),
    ],
)
def test_validate(args: Any, expected: list[str]) -> None:
    assert _errs(args) == expected


def test_required_mentions_description() -> None:
    schema = {
        "type": "object",
        "properties": {"symbol": {"type": "string", "description": "a substring of the line"}},
        "required": ["symbol"],
    }
    assert _errs({}, schema) == [
        "`symbol`: is required (a substring of the line): expected a string"
    ]


def test_any_of() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["*"]}]}},
    }
    assert _errs({"x": 3}, schema) == [] and _errs({"x": "*"}, schema) == []
    assert "matches none of the allowed forms" in _errs({"x": "y"}, schema)[0]


def test_one_of_ambiguous() -> None:
    schema = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert _errs(3, schema) == ["the arguments: matches more than one allowed form; be specific"]


def test_pattern_and_lengths() -> None:
    schema = {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}
    assert _errs("abcd", schema) == ["the arguments: must be at most 3 characters long; got 4"]
    assert _errs("A", schema) == [
        "the arguments: must match the pattern '^[a-z]+$'; got \"A\" (a string)"
    ]


def test_format_errors_has_example() -> None:
    text = format_errors("lsp", S, validate(S, {"line": "x"}))
    assert text.splitlines() == [
        "invalid arguments for lsp:",
        "- `path`: is required: expected a string",
        '- `line`: expected an integer, got "x" (a string)',
        'A correct call looks like: lsp {"path": "src/app.py"}',
    ]


def test_format_errors_caps_the_list() -> None:
    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    errors = validate(schema, {f"k{i}": i for i in range(12)})
    assert "- ... and 4 more" in format_errors("t", schema, errors)


def test_example_uses_examples_first() -> None:
    assert example({"type": "string", "examples": ["hi"]}) == "hi"


@pytest.mark.parametrize("spec", Registry.default().specs(), ids=lambda s: s.name)
def test_every_real_schema_is_supported_and_its_example_validates(spec: Any) -> None:
    check_schema(spec.schema, spec.name)
    assert validate(spec.schema, example(spec.schema)) == []


def test_check_schema_rejects_unsupported() -> None:
    with pytest.raises(SchemaError, match=r"schema.properties.x: keyword '\$ref' is not supported"):
        check_schema({"type": "object", "properties": {"x": {"$ref": "#/defs/x"}}})


@pytest.mark.parametrize(
    "args,repaired",
    [
        ({"line": "7"}, {"line": 7, "path": "src/app.py"}),
        ({"path": "a.py", "action": "hovr"}, {"path": "a.py", "action": "hover"}),
        ({"path": "a.py", "line": 0, "colum": 3}, {"path": "a.py", "line": 1}),
        ({"path": "a.py", "line": 500}, {"path": "a.py", "line": 100}),
        ({"path": "a.py", "opts": {"deep": "true"}}, {"path": "a.py", "opts": {"path": ""}}),
    ],
)
def test_repair_keeps_the_models_call(args: dict, repaired: dict) -> None:
    from tether.tools.schema import repair

    fixed = repair(S, args)
    assert validate(S, fixed) == []
    if "opts" not in args:
        assert fixed == repaired


def test_error_shows_the_repaired_call() -> None:
    text = format_errors(
        "lsp", S, validate(S, {"path": "a.py", "line": "3"}), {"path": "a.py", "line": "3"}
    )
    assert text.endswith('A correct call looks like: lsp {"path": "a.py", "line": 3}')


# ---- numbers are bounded ------------------------------------------------------------------


def test_check_schema_wants_bounds_on_every_number() -> None:
    for prop in ({"type": "integer", "minimum": 1}, {"type": "number", "maximum": 2}):
        with pytest.raises(SchemaError, match=r"schema.properties.n: a numeric argument needs"):
            check_schema({"type": "object", "properties": {"n": prop}})
    check_schema(
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}}
    )


@pytest.mark.parametrize(
    "value,problem",
    [
        (float("nan"), "must be a finite number; got nan"),
        (float("inf"), "must be a finite number; got inf"),
        (2**63, "must be between -9007199254740991 and 9007199254740991; got 9223372036854775808"),
        (-(10**400), "9007199254740991; got an integer of 1329 bits"),
        (10**5000, "9007199254740991; got an integer of 16610 bits"),
        (1e300, "must be between -9007199254740991 and 9007199254740991"),
    ],
    ids=["nan", "inf", "2**63", "-10**400", "10**5000", "1e300"],
)
def test_numbers_beyond_json_are_refused_whatever_the_schema(value: Any, problem: str) -> None:
    errors = validate(S, {"path": "a.py", "ratio": value})
    assert [e.where for e in errors] == ["`ratio`"] and problem in errors[0].problem, errors


@pytest.mark.parametrize(
    "tool,args,where",
    [
        ("lsp", {"action": "hover", "file": "src/app.py", "line": 2**63, "symbol": "x"}, "line"),
        (
            "lsp_rename",
            {"file": "src/app.py", "line": 2**64, "symbol": "x", "new_name": "y"},
            "line",
        ),
        ("read", {"path": "src/app.py", "start_line": 2**63}, "start_line"),
        ("read", {"path": "src/app.py", "end_line": 10**30}, "end_line"),
        ("ast_grep", {"pattern": "x", "language": "python", "max_results": 2**63}, "max_results"),
    ],
)
def test_huge_integers_are_a_validation_error(
    tmp_path: Any, tool: str, args: dict, where: str
) -> None:
    from tether.run import Run

    from .conftest import KindsRuntime

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x = 1\n")
    with Run(runtime=KindsRuntime({"language_server", "parser"}), workdir=tmp_path) as run:
        res = run.call(tool, args)
    assert res.is_error and res.data == {"refused": "arguments"}, res.text
    assert f"`{where}`: must be <=" in res.text, res.text
    assert "bug in the tool" not in res.text, res.text
