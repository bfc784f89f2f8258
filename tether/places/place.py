"""`Place`: where a conversation's processes run, as validated frozen data.

A run has one place, and every process that runs the conversation's code (a kernel, a
debuggee, a worker) is started through it (`tether.places.wrap`). Three kinds:

- `host`: the runtime's own user and filesystem, as before places existed (the SPEC's
  default when the conversation has no isolated environment). It keeps nothing out.
- `sandbox`: built in, on bubblewrap: own user namespace and uid with no capabilities,
  the workspace read-write, system and toolchains read-only, a private /tmp and HOME
  (tmpfs), own pid, ipc, uts and network namespaces (`tether.places.sandbox`).
- `prefix`: an environment the host already has (`podman exec`, `nsenter`, a chroot):
  a command prefix, and the mapping between host paths and the paths inside it.

A place travels in messages as a plain dict (`to_wire` / `from_wire`); `policy_key`
names its policy, so shared resources (a language server) are keyed by it: two runs with
the same policy share, different policies never do.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tether.json_types import JSONObject, JSONValue

KINDS = ("host", "sandbox", "prefix")


class PlaceError(ValueError):
    """A place that is malformed, or cannot start here; the message names what is missing."""


@dataclass(frozen=True)
class Limits:
    """What one place may use at most (None: no limit of that kind).

    A sandbox applies them: memory_mb and pids through a cgroup per place where the
    machine delegates one (`tether.cgroups`); tmp_mb is the size of a sandbox's private
    /tmp (tmpfs, its HOME inside); cpu_weight the place's CPU share against the others (cgroup v1
    cpu.shares / v2 cpu.weight: a busy loop gets its share, not the machine)."""

    memory_mb: int | None = 4096
    pids: int | None = 1024
    tmp_mb: int = 1024
    cpu_weight: int | None = 100

    def __post_init__(self) -> None:
        for name in ("memory_mb", "pids", "cpu_weight"):
            _positive(name, getattr(self, name), optional=True)
        _positive("tmp_mb", self.tmp_mb, optional=False)

    @classmethod
    def from_wire(cls, data: Mapping[str, JSONValue]) -> Limits:
        """Limits as `to_wire` writes them (one left out: its default), each checked."""
        unknown = set(data) - set(_LIMITS)
        if unknown:
            raise PlaceError(f"unknown place limits {sorted(unknown)}; the limits: {_LIMITS}")
        default = cls()

        def get(name: str, optional: bool = True) -> int | None:
            value = data.get(name, getattr(default, name))
            _positive(name, value, optional)
            assert value is None or isinstance(value, int)  # (just checked)
            return value

        memory_mb, pids, cpu_weight = get("memory_mb"), get("pids"), get("cpu_weight")
        tmp_mb = get("tmp_mb", optional=False)
        assert tmp_mb is not None  # (checked: not optional)
        return cls(memory_mb=memory_mb, pids=pids, tmp_mb=tmp_mb, cpu_weight=cpu_weight)

    def to_wire(self) -> JSONObject:
        return {
            "memory_mb": self.memory_mb,
            "pids": self.pids,
            "tmp_mb": self.tmp_mb,
            "cpu_weight": self.cpu_weight,
        }


_LIMITS = tuple(f.name for f in dataclasses.fields(Limits))


def _items(name: str, value: JSONValue) -> Sequence[JSONValue]:
    """A list field of a place's wire form (None or empty: none)."""
    if not value:
        return ()
    if not isinstance(value, list | tuple):
        raise PlaceError(f"place {name} must be a list, got {value!r}")
    return value


