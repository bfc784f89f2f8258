"""A supervised child as its supervisor keeps it: its record, its timers, its actor class.

`ChildRecord` is one row of a supervisor's child table (`tether.supervisors.core`), keyed
by (kind, key) - our own ids, never thespian addresses, which change on restart - and kept
across restarts: the incarnation, the restart times the intensity is counted over, why
the last one ended, the pids it owned, the calls waiting for it. `ChildTimer` is the
supervisor's timer about one incarnation of a child. `load_actor_class` reads a kind's
"module.path:ClassName".
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import ClassVar, cast

from thespian.actors import ActorAddress

from tether.health_node import NodeState
from tether.json_types import JSONObject
from tether.kinds import ChildSpec, KindSpecWire
from tether.messages.calls import Call
from tether.supervisors.policy import ExitReason


@functools.cache
def load_actor_class(path: str) -> type:
    """ "module.path:ClassName" -> the class."""
    module_name, _, class_name = path.partition(":")
    module = importlib.import_module(module_name)
    try:
        return cast(type, getattr(module, class_name))
    except AttributeError:
        raise ImportError(f"module {module_name!r} has no class {class_name!r}") from None


@dataclass
class ChildRecord:
    kind: str
    key: str
    name: str
    spec: ChildSpec
    actor_class: str
    config: JSONObject  # (plain msgpack-able data: tether.kinds.KindSpec)
    kinds: list[KindSpecWire] = field(default_factory=list)  # for children that supervise
    address: ActorAddress | None = None
    incarnation: int = 0
    state: NodeState = NodeState.STARTING  # starting | ready | restarting | stopping | failed
    started_at: float = 0.0
    restart_times: list[float] = field(default_factory=list)
    restarts: int = 0
    last_error: str = ""
    pid: int = 0
    owned: list[int] = field(default_factory=list)
    stop_reason: ExitReason | None = None
    error_code: str = ""  # for failed children: GAVE_UP or UNAVAILABLE
    # calls for a child not there yet: idempotent ones across a restart, and the host's
    # until the child's pid is known (`_takes`)
    waiting: list[tuple[bytes, ActorAddress, Call]] = field(default_factory=list)


@dataclass(frozen=True)
class ChildTimer:
    """A supervisor's timer about one incarnation of a child: `RESTART` it (backoff over),
    its `TTL` expired, or `KILL` it (it did not stop within its shutdown timeout)."""

    RESTART: ClassVar[str] = "restart"
    TTL: ClassVar[str] = "ttl"
    KILL: ClassVar[str] = "kill"

    what: str
    kind: str
    key: str
    incarnation: int
