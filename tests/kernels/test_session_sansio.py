"""tether.kernels.session with fake Jupyter messages: no kernel, no actor, no clock but ours.

A `FakeIO` stands in for the kernel actor: it records what the session sends to the
kernel, the calls it answers or fails and the timers it arms; the kernel's messages are
built by `iopub`/`reply`/`stdin_request` as ipykernel would send them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether.kernels.bridge import SENTINEL
from tether.kernels.session import (
    SETTLE_CAP,
    Budget,
    KernelSession,
    KillIfStill,
    RunWaiting,
    Settle,
)
from tether.messages.calls import Call, ErrorCode
from tether.messages.kernel_ops import (
    CellReply,
    Execute,
    ToolAnswer,
    cell_payload,
    read_cell_reply,
)
from tether.messages.ops import OpError

NONCE = "n0nce"


class FakeIO:
    def __init__(self, ready: bool = True) -> None:
        self.kernel_state: tuple[int, bool] | None = (4242, ready)
        self.sent: list[tuple[str, str, dict[str, Any]]] = []
        self.executed: list[str] = []
        self.replies: list[tuple[str, dict[str, Any]]] = []
        self.fails: list[tuple[str, ErrorCode, str]] = []
        self.timers: list[tuple[float, object]] = []
        self.limits: list[str] = []
        self.ends = 0

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        self.sent.append((channel, msg_type, content))
        return f"sent-{len(self.sent)}"

    def execute(self, code: str) -> str:
        self.executed.append(code)
        return f"exec-{len(self.executed)}"

    def reply(self, call: Call, reply: CellReply) -> None:
        payload = cell_payload(reply)  # as it crosses the wire, and as the host reads it back
        assert read_cell_reply(payload) == reply
        self.replies.append((call.call_id, payload))

    def fail(self, call: Call, code: ErrorCode, message: str) -> None:
        self.fails.append((call.call_id, code, message))

    def after(self, seconds: float, tag: object) -> None:
        self.timers.append((seconds, tag))

    def kernel(self) -> tuple[int, bool] | None:
        return self.kernel_state

    def limits_hit(self) -> list[str]:
        return self.limits

    def ended(self) -> None:
        self.ends += 1


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _session(language: str = "python", ready: bool = True) -> tuple[KernelSession, FakeIO, Clock]:
    io, clock = FakeIO(ready), Clock()
    return KernelSession(language, io, interrupt_grace=3.0, clock=clock), io, clock


def _call(n: int = 1) -> Call:
    return Call(f"call-{n}", "run", "kernel", "python", "execute")


def _run(s: KernelSession, code: str = "1", n: int = 1, **op: Any) -> str:
    s.submit(s.new_cell(_call(n), Execute(code, **op)))
    assert s.cell is not None
    return s.cell.msg_id


def iopub(parent: str, msg_type: str, **content: Any) -> dict[str, Any]:
    return {"parent_header": {"msg_id": parent}, "msg_type": msg_type, "content": content}


def idle(parent: str) -> dict[str, Any]:
    return iopub(parent, "status", execution_state="idle")


def reply(parent: str, count: int = 1) -> dict[str, Any]:
    return iopub(parent, "execute_reply", status="ok", execution_count=count)


def stdin_request(parent: str, prompt: str) -> dict[str, Any]:
    return iopub(parent, "input_request", prompt=prompt)


def bridge_prompt(*calls: tuple[str, dict[str, Any]]) -> str:
    body = {"calls": [{"name": n, "args": a} for n, a in calls], "batch": len(calls) > 1}
    return f"{SENTINEL}{NONCE}:{json.dumps(body)}"


def test_a_cell_ends_with_its_reply_and_idle_and_is_answered_once() -> None:
    s, io, clock = _session()
    msg = _run(s, "print('hi')")
    assert io.executed == ["print('hi')"] and isinstance(io.timers[0][1], Budget)
    s.take("iopub", iopub(msg, "stream", name="stdout", text="hi\n"), NONCE)
    s.take("shell", reply(msg, count=7), NONCE)
    assert io.replies == []  # (idle has not come yet)
    clock.now += 0.5
    s.take("iopub", idle(msg), NONCE)
    [(call_id, final)] = io.replies
    assert call_id == "call-1" and final["status"] == "done" and "hi" in final["text"]
    assert (final["execution_count"], final["kernel_pid"], final["elapsed"]) == (7, 4242, 0.5)
    assert s.cell is None and s.cells_run == 1 and io.ends == 1
    s.take("iopub", idle(msg), NONCE)  # a late duplicate changes nothing
    assert len(io.replies) == 1


@pytest.mark.parametrize(
    "channel, msg",
    [
        ("iopub", iopub("someone-else", "stream", name="stdout", text="x")),  # not our cell
        ("iopub", idle("someone-else")),
        ("shell", reply("someone-else")),
    ],
)
def test_messages_of_another_parent_are_ignored(channel: str, msg: dict[str, Any]) -> None:
    s, io, _ = _session()
    _run(s)
    s.take(channel, msg, NONCE)
    assert s.cell is not None and s.cell.output.render().text == "" and io.replies == []


def test_a_late_publisher_waits_for_its_end_marker_or_the_cap() -> None:
    s, io, _ = _session("javascript")
    msg = _run(s, "console.log(1)")
    s.take("shell", reply(msg), NONCE)
    s.take("iopub", idle(msg), NONCE)
    assert io.replies == [] and io.sent[-1][:2] == ("shell", "kernel_info_request")
    assert io.timers[-1] == (SETTLE_CAP, Settle(s.cell.cell_id if s.cell else ""))
    flush = f"sent-{len(io.sent)}"
    s.take("iopub", iopub(msg, "stream", name="stdout", text="late\n"), NONCE)
    s.take("iopub", iopub(flush, "status", execution_state="busy"), NONCE)
    [(_, final)] = io.replies
    assert "late" in final["text"] and s.settle_caps == 0


def test_a_late_publishers_cap_finishes_the_cell_and_is_counted() -> None:
    s, io, _ = _session("javascript")
    msg = _run(s)
    s.take("shell", reply(msg), NONCE)
    s.take("iopub", idle(msg), NONCE)
    s.on_timer(io.timers[-1][1])
    assert len(io.replies) == 1 and s.settle_caps == 1


def test_a_late_publisher_whose_result_came_needs_no_marker() -> None:
    s, io, _ = _session("javascript")
    msg = _run(s, "1 + 1")
    s.take("iopub", iopub(msg, "execute_result", data={"text/plain": "2"}, metadata={}), NONCE)
    s.take("shell", reply(msg), NONCE)
    s.take("iopub", idle(msg), NONCE)
    assert len(io.replies) == 1 and io.sent == []


def test_a_bridge_request_answers_early_and_the_tool_answer_goes_to_stdin() -> None:
    s, io, _ = _session()
    msg = _run(s, "tool('read', {'path': 'a.py'})")
    s.take("stdin", stdin_request(msg, bridge_prompt(("read", {"path": "a.py"}))), NONCE)
    assert s.cell is not None and s.cell.tool_pending
    [(call_id, early)] = io.replies
    cell_id = s.cell.cell_id
    assert (call_id, early) == (
        "call-1",
        {"status": "tool", "cell": cell_id, "calls": [{"name": "read", "args": {"path": "a.py"}}]},
    )
    results = [{"ok": True, "text": "x = 1", "data": None}]
    s.tool_answer(_call(2), ToolAnswer(cell_id, results))
    assert io.sent[-1] == ("stdin", "input_reply", {"value": json.dumps({"results": results})})
    s.take("shell", reply(msg), NONCE)
    s.take("iopub", idle(msg), NONCE)
    assert io.replies[-1][0] == "call-2"  # the result answers the ToolAnswer's call


@pytest.mark.parametrize(
    "prompt, value, note",
    [
        ("Name? ", "", "input()/prompt() got an empty answer"),
        (f"{SENTINEL}other-nonce:{{}}", "", "input()/prompt() got an empty answer"),
        (f"{SENTINEL}{NONCE}:not json", "malformed tool() request", ""),
    ],
)
def test_a_prompt_that_is_not_a_bridge_request_gets_an_answer_at_once(
    prompt: str, value: str, note: str
) -> None:
    s, io, _ = _session()
    msg = _run(s)
    s.take("stdin", stdin_request(msg, prompt), NONCE)
    [(channel, msg_type, content)] = io.sent
    assert (channel, msg_type) == ("stdin", "input_reply") and value in content["value"]
    assert s.cell is not None and not s.cell.tool_pending and io.replies == []
    assert any(note in n for n in s.cell.notes) if note else s.cell.notes == []


def test_a_cell_that_ended_while_its_tool_ran_is_answered_with_the_tool_answer() -> None:
    s, io, _ = _session()
    msg = _run(s)
    s.take("stdin", stdin_request(msg, bridge_prompt(("read", {}))), NONCE)
    assert s.cell is not None
    cell_id = s.cell.cell_id
    io.kernel_state = None
    s.kernel_lost("the kernel died", started=True)
    assert len(io.replies) == 1  # (only the early answer: nobody waits for the result yet)
    s.tool_answer(_call(2), ToolAnswer(cell_id, []))
    assert io.replies[-1][0] == "call-2" and "the kernel died" in io.replies[-1][1]["interrupted"]
    s.tool_answer(_call(3), ToolAnswer(cell_id, []))  # asked again: nothing is left
    assert io.fails[-1][:2] == ("call-3", ErrorCode.BAD_REQUEST)


def test_a_second_cell_is_refused_while_one_runs_but_not_behind_a_cancelled_one() -> None:
    s, io, _ = _session()
    _run(s)
    assert "a cell is still running" in s.refusal(Execute("2"))
    s.cancel(_call(1), "the user stopped it")
    assert io.sent[-1][:2] == ("control", "interrupt_request")
    assert isinstance(io.timers[-1][1], KillIfStill) and s.refusal(Execute("2")) == ""
    s.submit(s.new_cell(_call(2), Execute("2")))
    assert io.executed == ["1"] and "a cell is still running" in s.refusal(Execute("3"))


def test_the_cell_queued_behind_a_cancelled_one_runs_once_it_stopped() -> None:
    s, io, _ = _session()
    msg = _run(s)
    s.cancel(_call(1), "stop")
    s.submit(s.new_cell(_call(2), Execute("2")))
    s.take("shell", reply(msg), NONCE)
    s.take("iopub", idle(msg), NONCE)
    assert io.timers[-1] == (0, RunWaiting()) and io.executed == ["1"]
    s.on_timer(RunWaiting())
    assert io.executed == ["1", "2"] and s.cell is not None and s.cell.call == _call(2)


def test_a_cancel_before_the_kernel_was_ready_fails_the_waiting_cell() -> None:
    s, io, _ = _session(ready=False)
    s.submit(s.new_cell(_call(1), Execute("1")))
    assert io.executed == [] and s.waiting is not None
    s.cancel(_call(1), "gave up")
    assert io.fails == [("call-1", ErrorCode.CANCELLED, "cancelled before the cell ran: gave up")]
    assert s.idle()


@pytest.mark.parametrize(
    "quiet_for, ran_for, interrupted",
    [
        (5.0, 5.0, "the cell printed nothing for 5 s, its inactivity budget"),
        (4.0, 8.0, ""),  # it printed 4 s ago: inside its budget, checked again later
        (4.0, 61.0, "the cell ran for 60 s, its wall-clock cap"),
    ],
)
def test_budgets(quiet_for: float, ran_for: float, interrupted: str) -> None:
    s, io, clock = _session()
    msg = _run(s, inactivity=5.0, wall=60.0)
    assert s.cell is not None
    if ran_for > quiet_for:
        clock.now = 100.0 + ran_for - quiet_for
        s.take("iopub", iopub(msg, "stream", name="stdout", text="."), NONCE)
    clock.now = 100.0 + ran_for
    s.on_timer(Budget(s.cell.cell_id))
    assert s.cell.interrupted == interrupted
    assert [m for _, m, _ in io.sent] == (["interrupt_request"] if interrupted else [])
    assert isinstance(io.timers[-1][1], KillIfStill if interrupted else Budget)


def test_a_pending_bridged_call_does_not_count_as_inactivity() -> None:
    s, io, clock = _session()
    msg = _run(s, inactivity=5.0)
    s.take("stdin", stdin_request(msg, bridge_prompt(("read", {}))), NONCE)
    clock.now += 30.0
    assert s.cell is not None
    s.on_timer(Budget(s.cell.cell_id))
    assert not s.cell.interrupted and isinstance(io.timers[-1][1], Budget)


def test_a_lost_kernel_ends_the_cell_with_its_output_and_tells_the_next_cell() -> None:
    s, io, _ = _session()
    msg = _run(s)
    s.take("iopub", iopub(msg, "stream", name="stdout", text="partial\n"), NONCE)
    io.kernel_state = None
    s.kernel_lost("the kernel was killed", started=True)
    [(_, final)] = io.replies
    assert "partial" in final["text"] and final["kernel_pid"] is None
    assert "the kernel was killed" in final["interrupted"]
    nxt = s.new_cell(_call(2), Execute("2"))
    assert nxt.notes == [
        "the kernel was killed; its variables, imports and data are lost: this cell ran in a "
        "fresh kernel"
    ]


def test_a_kernel_that_never_started_fails_the_waiting_cell_and_loses_nothing() -> None:
    s, io, _ = _session(ready=False)
    s.submit(s.new_cell(_call(1), Execute("1")))
    io.kernel_state = None
    s.kernel_lost("no such launcher", started=False)
    [(call_id, code, message)] = io.fails
    assert (call_id, code) == ("call-1", ErrorCode.FAILED)
    assert message.startswith("the python kernel could not start: no such launcher.")
    assert s.new_cell(_call(2), Execute("2")).notes == []


def test_the_kernels_limits_go_into_the_result_notes() -> None:
    s, io, _ = _session()
    io.limits = ["the disk of this place is full"]
    msg = _run(s)
    s.take("shell", reply(msg), NONCE)
    s.take("iopub", idle(msg), NONCE)
    assert "the disk of this place is full" in io.replies[0][1]["notes"]


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        (
            {"status": "maybe"},
            "a kernel reply's status must be one of ['done', 'tool'], got 'maybe'",
        ),
        ({"status": "tool", "cell": "c1"}, "kernel reply.tool_request needs 'calls'"),
        ({"status": "tool", "cell": 3, "calls": []}, "kernel reply.tool_request: cell must be str"),
    ],
)
def test_a_reply_that_is_not_what_its_status_says_is_refused_by_name(payload, said):
    with pytest.raises(OpError) as bad:
        read_cell_reply(payload)
    assert said in str(bad.value), bad.value
