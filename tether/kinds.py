"""Child specs and resource kinds: the data a supervisor needs to run a child, validated when built.

OTP's `supervisor` child spec, reduced to what tether uses. A `KindSpec` names a resource
kind ("echo", "language_server", "parser", ...), the actor class that serves it, where it
lives in the tree (`Scope`) and its `ChildSpec`. Each tool family lists its kinds in a
module-level `KINDS: list[KindSpec]`; `tether.runtime.RESOURCE_KIND_MODULES` loads them.

Every field is checked by the constructor and a bad value is named in the error, so a
typo in a family's table fails at import, not at the first crash.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypedDict

from tether.json_types import JSONObject


class Restart(enum.Enum):
    """When a child that stopped is started again (OTP restart types)."""

    PERMANENT = "permanent"  # always restarted, whatever the reason it stopped
    TRANSIENT = "transient"  # restarted only after a crash, not after a normal stop
    TEMPORARY = "temporary"  # never restarted; the next call starts a fresh one


# the kinds of the tree's own nodes (tether.supervisors.tree): no resource kind may take them
TREE_KINDS = ("root", "supervisor", "runs", "run")


class Scope(enum.Enum):
    """Where a kind's actors live in the tree."""

    SHARED = "shared"  # one actor per key for the whole runtime, under the kind's supervisor
    RUN = "run"  # one actor per key per conversation, under that run's RunActor


def _positive(name: str, value: float | None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"ChildSpec.{name} must be a positive number of seconds, got {value!r}")


@dataclass(frozen=True)
class ChildSpec:
    """How a supervisor runs one child. Times in seconds.

    max_restarts within period: OTP's restart intensity. One restart more and the
    supervisor gives up on that child (health says "failed: gave up ...").
    backoff_initial doubles with each restart inside the period, capped at backoff_max.
    ttl: hard lifetime, the child is stopped when it passes (debug sessions: 1800).
    idle_ttl: the child stops itself after that long without a call (kernels).
    shutdown_timeout: how long a child may take to stop before its process is killed.
    """

    restart: Restart = Restart.TRANSIENT
    shutdown_timeout: float = 5.0
    max_restarts: int = 5
    period: float = 60.0
    backoff_initial: float = 0.1
    backoff_max: float = 5.0
    ttl: float | None = None
    idle_ttl: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.restart, Restart):
            raise ValueError(
                f"ChildSpec.restart must be a Restart (PERMANENT, TRANSIENT, TEMPORARY), "
                f"got {self.restart!r}"
            )
        if not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise ValueError(
                f"ChildSpec.max_restarts must be an int >= 0, got {self.max_restarts!r}"
            )
        _positive("shutdown_timeout", self.shutdown_timeout)
        _positive("period", self.period)
        _positive("backoff_initial", self.backoff_initial)
        _positive("backoff_max", self.backoff_max)
        _positive("ttl", self.ttl, allow_none=True)
        _positive("idle_ttl", self.idle_ttl, allow_none=True)
        if self.backoff_max < self.backoff_initial:
            raise ValueError(
                f"ChildSpec.backoff_max ({self.backoff_max!r}) must be >= backoff_initial "
                f"({self.backoff_initial!r})"
            )

    def to_wire(self) -> ChildSpecWire:
        return {
            "restart": self.restart.value,
            "shutdown_timeout": self.shutdown_timeout,
            "max_restarts": self.max_restarts,
            "period": self.period,
            "backoff_initial": self.backoff_initial,
            "backoff_max": self.backoff_max,
            "ttl": self.ttl,
            "idle_ttl": self.idle_ttl,
        }

    @classmethod
    def from_wire(cls, data: ChildSpecWire) -> ChildSpec:
        return cls(
            restart=Restart(data["restart"]),
            shutdown_timeout=data["shutdown_timeout"],
            max_restarts=data["max_restarts"],
            period=data["period"],
            backoff_initial=data["backoff_initial"],
            backoff_max=data["backoff_max"],
            ttl=data["ttl"],
            idle_ttl=data["idle_ttl"],
        )


class ChildSpecWire(TypedDict):
    """A ChildSpec as it crosses to an actor (msgpack): its fields, the restart by value."""

    restart: str
    shutdown_timeout: float
    max_restarts: int
    period: float
    backoff_initial: float
    backoff_max: float
    ttl: float | None
    idle_ttl: float | None


class KindSpecWire(TypedDict):
    """A KindSpec as it crosses to a supervisor (msgpack)."""

    kind: str
    actor_class: str
    scope: str
    child: ChildSpecWire
    config: JSONObject


@dataclass(frozen=True)
class KindSpec:
    """A resource kind: its name, actor class ("module.path:ClassName"), scope and child spec.

    config is plain msgpack-able data handed to the actor's on_start. Two keys mean
    something to the runtime itself: "keys" (a list of str: a fixed key set, e.g. pool
    slots, reported by `Runtime.kind_keys`) and nothing else so far.
    """

    kind: str
    actor_class: str
    scope: Scope = Scope.SHARED
    child: ChildSpec = field(default_factory=ChildSpec)
    config: JSONObject = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (
            not isinstance(self.kind, str)
            or not self.kind
            or not self.kind.replace("_", "").isalnum()
        ):
            raise ValueError(
                f"KindSpec.kind must be a non-empty identifier like 'language_server', got {self.kind!r}"
            )
        if self.kind in TREE_KINDS:
            raise ValueError(
                f"KindSpec.kind {self.kind!r} names a node of the tree itself "
                f"({', '.join(TREE_KINDS)}); pick another name"
            )
        module, sep, cls = str(self.actor_class).partition(":")
        if not sep or not module or not cls:
            raise ValueError(
                f"KindSpec.actor_class must be 'module.path:ClassName', got {self.actor_class!r} "
                f"(kind {self.kind!r})"
            )
        if not isinstance(self.scope, Scope):
            raise ValueError(
                f"KindSpec.scope must be Scope.SHARED or Scope.RUN, got {self.scope!r}"
            )
        if not isinstance(self.child, ChildSpec):
            raise ValueError(f"KindSpec.child must be a ChildSpec, got {self.child!r}")
        if not isinstance(self.config, dict):
            raise ValueError(f"KindSpec.config must be a dict, got {type(self.config).__name__}")
        keys = self.config.get("keys")
        if keys is not None and (
            not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys)
        ):
            raise ValueError(f"KindSpec.config['keys'] must be a list of str, got {keys!r}")

    def to_wire(self) -> KindSpecWire:
        return {
            "kind": self.kind,
            "actor_class": self.actor_class,
            "scope": self.scope.value,
            "child": self.child.to_wire(),
            "config": self.config,
        }

    @classmethod
    def from_wire(cls, data: KindSpecWire) -> KindSpec:
        return cls(
            kind=data["kind"],
            actor_class=data["actor_class"],
            scope=Scope(data["scope"]),
            child=ChildSpec.from_wire(data["child"]),
            config=data["config"],
        )
