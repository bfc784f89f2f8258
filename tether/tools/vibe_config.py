"""How a host configures vibe workers: a backend per tier, caps, limits and reaping.

    config = VibeConfig(backends={
        "fast": CommandBackend(["my-agent", "--print"]),          # brief as last argument
        "good": CommandBackend(["claude", "-p"], brief="stdin"),  # brief on stdin
    }, caps={"fast": Caps(seconds=600, tool_calls=100)})  # or CallableBackend("pkg.mod:fn")
    run = rt.open_run("conv", workdir=..., vibe=True, vibe_config=config)

Plain frozen data, each field checked when built (the bad value named in the error).
Re-exported by tether.tools.vibe_workers, which runs the workers.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tether.json_types import JSONValue
from tether.messages.worker_ops import BRIEF_MODES, CAP_NAMES

if TYPE_CHECKING:
    from tether.vibe_runner import WorkerIO

TIERS = ("fast", "good")


class VibeError(Exception):
    """A vibe call that cannot be done; the message says what to do instead."""


@dataclass(frozen=True)
class CommandBackend:
    """A worker is a command (an agent CLI): the brief as its last argument ("arg") or on
    its stdin ("stdin", then end of input)."""

    argv: Sequence[str]
    brief: str = "arg"
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise ValueError(
                f"CommandBackend.argv must be a non-empty list of str, got {self.argv!r}"
            )
        if self.brief not in BRIEF_MODES:
            raise ValueError(
                f"CommandBackend.brief must be one of {', '.join(BRIEF_MODES)}, got {self.brief!r}"
            )

    def command(self) -> tuple[list[str], str, dict[str, str]]:
        return list(self.argv), self.brief, dict(self.env)


@dataclass(frozen=True)
class CallableBackend:
    """A worker is a Python function `f(brief, worker) -> str`, run in its own process by
    tether.vibe_runner (so it can be killed like any worker). `target` is the function or
    "module:function"; it must be importable by that name (no lambdas, no closures)."""

    target: str | Callable[[str, WorkerIO], str]  # f(brief, worker) -> its result
    python: str = sys.executable

    def __post_init__(self) -> None:
        name = _import_name(self.target)
        module, sep, attr = name.partition(":")
        if not sep or not module or not attr:
            raise ValueError(
                f"CallableBackend.target must be 'module:function' or a module-level function, "
                f"got {self.target!r}"
            )

    def command(self) -> tuple[list[str], str, dict[str, str]]:
        package_root = str(Path(__file__).resolve().parents[2])  # so the runner imports this tether
        path = os.pathsep.join(p for p in (package_root, *sys.path) if p)
        argv = [self.python, "-m", "tether.vibe_runner", _import_name(self.target)]
        return argv, "arg", {"PYTHONPATH": path}


def _import_name(target: str | Callable[[str, WorkerIO], str]) -> str:
    if isinstance(target, str):
        return target
    module, qualname = getattr(target, "__module__", ""), getattr(target, "__qualname__", "")
    if not module or not qualname or "<" in qualname or not inspect.isfunction(target):
        raise ValueError(
            f"CallableBackend needs a module-level function, got {target!r}; pass "
            "'module:function' for anything else"
        )
    if module == "__main__":  # the worker's own process has another __main__
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        if spec is None or not spec.name:
            raise ValueError(
                f"CallableBackend: {qualname} is defined in a script run as __main__, which "
                "the worker's process cannot import; move it into a module (or run the "
                "script with python -m) and pass it, or 'module:function'"
            )
        module = spec.name  # `python -m pkg.mod`: importable as pkg.mod
    return f"{module}:{qualname}"


Backend = CommandBackend | CallableBackend


@dataclass(frozen=True)
class Caps:
    """What one run of a worker may use before it is stopped (None: no cap). tool_calls
    and tokens count only what the worker reports (tether.messages.worker_ops); a
    backend that reports nothing is capped by time and output alone."""

    # (numbers: a spawn's lowered caps come as JSON numbers, and every cap is checked as one)
    seconds: float | None = 1800.0  # wall-clock, from the start of the run
    output_chars: float | None = 4_000_000  # chars printed (stdout)
    tool_calls: float | None = 500
    tokens: float | None = 5_000_000

    def __post_init__(self) -> None:
        for name in CAP_NAMES:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise ValueError(f"Caps.{name} must be a number > 0 or None, got {value!r}")

    def limits(self) -> dict[str, float]:
        return {n: float(getattr(self, n)) for n in CAP_NAMES if getattr(self, n) is not None}

    def lowered(self, asked: Mapping[str, JSONValue], tier: str) -> Caps:
        """These caps with those a spawn asks for; a spawn may lower a cap, not raise it."""
        values: dict[str, float] = {}
        for name, value in asked.items():
            if name not in CAP_NAMES:
                raise VibeError(f"unknown cap {name!r}; caps: {', '.join(CAP_NAMES)}")
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise VibeError(f"cap {name} must be a number > 0, got {value!r}")
            limit = getattr(self, name)
            if limit is not None and value > limit:
                raise VibeError(
                    f"cap {name} {value:g} is above the {tier} tier's {limit:g}; ask for at "
                    f"most {limit:g} (the host sets the tier's caps in VibeConfig.caps)"
                )
            values[name] = value
        return dataclasses.replace(self, **values)


DEFAULT_CAPS = Caps()


@dataclass(frozen=True)
class VibeConfig:
    """Backends per tier ("fast", "good"), caps and reaping. max_per_runtime counts the
    live workers of every run of the runtime. caps: per tier (DEFAULT_CAPS for a tier not
    named). isolated: whether a spawn that does not say gets its own view of the
    workspace; None (default) means yes where the workspace is a git work tree."""

    backends: Mapping[str, Backend]
    max_per_run: int = 4
    max_per_runtime: int = 8
    reap_after: float = 600.0  # s a finished worker stays listed, then its actor is reaped
    default_tier: str = "fast"
    caps: Mapping[str, Caps] = field(default_factory=dict)
    isolated: bool | None = None

    def __post_init__(self) -> None:
        for tier, backend in self.backends.items():
            if tier not in TIERS:
                raise ValueError(f"VibeConfig: unknown tier {tier!r}; tiers: {', '.join(TIERS)}")
            if not isinstance(backend, CommandBackend | CallableBackend):
                raise ValueError(f"VibeConfig: tier {tier!r} has no backend: {backend!r}")
        for tier, caps in self.caps.items():
            if tier not in TIERS or not isinstance(caps, Caps):
                raise ValueError(
                    f"VibeConfig.caps maps a tier ({', '.join(TIERS)}) to Caps(...), got "
                    f"{tier!r}: {caps!r}"
                )
        if self.max_per_run < 1 or self.max_per_runtime < 1:
            raise ValueError("VibeConfig: max_per_run and max_per_runtime must be >= 1")
        if self.reap_after <= 0:
            raise ValueError(f"VibeConfig.reap_after must be > 0 seconds, got {self.reap_after!r}")
