"""Typed ops: what a tool may ask of a resource kind, as frozen dataclasses.

Each resource kind has a `Vocabulary`: its op classes, registered by name. On the wire a
`Call` stays flat (`op` names the class, `args` holds its fields, msgpack-able), so the
codec needs nothing new and a peer never decodes a class it was not told about. The host
builds a call from an op (`op_name(op)`, `op_args(op)`; `CallEngine.call` takes an op
instance in place of a name); the actor turns the call back into its op with
`vocabulary.parse(call)` and dispatches with one `match`:

    LSP = Vocabulary("language_server", idempotent=False)

    @LSP.op
    @dataclass(frozen=True)
    class Hover:
        path: str
        line: int

    def on_call(self, call):
        match LSP.parse(call):
            case Hover(path=path, line=line): ...

`parse` refuses an op the kind does not have, a missing or unexpected argument and an
argument of the wrong type with `OpError`, whose message says what was expected (the actor
answers it as BAD_REQUEST), so no handler sees a malformed call. An op that takes any
arguments (an echo) names a dict field as its `rest_field`: arguments that are no other
field land there, and go back onto the wire flat.

A vocabulary also knows which of its ops are idempotent (safe to run twice: the runtime
retries such a call once on the next incarnation when its actor dies or restarts under it,
and lets it wait out a restart). `Vocabulary(kind, idempotent=...)` says it for all its
ops; an op class says otherwise with `idempotent: ClassVar[bool]`, and the test kinds'
ops with a field `idempotent: bool` the caller sets per call. The host derives the call's
`idempotent` from the op as it builds the call (`is_idempotent`): no caller passes it.

`Records` checks what comes back the other way, a reply and the records inside one, with
the same `build`; they are no calls, so they say nothing of idempotency.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from tether.messages.calls import Call, ErrorCode, ResourceError, Wire

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")


class OpError(ResourceError):
    """A call whose op or arguments do not fit the kind's vocabulary (BAD_REQUEST)."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.BAD_REQUEST, message)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def op_name(op: object) -> str:  # (an op instance or class: its class is read)
    """The wire name of an op instance or class: `op_name` if it sets one, else its class
    name in snake case (`Hover` -> "hover", `ApplyEdit` -> "apply_edit")."""
    cls = op if isinstance(op, type) else type(op)
    return str(getattr(cls, "op_name", "") or _snake(cls.__name__))


def op_args(op: DataclassInstance) -> Wire:
    """An op instance's fields, as the call's args (shallow: values must be msgpack-able);
    its `rest_field`, if it has one, spread flat. A per-call `idempotent` field is no
    argument: it crosses as the call's own `idempotent` (and `parse` puts it back)."""
    rest = _rest_field(type(op))
    skip = {rest, "idempotent"} if _IDEMPOTENT.get(type(op), False) is None else {rest}
    args = {f.name: getattr(op, f.name) for f in dataclasses.fields(op) if f.name not in skip}
    if rest:
        args.update(getattr(op, rest))
    return args


def _rest_field(cls: type) -> str:
    return str(getattr(cls, "rest_field", "") or "")


def is_op(value: object) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


class _Field(NamedTuple):
    type: object  # the field's annotation (get_type_hints: a class, a union, a Literal, ...)
    required: bool
    fits: Callable[[object], bool]  # does a value (as msgpack gives it back) fit the type?


class Records:
    """Frozen dataclasses checked field by field as they come off the wire (`build`): a
    kind's replies, the records inside them, and (a Vocabulary) its ops."""

    def __init__(self, kind: str):
        self.kind = kind
        self.ops: dict[str, type] = {}
        self._fields: dict[type, dict[str, _Field]] = {}

    def op(self, cls: type) -> type:
        """Class decorator: register a frozen dataclass (by its op name)."""
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(f"{cls.__name__} must be a frozen dataclass to be an op")
        name = op_name(cls)
        rest = _rest_field(cls)
        if rest and rest not in {f.name for f in dataclasses.fields(cls)}:
            raise TypeError(f"{cls.__name__}.rest_field names no field: {rest!r}")
        if name in self.ops:
            raise TypeError(f"{self.kind} already has an op named {name!r}")
        hints = typing.get_type_hints(cls)
        self._fields[cls] = {
            f.name: _Field(
                hints[f.name],
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                _checker(hints[f.name]),
            )
            for f in dataclasses.fields(cls)
        }
        self.ops[name] = cls
        return cls

    def build(self, cls: type[T], args: Mapping[str, object]) -> T:
        fields = self._fields[cls]
        rest = _rest_field(cls)
        if rest:  # the arguments that are no other field are the rest
            named = {n: v for n, v in args.items() if n in fields and n != rest}
            args = {**named, rest: {n: v for n, v in args.items() if n not in named}}
        unexpected = sorted(n for n in args if n not in fields)
        if unexpected:
            raise OpError(
                f"{self.kind}.{op_name(cls)} takes no argument {', '.join(map(repr, unexpected))}"
                f"; its arguments: {_signature(fields)}"
            )
        missing = [n for n, f in fields.items() if f.required and n not in args]
        if missing:
            raise OpError(
                f"{self.kind}.{op_name(cls)} needs {', '.join(map(repr, missing))}; "
                f"its arguments: {_signature(fields)}"
            )
        for name, value in args.items():
            if not fields[name].fits(value):
                raise OpError(
                    f"{self.kind}.{op_name(cls)}: {name} must be {_type_name(fields[name].type)}, "
                    f"got {type(value).__name__} {value!r:.80}"
                )
        return cls(**args)


