"""One msgpack codec for every message: hypothesis round trips, and clear errors."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.messages import calls, control
from tether.messages.codec import _CLASSES, CodecError, decode, encode

json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)

FIELD_STRATEGIES = {
    str: st.text(),
    "str": st.text(),
    "int": st.integers(-(2**31), 2**31),
    "float": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "bytes": st.binary(),
    "dict[str, Any]": st.dictionaries(st.text(), json_like, max_size=4),
    "Mapping[str, Any]": st.dictionaries(st.text(), json_like, max_size=4),  # (HealthReport.node)
    "list[int]": st.lists(st.integers(0, 2**31), max_size=4),
    "list[dict[str, Any]]": st.lists(st.dictionaries(st.text(), json_like, max_size=3), max_size=3),
}


def strategy_for(cls: type) -> st.SearchStrategy:
    kwargs = {f.name: FIELD_STRATEGIES[f.type] for f in dataclasses.fields(cls)}
    return st.builds(cls, **kwargs)


MESSAGE_CLASSES = sorted(_CLASSES.values(), key=lambda c: c.__name__)


def test_every_message_class_is_registered() -> None:
    names = {c.__name__ for c in MESSAGE_CLASSES}
    assert {"Call", "Reply", "Start", "Started", "Route", "HealthQuery", "Inject"} <= names


@pytest.mark.parametrize("cls", MESSAGE_CLASSES, ids=lambda c: c.__name__)
def test_round_trip(cls: type) -> None:
    @settings(max_examples=60, deadline=None)
    @given(strategy_for(cls))
    def check(msg: object) -> None:
        assert decode(encode(msg)) == msg

    check()


def test_call_keeps_its_deadline_and_hint() -> None:
    call = calls.Call("c1", "r", "echo", "k", "echo", {"a": [1, 2]}, 12.5, True)
    assert decode(encode(call)) == call


def test_encode_unregistered_names_the_class() -> None:
    with pytest.raises(CodecError, match="cannot encode dict: not a registered message class"):
        encode({"a": 1})


def test_encode_unpackable_field_says_what_is_allowed() -> None:
    with pytest.raises(CodecError, match="fields must be msgpack-able"):
        encode(calls.Call("c", "r", "k", "k", "op", {"x": object()}))


def test_decode_garbage_says_so() -> None:
    with pytest.raises(CodecError, match="cannot decode a message of 3 bytes"):
        decode(b"\x93\x01\x02")


def test_control_messages_are_frozen() -> None:
    msg = control.HealthQuery("q", 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.query_id = "other"  # type: ignore[misc]
