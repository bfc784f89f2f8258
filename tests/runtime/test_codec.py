"""One msgpack codec for every message: hypothesis round trips, and clear errors."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.messages import calls, control
from tether.messages.codec import _CLASSES, CodecError, decode, encode
from tether.messages.kernel_ops import KERNEL, Execute, Layer, Spare
from tether.messages.ops import op_args, op_name

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
    "HealthNode": st.dictionaries(st.text(), json_like, max_size=4),  # (HealthReport.node)
    "list[int]": st.lists(st.integers(0, 2**31), max_size=4),
    "list[dict[str, Any]]": st.lists(st.dictionaries(st.text(), json_like, max_size=3), max_size=3),
    "JSONObject": st.dictionaries(st.text(), json_like, max_size=4),  # (Spare.connection)
    "Wire": st.dictionaries(st.text(), json_like, max_size=4),  # (Call.args, Reply.payload)
}
# a kind's wire form (tether.kinds): Start.child, Start.kinds and Hello.kinds
child_wire = st.fixed_dictionaries(
    {
        "restart": st.sampled_from(["permanent", "transient", "temporary"]),
        "shutdown_timeout": st.floats(0.1, 10.0),
        "max_restarts": st.integers(0, 10),
        "period": st.floats(0.1, 100.0),
        "backoff_initial": st.floats(0.01, 1.0),
        "backoff_max": st.floats(1.0, 10.0),
        "ttl": st.none() | st.floats(0.1, 100.0),
        "idle_ttl": st.none() | st.floats(0.1, 100.0),
    }
)
FIELD_STRATEGIES["ChildSpecWire | dict[str, None]"] = child_wire | st.just({})
FIELD_STRATEGIES["list[KindSpecWire]"] = st.lists(
    st.fixed_dictionaries(
        {
            "kind": st.text(),
            "actor_class": st.text(),
            "scope": st.sampled_from(["shared", "run"]),
            "child": child_wire,
            "config": FIELD_STRATEGIES["JSONObject"],
        }
    ),
    max_size=3,
)
# a registered dataclass inside a field (Spare.layer), built from the table above
FIELD_STRATEGIES["Layer | None"] = st.none() | st.builds(
    Layer, *(FIELD_STRATEGIES[f.type] for f in dataclasses.fields(Layer))
)


def strategy_for(cls: type) -> st.SearchStrategy:
    kwargs = {f.name: FIELD_STRATEGIES[f.type] for f in dataclasses.fields(cls)}
    return st.builds(cls, **kwargs)


MESSAGE_CLASSES = sorted(_CLASSES.values(), key=lambda c: c.__name__)


def test_every_message_class_is_registered() -> None:
    names = {c.__name__ for c in MESSAGE_CLASSES}
    assert {"Call", "Reply", "Start", "Started", "Route", "HealthQuery", "Inject"} <= names
    assert {"Spare", "Layer"} <= names  # (they travel inside calls and replies)


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


SPARE = Spare(
    "python",
    4242,
    "/tmp/k",
    {"key": "k", "shell_port": 5},
    "n1",
    Layer("/l", "/l/py", "/b", "", True),
)


@given(strategy_for(Spare))
@settings(max_examples=60, deadline=None)
def test_a_spare_inside_an_execute_call_comes_back_as_the_same_op(spare: Spare) -> None:
    op = Execute(code="1 + 1", spare=spare)
    call = calls.Call("c1", "r", "kernel", "python", op_name(op), op_args(op), 5.0, False)
    back = decode(encode(call))
    assert isinstance(back.args["spare"], Spare)
    assert KERNEL.parse(back) == op


def test_a_spare_in_a_reply_payload_comes_back_as_a_spare() -> None:
    reply = decode(encode(calls.Reply("c1", True, {"spare": SPARE})))
    assert reply.payload["spare"] == SPARE
    assert reply.payload["spare"].layer.toolchains()  # a Layer again, not a dict


def test_a_spare_as_a_dict_is_refused_by_name() -> None:
    call = calls.Call("c1", "r", "kernel", "python", "execute", {"code": "1", "spare": {"pid": 1}})
    with pytest.raises(
        calls.ResourceError,
        match=re.escape("spare must be tether.messages.kernel_ops.Spare | None, got dict"),
    ):
        KERNEL.parse(call)


def test_an_unregistered_dataclass_in_a_field_names_its_class() -> None:
    @dataclasses.dataclass(frozen=True)
    class Stranger:
        x: int

    with pytest.raises(CodecError, match="can not serialize 'Stranger' object"):
        encode(calls.Reply("c1", True, {"s": Stranger(1)}))