class Vocabulary(Records):
    """The ops of one resource kind (or of several kinds served by one actor class), and
    which of them are idempotent: `idempotent` says it for every op that does not say it
    itself (`idempotent: ClassVar[bool]` on its class; a field `idempotent`: per call)."""

    def __init__(self, kind: str, *, idempotent: bool):
        super().__init__(kind)
        self.idempotent = idempotent

    def op(self, cls: type) -> type:
        """Class decorator: register a frozen dataclass as an op of this kind."""
        super().op(cls)
        declared = _declared_idempotency(cls, self.idempotent)
        known = _IDEMPOTENT.setdefault(cls, declared)
        if known != declared:  # (an op class several kinds serve: the same everywhere)
            raise TypeError(
                f"{cls.__name__} is idempotent={known} elsewhere but {declared} in {self.kind}: "
                "say which on the class"
            )
        return cls

    @property
    def idempotency(self) -> dict[str, bool | None]:
        """Op name -> whether its calls are idempotent (None: each call says, in its field)."""
        return {name: _IDEMPOTENT[cls] for name, cls in self.ops.items()}

    # (an op of whichever class call.op names; each actor matches it on the class)
    def parse(self, call: Call) -> DataclassInstance:
        """The op `call` asks for, checked against its class; OpError if it does not fit."""
        cls = self.ops.get(call.op)
        if cls is None:
            raise OpError(
                f"{self.kind} has no op {call.op!r}; its ops: {', '.join(sorted(self.ops))}"
            )
        if _IDEMPOTENT[cls] is None:  # (per call: the call's own, see op_args)
            return self.build(cls, {**call.args, "idempotent": call.idempotent})
        return self.build(cls, call.args)


# every registered op class -> its calls' idempotency (None: a field of each call says)
_IDEMPOTENT: dict[type, bool | None] = {}


def _declared_idempotency(cls: type, default: bool) -> bool | None:
    if any(f.name == "idempotent" for f in dataclasses.fields(cls)):
        return None  # (a test kind's op: the caller sets it per call)
    own = getattr(cls, "idempotent", None)
    return own if isinstance(own, bool) else default


def is_idempotent(op: object) -> bool:
    """Whether a call of `op` is idempotent, as its vocabulary declared it: an op instance
    of a registered class (its own field for the test kinds' ops). A bare op name (sent
    with its args) and an unregistered class are not: send the op instance to be retried."""
    if isinstance(op, str) or not is_op(op):
        return False
    declared = _IDEMPOTENT.get(type(op), False)
    return bool(getattr(op, "idempotent", False)) if declared is None else declared


def _signature(fields: Mapping[str, _Field]) -> str:
    return ", ".join(
        f"{n}: {_type_name(f.type)}{'' if f.required else ' (optional)'}" for n, f in fields.items()
    )


def _type_name(tp: object) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _checker(tp: object) -> Callable[[object], bool]:
    """Whether a value (as msgpack gives it back) fits the annotation `tp`, as a function
    made once per field. Checks the outer type only (a list is a list; its items are the
    handler's business)."""
    if tp is Any:
        return lambda value: True
    if typing.is_typeddict(tp):  # a JSON record: a dict on the wire (its keys: the handler's)
        return lambda value: isinstance(value, dict)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [_checker(arg) for arg in typing.get_args(tp)]
        return lambda value: any(fits(value) for fits in options)
    if tp is type(None):
        return lambda value: value is None
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        return lambda value: value in allowed
    outer = origin or tp
    if outer in (list, tuple):  # msgpack gives lists back for tuples
        return lambda value: isinstance(value, list | tuple)
    if outer is float:
        return lambda value: isinstance(value, int | float) and not isinstance(value, bool)
    if outer is int:
        return lambda value: isinstance(value, int) and not isinstance(value, bool)
    if isinstance(outer, type):
        return lambda value: isinstance(value, outer)
    return lambda value: True
