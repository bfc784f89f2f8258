"""The call vocabulary: a tool handler's request to a resource actor, and its one reply.

A `Call` names its target by our own key (kind + key), never by a thespian address:
addresses are not stable across restarts. `deadline` is an absolute `time.monotonic()`
value (CLOCK_MONOTONIC is machine-wide on Linux, so it means the same in every actor
process). Every Call gets exactly one `Reply`: a payload, or a typed error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, TypeAlias

from tether.json_types import JSONValue

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# What a call's args and a reply's payload hold: JSON values, or a registered record
# (tether.messages.codec.register), which msgpack carries as an extension: a kernel
# pool's Take reply holds a Spare, an Execute's args a Layer.
WireValue: TypeAlias = "JSONValue | DataclassInstance"
Wire: TypeAlias = "dict[str, WireValue]"
# what a caller asks a resource to do: an op instance of the kind's vocabulary (a frozen
# dataclass: tether.messages.ops), or an op's name with its args
Op: TypeAlias = "str | DataclassInstance"
# one call of a gather: (kind, key, op, args)
GatherCall: TypeAlias = "tuple[str, str, Op, Mapping[str, WireValue] | None]"


@dataclass(frozen=True)
class Call:
    call_id: str  # unique per runtime; a reply with another id is dropped (late replies)
    run_id: str  # the conversation the call belongs to ("" for runtime-level calls)
    kind: str  # resource kind: "language_server", "parser", "echo", ...
    key: str  # which resource of that kind: a root + server, a pool slot, ...
    op: str  # what to do; meaning is the kind's own
    args: Wire = field(default_factory=dict)  # msgpack-able values only
    deadline: float = 0.0  # absolute time.monotonic(); past it the caller has given up
    idempotent: bool = False  # safe to run twice: retried once if its actor dies or restarts
    run_scoped: bool = False  # its kind is RUN-scoped: (run_id, kind, key) names the actor
    retried: bool = False  # this is the one retry: if it dies again, the caller hears so


@dataclass(frozen=True)
class Reply:
    call_id: str
    ok: bool
    payload: Wire = field(default_factory=dict)
    error: str = ""  # error code, see ErrorCode
    message: str = ""  # for the model: what failed and what to do next


class ErrorCode(StrEnum):
    """Typed error codes of a failed Reply (a StrEnum: each crosses msgpack as its string)."""

    DEADLINE = "deadline"  # nobody answered in time
    RESOURCE_DIED = "resource_died"  # the process or actor died while the call was in flight
    RESTARTING = "restarting"  # the resource is being restarted; try again shortly
    GAVE_UP = "gave_up"  # restart intensity exceeded; the supervisor stopped trying
    UNAVAILABLE = "unavailable"  # cannot start here (marker or binary missing, ...)
    BAD_REQUEST = "bad_request"  # the op or its args are wrong
    FAILED = "failed"  # the resource answered with an error of its own
    DROPPED = "dropped"  # fault injection dropped the reply
    MOVED = "moved"  # internal: the actor is going; the host routes the idempotent call again
    CANCELLED = "cancelled"  # the caller cancelled the call (tether.call_scope)
    CAPACITY = "capacity"  # the tree's memory budget is full (tether.capacity.governor)


class ResourceError(Exception):
    """Raised on the host side by `ToolContext.call_resource` for a failed Reply."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message