def _pair(value: JSONValue) -> tuple[str, str]:
    """One of a place's paths: (host path, path inside)."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise PlaceError(f"a place path must be a (host, inside) pair, got {value!r}")
    return str(value[0]), str(value[1])


def _positive(name: str, value: JSONValue, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        what = "a positive int or None" if optional else "a positive int"
        raise PlaceError(f"place limit {name} must be {what}, got {value!r}")


@dataclass(frozen=True)
class Place:
    """Where a run's processes run. Build with `Place.host()`, `Place.sandbox(...)`,
    `Place.prefix(...)` or `Place.parse(value)`."""

    kind: str = "host"
    network: bool = False  # sandbox: user-mode egress (pasta / slirp4netns), never loopback
    command: tuple[str, ...] = ()  # prefix: the command that enters the environment
    paths: tuple[tuple[str, str], ...] = ()  # prefix: (host path, path inside), longest first
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise PlaceError(f"unknown place kind {self.kind!r}: use one of {', '.join(KINDS)}")
        if self.kind == "prefix":
            if not self.command or not all(isinstance(p, str) and p for p in self.command):
                raise PlaceError(
                    "a prefix place needs its command as a list of non-empty strings, e.g. "
                    "Place.prefix(['podman', 'exec', '-i', 'box'], paths={'/srv/ws': '/ws'})"
                )
        elif self.command or self.paths:
            raise PlaceError(
                f"a {self.kind} place takes no command or paths (those are a prefix place's)"
            )
        if self.network and self.kind != "sandbox":
            raise PlaceError("network= is a sandbox setting; host and prefix places have theirs")
        for host, inside in self.paths:
            if not (os.path.isabs(host) and os.path.isabs(inside)):
                raise PlaceError(
                    f"prefix paths map absolute paths to absolute paths, got {host!r} -> {inside!r}"
                )

    # --- constructors --------------------------------------------------------------------
    @classmethod
    def host(cls) -> Place:
        return cls("host")

    @classmethod
    def sandbox(cls, network: bool = False, limits: Limits | None = None) -> Place:
        return cls("sandbox", network=bool(network), limits=limits or Limits())

    @classmethod
    def prefix(
        cls,
        command: Sequence[str],
        paths: Mapping[str, str] | None = None,
        limits: Limits | None = None,
    ) -> Place:
        if isinstance(command, str):
            raise PlaceError(
                f"a prefix place's command is a list of arguments, not a string: "
                f"got {command!r}; write it as {command.split()!r}"
            )
        pairs = sorted(
            ((os.path.normpath(h), os.path.normpath(i)) for h, i in (paths or {}).items()),
            key=lambda pair: -len(pair[0]),
        )
        return cls("prefix", command=tuple(command), paths=tuple(pairs), limits=limits or Limits())

    @classmethod
    def parse(
        cls, value: Place | str | Mapping[str, JSONValue] | None, default: Place | None = None
    ) -> Place:
        """A Place from what a host passes: a Place, "host" / "sandbox", a wire dict, or
        None (the default)."""
        if value is None:
            return default or cls.host()
        if isinstance(value, Place):
            return value
        if isinstance(value, str):
            if value == "host":
                return cls.host()
            if value == "sandbox":
                return cls.sandbox()
            raise PlaceError(
                f"unknown place {value!r}: use 'host', 'sandbox', Place.sandbox(network=True) "
                "or Place.prefix([...], paths={...})"
            )
        if isinstance(value, Mapping):
            return cls.from_wire(value)
        raise PlaceError(f"a place is a Place, 'host' or 'sandbox'; got {type(value).__name__}")

    # --- wire ------------------------------------------------------------------------------
    def to_wire(self) -> JSONObject:
        return {
            "kind": self.kind,
            "network": self.network,
            "command": list(self.command),
            "paths": [list(p) for p in self.paths],
            "limits": self.limits.to_wire(),
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, JSONValue]) -> Place:
        unknown = set(data) - {"kind", "network", "command", "paths", "limits"}
        if unknown:
            raise PlaceError(f"unknown place fields {sorted(unknown)}")
        limits, command, paths = data.get("limits"), data.get("command"), data.get("paths")
        return cls(
            kind=str(data.get("kind", "host")),
            network=bool(data.get("network", False)),
            command=tuple(str(p) for p in _items("command", command)),
            paths=tuple(_pair(p) for p in _items("paths", paths)),
            limits=Limits.from_wire(limits) if isinstance(limits, Mapping) else Limits(),
        )

    # --- what it is ------------------------------------------------------------------------
    @property
    def policy_key(self) -> str:
        """ "host", or the kind and a digest of the whole policy ("sandbox-1a2b3c4d")."""
        if self.kind == "host":
            return "host"
        digest = hashlib.sha256(json.dumps(self.to_wire(), sort_keys=True).encode())
        return f"{self.kind}-{digest.hexdigest()[:8]}"

    def describe(self) -> str:
        """One line for health and errors."""
        if self.kind == "sandbox":
            return "sandbox (bubblewrap" + (", network on)" if self.network else ", network off)")
        if self.kind == "prefix":
            return f"prefix ({' '.join(self.command)[:60]})"
        return "host"

    # --- paths -----------------------------------------------------------------------------
    def inside(self, path: str) -> str:
        """The path a host path has inside the place (a sandbox binds at the same paths)."""
        for host, inner in self.paths:
            if path == host or path.startswith(host.rstrip("/") + "/"):
                return inner + path[len(host) :]
        return path

    def outside(self, path: str) -> str:
        """The host path of a path inside the place (`inside` reversed)."""
        for host, inner in self.paths:
            if path == inner or path.startswith(inner.rstrip("/") + "/"):
                return host + path[len(inner) :]
        return path
