"""Every message that crosses an actor boundary: frozen dataclasses, one msgpack codec.

`calls` is the tool-facing vocabulary (Call, Reply, ErrorCode, ResourceError);
`control` is the runtime's own (start, stop, routing, health, faults); `codec` turns
either into bytes and back.
"""

from tether.messages.calls import Call, ErrorCode, Reply, ResourceError
from tether.messages.codec import decode, encode

__all__ = ["Call", "ErrorCode", "Reply", "ResourceError", "decode", "encode"]
