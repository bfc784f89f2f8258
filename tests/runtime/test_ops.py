"""Typed ops: a call is parsed into its op class or refused with a message that helps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import pytest

from tether.messages.calls import Call, ErrorCode
from tether.messages.ops import OpError, Vocabulary, op_args, op_name

DEMO = Vocabulary("demo")


@DEMO.op
@dataclass(frozen=True)
class Hover:
    path: str
    line: int
    column: int | None = None


@DEMO.op
@dataclass(frozen=True)
class ApplyEdit:
    edits: list[dict[str, Any]] = field(default_factory=list)
    tier: Literal["read", "write"] = "read"
    budget: float = 1.0


def call(op: str, **args: Any) -> Call:
    return Call("c1", "", "demo", "k", op, args)


def test_an_op_round_trips_through_a_call() -> None:
    op = ApplyEdit([{"a": 1}], "write", 2)
    assert op_name(op) == "apply_edit"
    assert DEMO.parse(call(op_name(op), **op_args(op))) == op
    assert DEMO.parse(call("hover", path="a.py", line=3)) == Hover("a.py", 3)


@pytest.mark.parametrize(
    ("op", "args", "says"),
    [
        ("hovr", {"path": "a"}, "demo has no op 'hovr'; its ops: apply_edit, hover"),
        ("hover", {"path": "a"}, "demo.hover needs 'line'; its arguments: path: str, line: int"),
        ("hover", {"path": "a", "line": 1, "col": 2}, "takes no argument 'col'"),
        ("hover", {"path": "a", "line": "3"}, "line must be int, got str '3'"),
        ("hover", {"path": "a", "line": True}, "line must be int, got bool"),
        ("hover", {"path": "a", "line": 1, "column": 1.5}, "column must be int | None"),
        ("apply_edit", {"tier": "admin"}, "tier must be Literal['read', 'write']"),
        ("apply_edit", {"edits": {"a": 1}}, "edits must be list"),
    ],
)
def test_a_call_that_does_not_fit_is_refused_with_what_fits(op, args, says) -> None:
    with pytest.raises(OpError) as err:
        DEMO.parse(call(op, **args))
    assert err.value.code == ErrorCode.BAD_REQUEST
    assert says in err.value.message, err.value.message


def test_a_float_argument_takes_an_int_and_an_optional_takes_none() -> None:
    assert DEMO.parse(call("apply_edit", budget=3)).budget == 3
    assert DEMO.parse(call("hover", path="a", line=1, column=None)).column is None


def test_only_frozen_dataclasses_with_new_names_are_ops() -> None:
    with pytest.raises(TypeError, match="frozen dataclass"):

        @DEMO.op
        @dataclass
        class Loose:
            x: int

    with pytest.raises(TypeError, match="already has an op named 'hover'"):

        @DEMO.op
        @dataclass(frozen=True)
        class Hover:  # noqa: F811
            path: str


def test_an_op_with_a_rest_field_takes_any_arguments_and_sends_them_flat() -> None:
    from tether.messages.echo_ops import ECHO, Echo, Sleep

    assert ECHO.parse(Call("c", "", "echo", "k", "echo", {"n": 1, "data": 2})) == Echo(
        {"n": 1, "data": 2}
    )
    assert op_args(Echo({"n": 1})) == {"n": 1}
    assert op_args(Sleep(0.5)) == {"seconds": 0.5}
    with pytest.raises(TypeError, match="rest_field names no field"):

        @DEMO.op
        @dataclass(frozen=True)
        class Loose:
            rest_field: ClassVar[str] = "rest"
            x: int


def test_the_engine_sends_an_op_instance_as_its_name_and_fields(runtime) -> None:
    @dataclass(frozen=True)
    class Echo:
        x: int

    assert runtime.call("r", "echo", "k", Echo(7), timeout=5)["echo"] == {"x": 7}
