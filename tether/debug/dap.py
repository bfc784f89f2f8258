"""DAP client state: sequence numbers, pending requests, and routing of what arrives.

Sans-io like `tether.protocol` (whose Content-Length framing DAP shares with LSP): methods
return the bytes to write and the events decoded from what was read; nothing here touches
a pipe or a clock of its own.

The Debug Adapter Protocol frames JSON objects with a `type`: "request" (either way),
"response" (matched to our request by `request_seq`) or "event". A response whose
`request_seq` we are not waiting for is a late answer to a request we gave up on; it is
dropped and counted. A request from the adapter (`runInTerminal`, `startDebugging`) gets
exactly one answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tether.protocol import FrameDecoder, encode


@dataclass(frozen=True)
class Response:
    request_seq: int
    command: str
    success: bool
    message: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Event:
    event: str
    body: dict[str, Any]


@dataclass(frozen=True)
class AdapterRequest:
    seq: int
    command: str
    arguments: dict[str, Any]


Incoming = Response | Event | AdapterRequest


@dataclass
class DapClient:
    """Our side of one DAP connection: `request` to send, `feed` what arrived."""

    next_seq: int = 1
    pending: dict[int, str] = field(default_factory=dict)  # seq -> command
    late_responses: int = 0
    decoder: FrameDecoder = field(default_factory=FrameDecoder)

    def request(self, command: str, arguments: dict[str, Any] | None = None) -> tuple[int, bytes]:
        seq = self._seq()
        self.pending[seq] = command
        msg: dict[str, Any] = {"seq": seq, "type": "request", "command": command}
        if arguments is not None:
            msg["arguments"] = arguments
        return seq, encode(msg)

    def respond(
        self, request: AdapterRequest, success: bool, body: Any = None, message: str = ""
    ) -> bytes:
        msg: dict[str, Any] = {
            "seq": self._seq(),
            "type": "response",
            "request_seq": request.seq,
            "command": request.command,
            "success": success,
        }
        if body is not None:
            msg["body"] = body
        if message:
            msg["message"] = message
        return encode(msg)

    def forget(self, seq: int) -> None:
        """Stop waiting for `seq` (its caller gave up); its answer will be dropped."""
        self.pending.pop(seq, None)

    def feed(self, data: bytes) -> list[Incoming]:
        """Decode what arrived (FramingError if the stream is corrupt)."""
        out = []
        for msg in self.decoder.feed(data):
            item = self.receive(msg)
            if item is not None:
                out.append(item)
        return out

    def receive(self, msg: Any) -> Incoming | None:
        if not isinstance(msg, dict):
            return None
        kind = msg.get("type")
        if kind == "event":
            return Event(str(msg.get("event", "")), _dict(msg.get("body")))
        if kind == "request":
            return AdapterRequest(
                int(msg.get("seq", 0)), str(msg.get("command", "")), _dict(msg.get("arguments"))
            )
        if kind == "response":
            seq = msg.get("request_seq")
            command = self.pending.pop(seq, None) if isinstance(seq, int) else None
            if command is None or not isinstance(seq, int):
                self.late_responses += 1
                return None
            return Response(
                seq,
                str(msg.get("command") or command),
                bool(msg.get("success")),
                str(msg.get("message") or ""),
                _dict(msg.get("body")),
            )
        return None

    def _seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
