"""Cgroups, v1 and v2: the one module that finds, reads, makes and removes them.

Places make one per place (a conversation's processes together: memory, pids, cpu
limits); capacity reads the charge, limit and OOM kills of the cgroup that boxes the tree
and makes a child with a memory ceiling for one resource. One `Cgroup` type serves both,
and one reading of /proc/self/mountinfo says where the controllers are mounted.

The two versions say the same things in different files:

    what               v2 (unified, Debian 12's default)    v1 (one mount per controller)
    charge             memory.current                       memory.usage_in_bytes minus
                                                            memory.stat total_inactive_file
    limit              memory.max ("max": none)             memory.limit_in_bytes (a huge
                                                            number: none), also the
                                                            ancestors' (hierarchical_...)
    OOM kills          memory.events "oom_kill N"           memory.oom_control "oom_kill N"
    refused forks      pids.events "max N"                  pids.events "max N"
    move a process     cgroup.procs                         cgroup.procs (of each controller)

The charge is what the kernel's OOM killer acts on: anonymous memory, page cache and tmpfs
of every process in the cgroup (v1's usage counts the inactive file cache the kernel drops
before it kills anything, hence the subtraction; it is what `docker stats` shows too).

Where: the mounts come from /proc/self/mountinfo (`cgroup2`, and `cgroup` mounts with the
`memory`, `pids` or `cpu` option), a process's cgroup from /proc/<pid>/cgroup (`0::/path`
for v2, `N:memory:/path` for v1). A v2 hierarchy without the memory controller does not
count for reading: the v1 memory controller then does. The readers take their root paths
as arguments, so a test can point them at a directory that looks like either version.

What tether makes goes beneath the cgroup the runtime itself is in, so what the machine
gave the runtime still bounds everything below it, in a `tether` directory:
`<own>/tether/<name>`. Only a hierarchy this user may write to is used (delegated; root
in a container whose cgroupfs is writable). Where none is, `make` returns None and the
limits that need one are said to be `missing`, never pretended.

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
from typing import Protocol

from tether.cgroups.mounts import (
    PROC,
    V1_CONTROLLERS,
    Mounts,
    _own_paths,
    parse_proc_cgroup,
    read_mounts,
)

TETHER = "tether"
REAP_AGE = 60.0  # s an empty cgroup of tether's is left before another start removes it
CPU_SHARES_PER_WEIGHT = 1024 / 100  # v1 cpu.shares 1024 = v2 cpu.weight 100
# the shell prefix: join each cgroup named before "--", then exec the command
JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
# v1 reports "no limit" as the largest page-aligned long; anything this large means none
_NO_LIMIT = 2**62
_MKDIR_TRIES = 3  # a racing reap may remove an empty `tether` base between our mkdirs


class CgroupError(OSError):
    """A cgroup file could not be read or written: the message names the file."""


class Wanted(Protocol):
    """The limits a cgroup is made with (tether.places.Limits has them; None: no limit)."""

    @property
    def memory_mb(self) -> int | None: ...
    @property
    def pids(self) -> int | None: ...
    @property
    def cpu_weight(self) -> int | None: ...


# --- one cgroup ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Cgroup:
    """One cgroup: `version` 1 or 2, `path` its directory (v1: the memory controller's),
    `others` the same cgroup's directories in v1's other controllers (pids, cpu)."""

    version: int
    path: Path
    others: tuple[tuple[str, Path], ...] = ()

    def __str__(self) -> str:
        return f"cgroup v{self.version} {self.path}"

    @property
    def dirs(self) -> list[Path]:
        return [self.path, *(d for _, d in self.others)]

    def _dir_of(self, controller: str) -> Path | None:
        if self.version == 2 or controller == "memory":
            return self.path
        return next((d for c, d in self.others if c == controller), None)

    # --- reading ---------------------------------------------------------------------
    def charge(self) -> int:
        """Bytes charged to it, as the OOM killer counts them (see the module doc)."""
        if self.version == 2:
            return int(self._read("memory.current"))
        usage = int(self._read("memory.usage_in_bytes"))
        inactive = self._stat().get("total_inactive_file", 0)
        return max(usage - inactive, 0)

    def limit(self) -> int | None:
        """Its memory limit in bytes, the tightest of its own and (v1) its ancestors';
        None if it has none."""
        if self.version == 2:
            raw = self._read("memory.max").strip()
            return None if raw == "max" else int(raw)
        limits = [int(self._read("memory.limit_in_bytes"))]
        hierarchical = self._stat().get("hierarchical_memory_limit")
        if hierarchical is not None:
            limits.append(hierarchical)
        tightest = min(limits)
        return None if tightest >= _NO_LIMIT else tightest

    def oom_kills(self) -> int:
        """How many processes the OOM killer killed in it (0 where the kernel does not say)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return self._count("memory", name, "oom_kill")

    def pids_refused(self) -> int:
        """How many forks its pids limit refused (0 where the kernel does not say)."""
        return self._count("pids", "pids.events", "max")

    def pids(self) -> list[int]:
        """The processes in it (in any of its directories)."""
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        return sorted(found)

    def join_argv(self) -> list[str]:
        """The prefix that makes a command start inside this cgroup (see the module doc)."""
        procs = [str(d / "cgroup.procs") for d in self.dirs]
        return ["/bin/sh", "-c", JOIN_SCRIPT, "tether-join", *procs, "--"]

    # --- writing ---------------------------------------------------------------------
    def child(self, name: str) -> Cgroup:
        """A child memory cgroup `name` (made if missing). CgroupError if this one is not
        ours to divide (no write access, or v2 without +memory in subtree_control)."""
        path = self.path / name
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            raise CgroupError(f"cannot make the cgroup {path}: {exc.strerror or exc}") from exc
        limit_file = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        if not (path / limit_file).exists():
            with contextlib.suppress(OSError):
                path.rmdir()
            raise CgroupError(
                f"{self} does not hand the memory controller to its children (no {limit_file} "
                f"in {path}): enable it with `echo +memory > {self.path}/cgroup.subtree_control`"
            )
        return Cgroup(self.version, path)

    def set_limit(self, limit: int) -> None:
        """A hard ceiling: past it the kernel reclaims, then kills inside this cgroup only."""
        if self.version == 2:
            self._write("memory.max", str(int(limit)))
            with contextlib.suppress(CgroupError):
                self._write("memory.swap.max", "0")  # (a ceiling that swaps is no ceiling)
        else:
            self._write("memory.limit_in_bytes", str(int(limit)))

    def add(self, pid: int) -> None:
        """Move process `pid` into this cgroup, in each of its directories (its children
        born later follow it)."""
        for d in self.dirs:
            _write_file(d / "cgroup.procs", str(int(pid)))

    def remove(self) -> bool:
        """Remove the cgroup if no process is left in it (True if it is gone), and the
        `tether` directory it was made in once that holds nothing any more."""
        gone = [_rmdir(d) for d in self.dirs]  # (each, even after one is busy)
        _retry_left()
        return all(gone)

    # --- files -----------------------------------------------------------------------
    def _read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError as exc:
            raise CgroupError(f"cannot read {self.path / name}: {exc.strerror or exc}") from exc

    def _write(self, name: str, value: str) -> None:
        _write_file(self.path / name, value)

    def _count(self, controller: str, name: str, key: str) -> int:
        d = self._dir_of(controller)
        with contextlib.suppress(OSError):
            if d is not None:
                return _field((d / name).read_text(), key)
        return 0

    def _stat(self) -> dict[str, int]:
        stats: dict[str, int] = {}
        for line in self._read("memory.stat").splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                stats[key] = int(value)
        return stats


# Ours, released, whose rmdir found them busy with no process listed: tasks still dying
# (killed with their group a moment ago). Tried again at the next remove or make here.
_left: set[Path] = set()


def _rmdir(d: Path) -> bool:
    try:
        d.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        if not _listed(d):
            _left.add(d)
        return False  # busy: another process of the place still runs in it
    _left.discard(d)
    if d.parent.name == TETHER:
        # (rmdir of a cgroup with a child or a process fails: this cannot take one in use;
        # a make racing it makes the base again, see _mkdir)
        with contextlib.suppress(OSError):
            d.parent.rmdir()
    return True


def _retry_left() -> None:
    for d in list(_left):
        _left.discard(d)
        if not _listed(d):
            _rmdir(d)


def _listed(d: Path) -> bool:
    """Does `d`'s cgroup.procs list a process (False where it cannot be read: gone)?"""
    try:
        return bool((d / "cgroup.procs").read_text().strip())
    except OSError:
        return False


def _write_file(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise CgroupError(f"cannot write {value!r} to {path}: {exc.strerror or exc}") from exc


def _field(text: str, name: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


# --- reading a process's cgroup -------------------------------------------------------
def of_process(
    pid: int | str = "self", proc: Path = PROC, mounts: Mounts | None = None
) -> Cgroup | None:
    """The memory cgroup of process `pid`: v2 where the unified hierarchy has the memory
    controller, else v1's; None where neither is mounted or readable."""
    try:
        v2_path, v1_path = parse_proc_cgroup((proc / str(pid) / "cgroup").read_text())
    except OSError:
        return None
    found = mounts if mounts is not None else read_mounts(proc)
    if found.v2 is not None and v2_path is not None:
        path = found.v2 / v2_path.lstrip("/")
        if (path / "memory.current").exists():
            return Cgroup(2, path)
    if found.v1_memory is not None and v1_path is not None:
        path = found.v1_memory / v1_path.lstrip("/")
        if (path / "memory.usage_in_bytes").exists():
            return Cgroup(1, path)
    return None


def writable(cgroup: Cgroup) -> bool:
    """May this process make children in `cgroup` (the first test of delegation)?"""
    return os.access(cgroup.path, os.W_OK)


# --- making tether's own --------------------------------------------------------------------
def _own() -> dict[str, str]:
    with contextlib.suppress(OSError):
        return _own_paths((PROC / "self" / "cgroup").read_text())
    return {}


def _v1_parents() -> dict[str, Path]:
    """controller -> the v1 cgroup this process is in, where this user may write to it."""
    own, found = _own(), read_mounts()
    parents = {}
    for controller in V1_CONTROLLERS:
        mount = found.v1.get(controller)
        if controller in own and mount is not None and (mount / "cgroup.procs").exists():
            parent = mount / own[controller].lstrip("/")
            if os.access(parent, os.W_OK):
                parents[controller] = parent
    return parents


def _v2_parent() -> Path | None:
    """The v2 cgroup this process is in, where it has memory and pids and we may write."""
    own, mount = _own().get(""), read_mounts().v2
    if own is None or mount is None:
        return None
    parent = mount / own.lstrip("/")
    with contextlib.suppress(OSError):
        enabled = set((parent / "cgroup.controllers").read_text().split())
        if {"memory", "pids"} <= enabled and os.access(parent, os.W_OK):
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


_made: dict[tuple[str, int | None, int | None, int | None, tuple[str, ...]], Cgroup] = {}


def make(name: str, limits: Wanted, controllers: tuple[str, ...] = V1_CONTROLLERS) -> Cgroup | None:
    """The cgroup `name` (created, or the existing one) with `limits` set; None where no
    hierarchy is delegated to this user. `name` is one path component; `controllers`: the
    v1 controllers to make it in (memory first; v2 has them all in one directory)."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"a cgroup name is one path component, got {name!r}")
    _retry_left()
    key = (name, limits.memory_mb, limits.pids, limits.cpu_weight, controllers)
    known = _made.get(key)
    if known is not None and all(d.is_dir() for d in known.dirs):
        return known  # (a spawn of the same place again: nothing to write)
    made = _make(name, limits, controllers)
    if made is not None:
        _made[key] = made
    return made


def _make(name: str, limits: Wanted, controllers: tuple[str, ...]) -> Cgroup | None:
    parents = _v1_parents()
    if "memory" in parents and "pids" in parents:
        dirs = []
        for controller in (c for c in V1_CONTROLLERS if c in parents and c in controllers):
            _reap(parents[controller] / TETHER)
            d = _mkdir(parents[controller] / TETHER, name)
            _set_v1(controller, d, limits)
            dirs.append((controller, d))
        return Cgroup(1, dirs[0][1], tuple(dirs[1:]))
    parent2 = _v2_parent()
    if parent2 is not None:
        _reap(parent2 / TETHER)
        d = _mkdir(parent2 / TETHER, name, subtree="+memory +pids +cpu")
        _write_limit(d / "memory.max", limits.memory_mb and limits.memory_mb * 2**20)
        _write_limit(d / "memory.swap.max", limits.memory_mb and 0)
        _write_limit(d / "pids.max", limits.pids)
        _write_limit(d / "cpu.weight", limits.cpu_weight)
        return Cgroup(2, d)
    return None


def _mkdir(base: Path, name: str, subtree: str = "") -> Path:
    """`base/name`, made with its base (v2: handing `subtree` to the base's children). The
    base is removed when it empties (Cgroup.remove), maybe between our two mkdirs: again."""
    for _ in range(_MKDIR_TRIES - 1):
        with contextlib.suppress(FileNotFoundError):
            return _mkdir_once(base, name, subtree)
    return _mkdir_once(base, name, subtree)


def _mkdir_once(base: Path, name: str, subtree: str) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    if subtree:
        with contextlib.suppress(OSError):
            (base / "cgroup.subtree_control").write_text(subtree)
    (base / name).mkdir(exist_ok=True)
    return base / name


def _set_v1(controller: str, d: Path, limits: Wanted) -> None:
    if controller == "memory" and limits.memory_mb:
        _write_limit(d / "memory.limit_in_bytes", limits.memory_mb * 2**20)
        # the swap limit too where the kernel accounts swap, so the limit is not just moved
        _write_limit(d / "memory.memsw.limit_in_bytes", limits.memory_mb * 2**20)
    elif controller == "pids" and limits.pids:
        _write_limit(d / "pids.max", limits.pids)
    elif controller == "cpu" and limits.cpu_weight:
        _write_limit(d / "cpu.shares", int(limits.cpu_weight * CPU_SHARES_PER_WEIGHT))


def _write_limit(path: Path, value: int | None) -> None:
    if value is not None:
        with contextlib.suppress(OSError):
            path.write_text(str(value))


def missing(limits: Wanted) -> list[str]:
    """The limits of `limits` that no cgroup here can hold (for health and the README)."""
    if _v1_parents().keys() >= {"memory", "pids"} or _v2_parent() is not None:
        return []
    return [n for n in ("memory_mb", "pids", "cpu_weight") if getattr(limits, n) is not None]
