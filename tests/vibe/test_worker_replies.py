"""The vibe worker kind's typed replies: built by the actor, flat on the wire (the keys
they had before they were typed), read back checked by the host, records inside too."""

from __future__ import annotations

import dataclasses

import pytest

from tether import worker_views
from tether.messages.calls import Reply
from tether.messages.codec import decode, encode
from tether.messages.nested import plain
from tether.messages.ops import OpError
from tether.messages.worker_ops import (
    Capped,
    EndView,
    Kill,
    KillReply,
    Permit,
    PermitReply,
    Poll,
    Prepare,
    PrepareReply,
    Prompt,
    Send,
    SendReply,
    Spawn,
    Status,
    View,
    Wait,
    WorkerSnapshot,
    read_reply,
)

VIEW = View("copy", "/w", "/s/v1", "/s/v1/copy", "", "/s/v1/made", "/s/v1/copied")
SNAPSHOT = dataclasses.replace(
    WorkerSnapshot.new("w1", "hints", "fast"),
    status="waiting",
    run=2,
    elapsed=1.5,
    output="step 1\n",
    output_chars=7,
    exit_code=None,
    prompts=[Prompt(1, "a", "write", "write", {"path": "x.py", "n": [1, 2]})],
    pid=4242,
    view=VIEW,
    caps={"seconds": 600.0},
    usage={"output_chars": 7, "tool_calls": 2},
    capped=Capped("tool_calls", 2.0, 2.0),
)
REPLIES = [
    SNAPSHOT,
    WorkerSnapshot.new("w2", "x", "good"),
    SNAPSHOT.sent(stopped_previous=True),
    SNAPSHOT.permitted(delivered=False),
    SNAPSHOT.killed(was="running"),
    PrepareReply(prepared=True, spawned=False),
]


def _over_the_wire(payload: dict[str, object]) -> dict[str, object]:
    back = decode(encode(Reply(call_id="c1", ok=True, payload=payload)))
    assert isinstance(back, Reply)
    return back.payload


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: type(r).__name__)
def test_a_reply_comes_back_as_it_was_sent(reply: WorkerSnapshot | PrepareReply) -> None:
    assert read_reply(type(reply), _over_the_wire(plain(reply))) == reply


def test_each_op_declares_its_reply() -> None:
    declared = {
        Spawn: WorkerSnapshot, Prepare: PrepareReply, Send: SendReply, Status: WorkerSnapshot,
        Wait: WorkerSnapshot, Poll: WorkerSnapshot, Permit: PermitReply, Kill: KillReply,
        EndView: WorkerSnapshot,
    }  # fmt: skip
    assert {op: op.reply for op in declared} == declared


def test_the_wire_keeps_the_snapshot_flat_with_the_extra_beside_it() -> None:
    payload = plain(SNAPSHOT.sent(stopped_previous=False))
    assert payload["stopped_previous"] is False and payload["status"] == "waiting"
    assert payload["view"] == VIEW.to_dict() and payload["capped"] == {
        "cap": "tool_calls",
        "limit": 2.0,
        "used": 2.0,
    }
    assert payload["prompts"] == [
        {"seq": 1, "id": "a", "tool": "write", "tier": "write",
         "arguments": {"path": "x.py", "n": [1, 2]}}
    ]  # fmt: skip


def test_the_view_is_one_type_for_the_actor_and_the_tools() -> None:
    assert worker_views.View is View and View.from_dict(VIEW.to_dict()) == VIEW
    with pytest.raises(OpError, match="needs 'root'"):
        View.from_dict({k: v for k, v in VIEW.to_dict().items() if k != "root"})


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"status": "sleeping"}, "status must be"),
        ({"run": "2"}, "run must be int"),
        ({"prompts": [{"seq": 1, "tool": "write"}]}, "needs 'id'"),
        ({"view": {"kind": "copy"}}, "needs 'workspace'"),
        ({"capped": {"cap": "seconds", "limit": "600", "used": 1.0}}, "limit must be float"),
        ({"stopped_previous": True}, "takes no argument 'stopped_previous'"),
    ],
)
def test_a_malformed_snapshot_is_refused_saying_what_is_wrong(
    change: dict[str, object], says: str
) -> None:
    with pytest.raises(OpError, match=says):
        read_reply(WorkerSnapshot, {**plain(SNAPSHOT), **change})
