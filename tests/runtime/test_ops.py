"""Typed ops: a call is parsed into its op class or refused with a message that helps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import pytest

from tether.messages.calls import Call, ErrorCode
from tether.messages.ops import OpError, Vocabulary, op_args, op_name

DEMO = Vocabulary("demo", idempotent=False)


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


# --- which calls are idempotent: declared by each kind's vocabulary --------------------------

# today's behaviour, op by op: the ops whose calls are sent idempotent (retried once on a new
# actor when theirs dies, waiting out a restart); every other op of the kind is not
IDEMPOTENT = {
    "language_server": {"navigate", "hierarchy", "document_symbols", "workspace_symbols"}
    | {"diagnostics"},  # queries; sync, rename, status and reload are not
    "debug_session": {  # every op (tether.tools.debug_tool.actions says why)
        *("status", "breakpoints", "function_breakpoints", "exception_breakpoints"),
        *("launch", "attach", "continue", "pause"),
        *("step_over", "step_in", "step_out", "threads", "stack", "scopes", "variables"),
        *("evaluate", "output", "terminate"),
    },
    "parser": {"search", "edit"},  # structural search and its edit proposals fan out so
    "kernel": set(),
    "kernel_pool": set(),
    "vibe_worker": set(),
    "git": set(),
    "checker": set(),
    # the runtime tests' kinds: their ops take it per call (a field), the others are not
    "echo": set(),
    "echo_process": set(),
    "slow": set(),
    "probe": set(),
    "stubborn": set(),
}
PER_CALL = {
    "echo": {"echo", "pid"},
    "echo_process": {"echo", "pid"},
    "slow": {"pid", "hang", "hang_once"},
    "probe": {"pid"},
}


def _vocabularies() -> dict[str, Vocabulary]:
    """Every kind's vocabulary in tether.messages (a Records of replies is none)."""
    import importlib
    import pkgutil

    import tether.messages

    found: dict[str, Vocabulary] = {}
    for info in pkgutil.iter_modules(tether.messages.__path__):
        module = importlib.import_module(f"tether.messages.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Vocabulary):
                found[value.kind] = value
    return found


def test_every_op_of_every_vocabulary_declares_its_idempotency_as_today() -> None:
    vocabularies = _vocabularies()
    assert set(vocabularies) == set(IDEMPOTENT)
    for kind, vocabulary in vocabularies.items():
        assert set(vocabulary.idempotency) == set(vocabulary.ops), kind  # (each op: declared)
        said = vocabulary.idempotency
        assert {op for op, idem in said.items() if idem} == IDEMPOTENT[kind], kind
        assert {op for op, idem in said.items() if idem is None} == PER_CALL.get(kind, set())


def test_a_call_is_idempotent_as_its_op_says_and_never_by_its_bare_name() -> None:
    from tether.host.engine import CallEngine
    from tether.kinds import KindSpec
    from tether.messages.debug_ops import Launch, Status
    from tether.messages.echo_ops import ECHO, Echo, HangOnce
    from tether.messages.language_server_ops import Navigate, Sync
    from tether.messages.ops import is_idempotent
    from tether.messages.parser_ops import Search, Stats

    assert is_idempotent(Navigate("hover", "/a.py", 0, 0))
    assert not is_idempotent(Sync(["/a.py"]))
    assert is_idempotent(Status()) and is_idempotent(Launch("debugpy", "/a.py", "/"))
    assert is_idempotent(Search(root="/", lang="python", pattern="f()"))
    assert not is_idempotent(Stats())
    assert is_idempotent(HangOnce("/m", idempotent=True))
    assert not is_idempotent(HangOnce("/m"))
    assert not is_idempotent(Hover("/a.py", 1))  # (DEMO's: not idempotent)
    assert not is_idempotent("navigate")  # a bare name is never retried

    # the engine sets the call's `idempotent` from the op as it builds the call
    echo = KindSpec("echo", "tether.actors.echo:EchoActor")
    ids = iter(range(10))
    engine = CallEngine(None, {"echo": echo}, lambda: str(next(ids)), lambda: False, lambda _: None)
    for op, args, expected in [
        (Echo({"n": 1}, idempotent=True), None, True),
        (Echo({"n": 1}), None, False),
        ("echo", {"n": 1}, False),
    ]:
        call, _ = engine.make_call("r", "echo", "k", op, args, 5.0)
        assert call.idempotent is expected and call.op == "echo"
        assert call.args == {"n": 1}  # (a per-call field crosses as the call's idempotent)
        assert ECHO.parse(call) == Echo({"n": 1}, idempotent=expected)  # (and is put back)
