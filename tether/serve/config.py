"""What a `tether serve` may give its clients, as validated data.

A client never names a path or a place: it names one of the *workdirs* the operator listed
(`--workdir NAME=DIR`, or the "workdirs" of a JSON config file), and the conversation gets
that entry's directory, place and surface. So no request can open a conversation on `/`,
or on the host when the operator said sandbox: the allowlist is the only way in.

    {"host": "127.0.0.1", "port": 8765, "max_conversations": 16, "grace": 20,
     "workdirs": {"app": {"path": "/srv/app", "place": "sandbox", "surface": "default",
                          "approval": {"write": "ask", "exec": "ask"}}}}
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, cast

from tether.json_types import JSONObject, JSONValue
from tether.places import Place
from tether.tools.guardrails import Approval, make_policy
from tether.tools.spec import Surface, Tier

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ConfigError(ValueError):
    """A config value that cannot be served; the message names it and what to write."""


@dataclass(frozen=True)
class Workdir:
    """One entry of the allowlist: a directory, where its processes run, what it sees."""

    name: str
    path: Path
    place: str = "host"
    surface: Surface = Surface.DEFAULT
    # {"write": "ask"}: a card to the client's human (tier and decision as the config says)
    approval: Mapping[Tier | str, Approval | str] | None = None

    @classmethod
    def parse(cls, name: str, value: JSONValue) -> Workdir:
        if not NAME.match(name):
            raise ConfigError(
                f"workdir name {name!r} is not a plain name: use letters, digits, '_', '.', '-'"
            )
        spec: JSONValue = {"path": value} if isinstance(value, str) else value
        if not isinstance(spec, Mapping) or not isinstance(given := spec.get("path"), str):
            raise ConfigError(
                f'workdir {name!r}: give a path, or {{"path": DIR, "place": ..., '
                f'"surface": ...}}; got {value!r}'
            )
        path = Path(given).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(f"workdir {name!r}: {str(path)!r} is not a directory")
        place = str(spec.get("place", "host"))
        try:
            Place.parse(place)
        except ValueError as e:
            raise ConfigError(f"workdir {name!r}: {e}") from None
        surfaces = [s.value for s in Surface]
        surface = str(spec.get("surface", "default"))
        if surface not in surfaces:
            raise ConfigError(
                f"workdir {name!r}: surface {surface!r} is not one of {', '.join(surfaces)}"
            )
        given_approval = spec.get("approval")
        approval: dict[Tier | str, Approval | str] | None = None
        if given_approval is not None:
            if not isinstance(given_approval, Mapping):
                raise ConfigError(
                    f'workdir {name!r}: approval is a map of tier to decision, e.g. {{"write": '
                    f'"ask", "exec": "deny"}}; got {given_approval!r}'
                )
            try:  # (make_policy takes any value, and names the one it does not know as given)
                make_policy(cast("Mapping[Tier | str, Approval | str]", given_approval))
            except ValueError as e:
                raise ConfigError(f"workdir {name!r}: {e}") from None
            approval = {str(k): str(v) for k, v in given_approval.items()}
        return cls(name=name, path=path, place=place, surface=Surface(surface), approval=approval)


@dataclass(frozen=True)
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8765  # 0: a free port (printed, and in the serve file)
    workdirs: Mapping[str, Workdir] = field(default_factory=dict)
    max_conversations: int = 16
    grace: float = 20.0  # seconds a SIGTERM waits for calls in flight, then cancels them
    call_timeout: float = 600.0  # no tool call outlives this, whatever the client asked
    allowed_hosts: Sequence[str] = ()  # extra Host values (behind a proxy), beside loopback

    def __post_init__(self) -> None:
        if not self.workdirs:
            raise ConfigError(
                "no workdirs to serve: pass --workdir NAME=DIR (repeatable) or a --config "
                'file with "workdirs"; clients open conversations on those names only'
            )
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port {self.port} is not 0..65535")
        if self.max_conversations < 1:
            raise ConfigError(f"max_conversations must be >= 1, got {self.max_conversations}")
        if not self.grace > 0 or not self.call_timeout > 0:
            raise ConfigError("grace and call_timeout are seconds > 0")

    @property
    def loopback(self) -> bool:
        return self.host in LOOPBACK

    def workdir(self, name: str) -> Workdir:
        """The entry called `name`; the error lists the names there are."""
        try:
            return self.workdirs[name]
        except KeyError:
            raise ConfigError(
                f"no workdir {name!r} on this server; it serves {', '.join(sorted(self.workdirs))}"
                " (the operator's allowlist: a client cannot name a path)"
            ) from None


def load(
    path: str | os.PathLike[str] | None, pairs: Sequence[str], **overrides: str | float | None
) -> ServeConfig:
    """The config file (if any), then `--workdir NAME=DIR` pairs, then flags that were given."""
    data: JSONObject = {}
    if path is not None:
        try:
            loaded: JSONValue = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ConfigError(f"config {str(path)!r}: {e}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config {str(path)!r}: the top level must be a JSON object")
        data = loaded
    given = data.pop("workdirs", {}) or {}
    if not isinstance(given, dict):
        raise ConfigError(f"config: workdirs is a map of name to directory; got {given!r}")
    raw = dict(given)
    for pair in pairs:
        name, sep, directory = pair.partition("=")
        if not sep:
            raise ConfigError(f"--workdir takes NAME=DIR, e.g. app=/srv/app; got {pair!r}")
        raw[name] = directory
    known = {"host", "port", "max_conversations", "grace", "call_timeout", "allowed_hosts"}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(
            f"config: unknown keys {sorted(unknown)}; the keys are workdirs, "
            + ", ".join(sorted(known))
        )
    data.update({k: v for k, v in overrides.items() if v is not None})
    workdirs = {name: Workdir.parse(name, value) for name, value in raw.items()}
    return ServeConfig(workdirs=workdirs, **_settings(data))


class _Settings(TypedDict, total=False):
    """ServeConfig's fields but its workdirs, as a config file or the flags gave them."""

    host: str
    port: int
    max_conversations: int
    grace: float
    call_timeout: float
    allowed_hosts: Sequence[str]


def _settings(data: JSONObject) -> _Settings:
    """The settings in `data`, each of its field's type (ConfigError naming one that is not)."""
    out: _Settings = {}
    for key, value in data.items():
        bad = isinstance(value, bool)
        match key, value:
            case "host", str():
                out["host"] = value
            case "port", int() if not bad:
                out["port"] = value
            case "max_conversations", int() if not bad:
                out["max_conversations"] = value
            case "grace", int() | float() if not bad:
                out["grace"] = value
            case "call_timeout", int() | float() if not bad:
                out["call_timeout"] = value
            case "allowed_hosts", list() if all(isinstance(h, str) for h in value):
                out["allowed_hosts"] = [str(h) for h in value]
            case _:
                raise ConfigError(f"config: {key} must be {_WANTED[key]}; got {value!r}")
    return out


_WANTED = {
    "host": "a host name or address",
    "port": "a port number",
    "max_conversations": "a whole number",
    "grace": "seconds",
    "call_timeout": "seconds",
    "allowed_hosts": "a list of host names",
}
