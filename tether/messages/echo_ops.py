"""The ops of the echo kinds (`tether.actors.echo`) and of the runtime tests' own kinds
(`tests/runtime/actors.py`): resources that exist to be called, slowed, failed and killed.

`Echo` takes any arguments and answers with them, so its class collects every argument
into `data` (`rest_field`); the other ops have typed fields. These kinds exist to test the
retry of idempotent calls, so the ops a test sends both ways (echo, pid, hang, hang_once)
take the call's idempotency as a field the caller sets (`Echo(idempotent=True)`); an op
sent by its bare name is not idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from tether.json_types import JSONObject, JSONValue  # noqa: F401 (get_type_hints of an op resolves JSONObject's "JSONValue" here)
from tether.messages.ops import Vocabulary

ECHO = Vocabulary("echo", idempotent=False)  # EchoActor: answers in its own message loop
# EchoProcessActor: through a real subprocess
ECHO_PROCESS = Vocabulary("echo_process", idempotent=False)
SLOW = Vocabulary("slow", idempotent=False)  # SlowProcessActor: calls that never answer
PROBE = Vocabulary("probe", idempotent=False)  # ProbeActor: what the loop patches are for
# StubbornProcessActor: a subprocess ignoring SIGTERM
STUBBORN = Vocabulary("stubborn", idempotent=False)


@dataclass(frozen=True)
class Echo:
    """Answer with the arguments (echo_process: through the subprocess; a `delay` argument
    makes it answer that many seconds later, like a slow server)."""

    rest_field: ClassVar[str] = "data"
    data: JSONObject = field(default_factory=dict)
    idempotent: bool = False  # (per call: see the module docstring)


@dataclass(frozen=True)
class Pid:
    """The pid of the actor process (of the subprocess, for process actors)."""

    idempotent: bool = False


@dataclass(frozen=True)
class Sleep:
    """Answer after `seconds`, on a timer: a slow resource that does not block its loop."""

    seconds: float = 0.1


@dataclass(frozen=True)
class Fail:
    """Answer with an error (`failed`) saying `message`."""

    message: str = "echo failed as asked"


@dataclass(frozen=True)
class Raise:
    """on_call raises: the call fails, the actor serves on."""

    message: str = "echo raised as asked"


@dataclass(frozen=True)
class Stop:
    """Answer, then stop normally."""


@dataclass(frozen=True)
class Crash:
    """Answer, then stop as a crash (the restart policy applies)."""


@dataclass(frozen=True)
class Stderr:
    """Make the subprocess write `text` to its stderr, then answer like echo."""

    text: str = "stderr line"


@dataclass(frozen=True)
class Hang:
    """Never answered."""

    idempotent: bool = False


@dataclass(frozen=True)
class HangOnce:
    """Never answered by the first actor to see it (it creates the file `marker`), answered
    by any later one: an idempotent call retried after a restart."""

    marker: str
    idempotent: bool = False


@dataclass(frozen=True)
class StackRoom:
    """Bytes of frame stack left in the chunk the handler runs in."""


@dataclass(frozen=True)
class Release:
    """Run the actor's release (what its exit runs) and answer how long it took."""


def _serve(vocabulary: Vocabulary, *ops: type) -> None:
    for op in ops:
        vocabulary.op(op)


_serve(ECHO, Echo, Sleep, Fail, Raise, Pid, Stop, Crash)
_serve(ECHO_PROCESS, Echo, Pid, Stderr)
_serve(SLOW, Pid, Hang, HangOnce)
_serve(PROBE, StackRoom, Pid)
_serve(STUBBORN, Release)
