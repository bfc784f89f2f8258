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

from tether.json_types import JSONObject, JSONValue
from tether.protocol import FrameDecoder, encode


@dataclass(frozen=True)
class Response:
    request_seq: int
    command: str
    success: bool
    message: str
    body: JSONObject


@dataclass(frozen=True)
class Event:
    event: str
    body: JSONObject


@dataclass(frozen=True)
class AdapterRequest:
    seq: int
    command: str
    arguments: JSONObject


Incoming = Response | Event | AdapterRequest


@dataclass
class DapClient:
    """Our side of one DAP connection: `request` to send, `feed` what arrived."""

    next_seq: int = 1
    pending: dict[int, str] = field(default_factory=dict)  # seq -> command
    late_responses: int = 0
    decoder: FrameDecoder = field(default_factory=FrameDecoder)

    def request(self, command: str, arguments: JSONObject | None = None) -> tuple[int, bytes]:
        seq = self._seq()
        self.pending[seq] = command
        msg: JSONObject = {"seq": seq, "type": "request", "command": command}
        if arguments is not None:
            msg["arguments"] = arguments
        return seq, encode(msg)

    def respond(
        self, request: AdapterRequest, success: bool, body: JSONValue = None, message: str = ""
    ) -> bytes:
        msg: JSONObject = {
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

    def receive(self, msg: JSONValue) -> Incoming | None:
        if not isinstance(msg, dict):
            return None
        kind = msg.get("type")
        if kind == "event":
            return Event(str(msg.get("event", "")), _dict(msg.get("body")))
        if kind == "request":
            return AdapterRequest(
                as_int(msg.get("seq", 0)) or 0,
                str(msg.get("command", "")),
                _dict(msg.get("arguments")),
            )
        if kind == "response":
            request_seq = msg.get("request_seq")
            seq = request_seq if isinstance(request_seq, int) else None
            command = self.pending.pop(seq, None) if seq is not None else None
            if command is None or seq is None:
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


def _dict(value: JSONValue) -> JSONObject:
    return value if isinstance(value, dict) else {}


# --- reading a foreign message: the peer may send any JSON where the spec says one ---------
def as_obj(value: JSONValue) -> JSONObject:
    """An object, or {} when it is not one."""
    return value if isinstance(value, dict) else {}


def as_list(value: JSONValue) -> list[JSONValue]:
    """A list, or [] when it is not one."""
    return value if isinstance(value, list) else []


def as_objs(value: JSONValue) -> list[JSONObject]:
    """The objects of a list (anything else in it, or a non-list, is skipped)."""
    return [v for v in as_list(value) if isinstance(v, dict)]


def as_int(value: JSONValue) -> int | None:
    """A whole number (a float that is one, or a numeric string, too), else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None
