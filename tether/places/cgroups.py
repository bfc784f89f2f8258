"""Cgroups for tether's limits: one per place (a conversation's processes together).

The one module for cgroup work in tether (places use it; capacity's per-resource hard
limits are meant to use it too), so there is one idea of where tether's cgroups live and
how a process enters one.

Where: beneath the cgroup the runtime itself is in (read from /proc/self/cgroup), so what
the machine gave the runtime still bounds everything below it, in a `tether` directory:
`<own>/tether/<name>`. Only a hierarchy this user may write to is used (delegated; root
in a container whose cgroupfs is writable): cgroup v1 (`memory`, `pids`, `cpu`, each its
own mount under /sys/fs/cgroup) or v2 (one unified mount, where its controllers are
enabled). Where none is delegated, `make` returns None and the limits that need one are
said to be missing (`missing`), never pretended.

How a process enters: `join_argv()` is a tiny /bin/sh prefix that writes its own pid into
each cgroup.procs and execs the command, so the process is in its cgroup before it runs a
line of its own, with no preexec_fn (which would make Popen fork instead of vfork: 10-17
ms per start from an actor, see tether.processes).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from tether.places.place import Limits

ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpu")
TETHER = "tether"
REAP_AGE = 60.0  # s an empty cgroup of tether's is left before another start removes it
CPU_SHARES_PER_WEIGHT = 1024 / 100  # v1 cpu.shares 1024 = v2 cpu.weight 100
# the shell prefix: join each cgroup named before "--", then exec the command
JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass(frozen=True)
class Cgroup:
    """One cgroup (a directory per v1 controller, or one v2 directory) with its limits."""

    name: str
    dirs: tuple[tuple[str, str], ...]  # (controller, directory); v2: one, controller ""
    version: int

    def join_argv(self) -> list[str]:
        procs = [os.path.join(d, "cgroup.procs") for _, d in self.dirs]
        return ["/bin/sh", "-c", JOIN_SCRIPT, "tether-join", *procs, "--"]

    def _read(self, controller: str, name: str) -> str:
        for owner, d in self.dirs:
            if owner in (controller, ""):
                with contextlib.suppress(OSError):
                    return Path(d, name).read_text()
        return ""

    def oom_kills(self) -> int:
        """How many processes the kernel killed here for going over the memory limit."""
        text = self._read("memory", "memory.events" if self.version == 2 else "memory.oom_control")
        return _field(text, "oom_kill")

    def pids_refused(self) -> int:
        """How many forks the pids limit refused here."""
        return _field(self._read("pids", "pids.events"), "max")

    def processes(self) -> list[int]:
        pids: set[int] = set()
        for _, d in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in Path(d, "cgroup.procs").read_text().split())
        return sorted(pids)

    def remove(self) -> bool:
        """Remove the cgroup if no process is left in it (True if it is gone)."""
        gone = True
        for _, d in self.dirs:
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                gone = False  # busy: another process of the place still runs in it
        return gone


def _field(text: str, name: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


def _own_paths() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                out[controller] = path
    return out


def _v1_parents() -> dict[str, Path]:
    own = _own_paths()
    parents = {}
    for controller in V1_CONTROLLERS:
        mount = ROOT / controller
        if controller in own and (mount / "cgroup.procs").exists():
            parent = mount / own[controller].lstrip("/")
            if os.access(parent, os.W_OK):
                parents[controller] = parent
    return parents


def _v2_parent() -> Path | None:
    own = _own_paths().get("")
    for mount in (ROOT, ROOT / "unified"):
        controllers = mount / "cgroup.controllers"
        if own is None or not controllers.exists() or (mount / "memory").exists():
            continue
        parent = mount / own.lstrip("/")
        enabled = (parent / "cgroup.controllers").read_text().split() if parent.exists() else []
        if {"memory", "pids"} <= set(enabled) and os.access(parent, os.W_OK):
            return parent
    return None


def _reap(base: Path) -> None:
    """Remove the empty cgroups under `base` left by owners that died (a minute old at
    least: one just made may not have its first process yet)."""
    with contextlib.suppress(OSError):
        for d in base.iterdir():
            with contextlib.suppress(OSError):
                if d.is_dir() and time.time() - d.stat().st_mtime > REAP_AGE:
                    if not (d / "cgroup.procs").read_text().strip():
                        d.rmdir()


_made: dict[tuple[str, Limits], Cgroup] = {}  # (this process's, while their dirs exist)


def make(name: str, limits: Limits) -> Cgroup | None:
    """The cgroup `name` (created, or the existing one) with `limits` set; None where no
    hierarchy is delegated to this user. `name` is one path component."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"a cgroup name is one path component, got {name!r}")
    known = _made.get((name, limits))
    if known is not None and all(os.path.isdir(d) for _, d in known.dirs):
        return known  # (a spawn of the same place again: nothing to write)
    made = _make(name, limits)
    if made is not None:
        _made[(name, limits)] = made
    return made


def _make(name: str, limits: Limits) -> Cgroup | None:
    parents = _v1_parents()
    if "memory" in parents and "pids" in parents:
        dirs = []
        for controller, parent in parents.items():
            _reap(parent / TETHER)
            d = parent / TETHER / name
            d.mkdir(parents=True, exist_ok=True)
            _set_v1(controller, d, limits)
            dirs.append((controller, str(d)))
        return Cgroup(name, tuple(dirs), 1)
    parent2 = _v2_parent()
    if parent2 is not None:
        base = parent2 / TETHER
        base.mkdir(exist_ok=True)
        _reap(base)
        with contextlib.suppress(OSError):
            (base / "cgroup.subtree_control").write_text("+memory +pids +cpu")
        d = base / name
        d.mkdir(exist_ok=True)
        _write(d / "memory.max", limits.memory_mb and limits.memory_mb * 2**20)
        _write(d / "memory.swap.max", limits.memory_mb and 0)
        _write(d / "pids.max", limits.pids)
        _write(d / "cpu.weight", limits.cpu_weight)
        return Cgroup(name, (("", str(d)),), 2)
    return None


def _set_v1(controller: str, d: Path, limits: Limits) -> None:
    if controller == "memory" and limits.memory_mb:
        _write(d / "memory.limit_in_bytes", limits.memory_mb * 2**20)
        # the swap limit too where the kernel accounts swap, so the limit is not just moved
        _write(d / "memory.memsw.limit_in_bytes", limits.memory_mb * 2**20)
    elif controller == "pids" and limits.pids:
        _write(d / "pids.max", limits.pids)
    elif controller == "cpu" and limits.cpu_weight:
        _write(d / "cpu.shares", int(limits.cpu_weight * CPU_SHARES_PER_WEIGHT))


def _write(path: Path, value: int | None) -> None:
    if value is not None:
        with contextlib.suppress(OSError):
            path.write_text(str(value))


def missing(limits: Limits) -> list[str]:
    """The limits of `limits` that no cgroup here can hold (for health and the README)."""
    if _v1_parents().keys() >= {"memory", "pids"} or _v2_parent() is not None:
        return []
    return [n for n in ("memory_mb", "pids", "cpu_weight") if getattr(limits, n) is not None]
