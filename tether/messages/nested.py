"""Records inside a typed reply: how they cross the wire and how they are read back.

A reply (`tether.messages.*_ops`) is a frozen dataclass whose fields cross flat as the
`Reply` payload; a field may hold records of its own (a parser's proposed files, a
worker's prompts), themselves frozen dataclasses registered in their kind's record
vocabulary. On the wire such a record is a plain map of its fields (`plain`: msgpack
carries no class); the host's reader builds each back with `Records.build`, so every
record field is checked as the reply's own fields are (`records`, `record_or_none`,
`record_lists`), and a missing or mistyped one is an OpError naming where it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar, cast

from tether.json_types import JSONObject, JSONValue
from tether.messages.ops import OpError, Records

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")


def plain(reply: DataclassInstance) -> JSONObject:
    """A reply as the `Reply` payload: its fields flat, the records inside as maps. Lists
    and maps that hold no record go as they are (not copied: a reply is frozen, built to
    be sent), so a large search's payload costs one map per match record."""
    return {name: _plain(getattr(reply, name)) for name in _names(type(reply))}


_NAMES: dict[type, tuple[str, ...]] = {}


def _names(cls: type[DataclassInstance]) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})


def _holds_records(value: object) -> bool:
    """Whether `value` is a record, or a list or map whose first item holds records (the
    items of one field are alike)."""
    kind = type(value)
    if kind in _SCALARS:
        return False
    if isinstance(value, list):
        return bool(value) and _holds_records(value[0])
    if isinstance(value, dict):
        return bool(value) and _holds_records(next(iter(value.values())))
    return kind in _NAMES or hasattr(kind, "__dataclass_fields__")


def _plain(value: object) -> JSONValue:
    if not _holds_records(value):
        # (a field's value as its reply declares it: msgpack-able, no record inside)
        return cast("JSONValue", value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    assert dataclasses.is_dataclass(value) and not isinstance(value, type)
    return plain(value)


def _one(vocabulary: Records, cls: type[T], value: object, where: str) -> T:
    if not isinstance(value, Mapping):
        raise OpError(f"{where} must be a map of {cls.__name__}, got {type(value).__name__}")
    record: T = vocabulary.build(cls, value)
    return record


def records(vocabulary: Records, cls: type[T], value: object, where: str) -> list[T]:
    """A list of records (`where`: the field, for the error)."""
    if not isinstance(value, list | tuple):
        raise OpError(f"{where} must be a list, got {type(value).__name__}")
    return [_one(vocabulary, cls, item, where) for item in value]


def record_or_none(vocabulary: Records, cls: type[T], value: object, where: str) -> T | None:
    return None if value is None else _one(vocabulary, cls, value, where)


def record_lists(
    vocabulary: Records, cls: type[T], value: object, where: str
) -> dict[str, list[T]]:
    """A map of name -> list of records."""
    if not isinstance(value, Mapping):
        raise OpError(f"{where} must be a map, got {type(value).__name__}")
    return {str(k): records(vocabulary, cls, v, f"{where}[{k!r}]") for k, v in value.items()}
