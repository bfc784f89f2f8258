"""tether.resources.call_channel on a real Unix socket: calls wait in order in `arrived`,
cancels come back at once, a frame that does not decode is named, replies go back."""

from __future__ import annotations

import os
import socket

from tests.conftest import wait_until
from tether import channels
from tether.messages.calls import Call, Reply
from tether.messages.codec import decode, encode
from tether.messages.control import CancelCall
from tether.resources.call_channel import CallChannel


def _call(n: int) -> Call:
    return Call(f"c{n}", "run", "echo", "k", "echo")


def test_calls_arrive_in_order_cancels_at_once_and_replies_go_back() -> None:
    ch = CallChannel()
    assert ch.fds() == [] and ch.health() is None and ch.read([]) == ([], "")
    assert ch.open(os.getpid()) == ""  # (this process is the host and the actor both)
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        host.connect(channels.address(os.getpid(), os.getpid()))
        frames = [encode(_call(1)), encode(CancelCall("c1", "gave up")), b"\xc1", encode(_call(2))]
        host.sendall(b"".join(channels.frame(f) for f in frames))
        read: list[tuple[list[CancelCall], str]] = []

        def both_arrived() -> bool:
            read.append(ch.read(ch.ready_now()))
            return len(ch.arrived) == 2

        wait_until(both_arrived)
        cancels = [c for batch, _ in read for c in batch]
        errors = [e for _, e in read if e]
        assert cancels == [CancelCall("c1", "gave up")]
        assert len(errors) == 1 and errors[0].startswith("call channel: ")
        first, second = ch.next_arrival(), ch.next_arrival()
        assert first is not None and second is not None and ch.next_arrival() is None
        assert (first[0], second[0]) == (_call(1), _call(2))
        assert ch.health() == {"connections": 1, "refused": 0}
        assert first[1].send(encode(Reply("c1", True, {"echo": 1}))) and ch.flush()
        host.settimeout(5.0)
        header = host.recv(channels.HEADER.size, socket.MSG_WAITALL)
        body = host.recv(channels.HEADER.unpack(header)[0], socket.MSG_WAITALL)
        assert decode(body) == Reply("c1", True, {"echo": 1})
    finally:
        host.close()
        ch.close()
    assert ch.fds() == [] and ch.health() is None
