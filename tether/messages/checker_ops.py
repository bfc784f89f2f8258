"""The ops of the project checker (kind "checker", `tether.actors.checker`).

The key names the row and the project root ("<server>:<root>"), so the one op needs no
arguments: `Check` runs the row's checker there and answers `CheckReply` (flat on the wire,
`op_args`; read back and checked by `read_check_reply`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tether.json_types import JSONObject, JSONValue  # noqa: F401 (get_type_hints reads Wire here)
from tether.messages.calls import WireValue
from tether.messages.ops import Records, Vocabulary

CHECKER = Vocabulary("checker", idempotent=False)
REPLIES = Records("checker reply")  # checks a reply as it comes off the wire


@REPLIES.op
@dataclass(frozen=True)
class CheckReply:
    """What the checker found, as diagnostics records (JSON objects with an absolute
    "path"), and its exit code (which says what it found, not whether it ran)."""

    records: list[JSONObject]
    returncode: int | None


def read_check_reply(payload: Mapping[str, WireValue]) -> CheckReply:
    """The `Reply` payload back as a CheckReply (OpError if a field is missing or mistyped)."""
    reply: CheckReply = REPLIES.build(CheckReply, payload)
    return reply


@CHECKER.op
@dataclass(frozen=True)
class Check:
    """Run the project's own checker (basedpyright, tsc, cc, go vet, cargo, dart) and
    answer with its findings as diagnostics records."""
