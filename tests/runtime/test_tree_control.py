"""tether.host.tree_control's pure parts: the fault check and the keys a kind declares."""

from __future__ import annotations

import pytest

from tether.host.tree_control import FAULTS, check_fault, declared_keys
from tether.kinds import KindSpec, Scope
from tether.messages.calls import ErrorCode, ResourceError

ECHO = "tether.actors.echo:EchoActor"
KINDS = {
    "pool": KindSpec("pool", ECHO, Scope.SHARED, config={"keys": ["a", "b"]}),
    "shared": KindSpec("shared", ECHO, Scope.SHARED),
    "per_run": KindSpec("per_run", ECHO, Scope.RUN),
}


@pytest.mark.parametrize(
    ("fault", "args", "says"),
    [
        ("explode", {}, "unknown fault 'explode'; faults: " + ", ".join(FAULTS)),
        ("delay", {}, "delay needs seconds=..., e.g. rt.inject('delay'"),
        ("memory_pressure", {}, "memory_pressure takes budget="),
        ("memory_pressure", {"budget": 0.5, "x": 1}, "got ['budget', 'x']"),
    ],
)
def test_a_bad_fault_says_how_to_call_inject(fault: str, args: dict, says: str) -> None:
    with pytest.raises(ValueError) as info:
        check_fault(fault, args)
    assert says in str(info.value)


@pytest.mark.parametrize(
    ("fault", "args"),
    [("kill_process", {}), ("delay", {"seconds": 1.0}), ("memory_pressure", {"budget": 0.5})],
)
def test_a_good_fault_passes(fault: str, args: dict) -> None:
    check_fault(fault, args)  # (raises if refused)
    assert fault in FAULTS


@pytest.mark.parametrize(
    ("kind", "keys"), [("pool", ["a", "b"]), ("shared", None), ("per_run", [])]
)
def test_the_keys_a_kind_declares(kind: str, keys: list[str] | None) -> None:
    assert declared_keys(KINDS, kind) == keys


def test_an_unknown_kind_names_the_connected_ones() -> None:
    with pytest.raises(ResourceError) as info:
        declared_keys(KINDS, "nope")
    assert info.value.code == ErrorCode.BAD_REQUEST
    assert info.value.message == "no resource kind 'nope'; connected kinds: per_run, pool, shared"
