"""tether.health_node: the one builder of a health tree's node, and the states."""

from __future__ import annotations

import os

import pytest

from tether.health_node import NodeState, health_node
from tether.messages.codec import decode, encode
from tether.messages.control import HealthReport


def test_a_node_has_every_field_health_promises() -> None:
    node = health_node("echo:k", "echo", "k", NodeState.READY, pids=[os.getpid()])
    assert set(node) == {
        "name", "kind", "key", "state", "uptime", "restarts", "last_error", "pending",
        "pids", "children",
    }  # fmt: skip
    assert node["pids"][0]["pid"] == os.getpid() and node["pids"][0]["alive"]


@pytest.mark.parametrize(
    ("state", "wire"),
    [(NodeState.READY, "ready"), (NodeState.FAILED, "failed"), ("indexing", "indexing")],
)
def test_the_state_crosses_the_wire_as_its_plain_string(state: str, wire: str) -> None:
    node = health_node("n", "k", "", state)
    got = decode(encode(HealthReport("q", node))).node["state"]
    assert (got, type(got)) == (wire, str)


def test_a_state_compares_equal_to_the_string_older_readers_use() -> None:
    assert NodeState.UNRESPONSIVE == "unresponsive" and {"busy": 1}[NodeState.BUSY] == 1


def test_uptime_is_rounded_and_usage_only_when_given() -> None:
    node = health_node("n", "k", "", "ready", uptime=1.23456, usage={"bytes": 1})
    assert (node["uptime"], node["usage"]) == (1.235, {"bytes": 1})
    assert "usage" not in health_node("n", "k", "", "ready")
