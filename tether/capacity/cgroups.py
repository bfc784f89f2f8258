"""Memory cgroups, v1 and v2: find a process's, read its charge, limit and OOM kills, make
a child with a ceiling of its own. The one module that reads or writes cgroup files.

The two versions say the same things in different files:

    what               v2 (unified, Debian 12's default)    v1 (the memory controller)
    charge             memory.current                       memory.usage_in_bytes minus
                                                            memory.stat total_inactive_file
    limit              memory.max ("max": none)             memory.limit_in_bytes (a huge
                                                            number: none), also the
                                                            ancestors' (hierarchical_...)
    OOM kills          memory.events "oom_kill N"           memory.oom_control "oom_kill N"
    move a process     cgroup.procs                         cgroup.procs

The charge is what the kernel's OOM killer acts on: anonymous memory, page cache and tmpfs
of every process in the cgroup (v1's usage counts the inactive file cache the kernel drops
before it kills anything, hence the subtraction; it is what `docker stats` shows too).

Where the cgroup files live comes from /proc/self/mountinfo (`cgroup2` mounts, and
`cgroup` mounts with the `memory` option), and a process's cgroup from /proc/<pid>/cgroup
(`0::/path` for v2, `N:memory:/path` for v1). A v2 hierarchy without the memory
controller (no memory.current) does not count: the v1 memory controller then does.
Everything takes its root paths as arguments, so a test can point it at a directory that
looks like either version.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

# v1 reports "no limit" as the largest page-aligned long; anything this large means none
_NO_LIMIT = 2**62


class CgroupError(OSError):
    """A cgroup file could not be read or written: the message names the file."""


@dataclass(frozen=True)
class Mounts:
    """Where the hierarchies are mounted (None: not mounted)."""

    v2: Path | None
    v1_memory: Path | None


def parse_mountinfo(text: str) -> Mounts:
    """The cgroup2 mount and the v1 memory controller's mount, from /proc/self/mountinfo."""
    v2: Path | None = None
    v1: Path | None = None
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point, fstype, options = fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup2" and v2 is None:
            v2 = Path(mount_point)
        elif fstype == "cgroup" and "memory" in options and v1 is None:
            v1 = Path(mount_point)
    return Mounts(v2, v1)


def parse_proc_cgroup(text: str) -> tuple[str | None, str | None]:
    """(v2 path, v1 memory path) of a process, from /proc/<pid>/cgroup."""
    v2: str | None = None
    v1: str | None = None
    for line in text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v2, v1


@dataclass(frozen=True)
class Cgroup:
    """One memory cgroup: `version` 1 or 2, `path` its directory."""

    version: int
    path: Path

    def __str__(self) -> str:
        return f"cgroup v{self.version} {self.path}"

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
        try:
            text = self._read(name)
        except CgroupError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def pids(self) -> list[int]:
        return [int(p) for p in self._read("cgroup.procs").split()]

    # --- writing (a child of our own) ------------------------------------------------
    def child(self, name: str) -> Cgroup:
        """A child cgroup `name` (made if missing). CgroupError if this one is not ours to
        divide (not delegated: no write access, or v2 without +memory in subtree_control)."""
        path = self.path / name
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            raise CgroupError(f"cannot make the cgroup {path}: {exc.strerror or exc}") from exc
        made = Cgroup(self.version, path)
        limit_file = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        if not (path / limit_file).exists():
            with contextlib.suppress(OSError):
                path.rmdir()
            raise CgroupError(
                f"{self} does not hand the memory controller to its children (no {limit_file} "
                f"in {path}): enable it with `echo +memory > {self.path}/cgroup.subtree_control`"
            )
        return made

    def set_limit(self, limit: int) -> None:
        """A hard ceiling: past it the kernel reclaims, then kills inside this cgroup only."""
        if self.version == 2:
            self._write("memory.max", str(int(limit)))
            with contextlib.suppress(CgroupError):
                self._write("memory.swap.max", "0")  # (a ceiling that swaps is no ceiling)
        else:
            self._write("memory.limit_in_bytes", str(int(limit)))

    def add(self, pid: int) -> None:
        """Move process `pid` into this cgroup (its children born later follow it)."""
        self._write("cgroup.procs", str(int(pid)))

    def remove(self) -> None:
        """Remove this (empty) cgroup; a no-op if it is gone already."""
        with contextlib.suppress(FileNotFoundError):
            self.path.rmdir()

    # --- files -----------------------------------------------------------------------
    def _read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError as exc:
            raise CgroupError(f"cannot read {self.path / name}: {exc.strerror or exc}") from exc

    def _write(self, name: str, value: str) -> None:
        try:
            (self.path / name).write_text(value)
        except OSError as exc:
            raise CgroupError(
                f"cannot write {value!r} to {self.path / name}: {exc.strerror or exc}"
            ) from exc

    def _stat(self) -> dict[str, int]:
        stats: dict[str, int] = {}
        for line in self._read("memory.stat").splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                stats[key] = int(value)
        return stats


def of_process(
    pid: int | str = "self", proc: Path = Path("/proc"), mounts: Mounts | None = None
) -> Cgroup | None:
    """The memory cgroup of process `pid`: v2 where the unified hierarchy has the memory
    controller, else v1's; None where neither is mounted or readable."""
    try:
        v2_path, v1_path = parse_proc_cgroup((proc / str(pid) / "cgroup").read_text())
        if mounts is None:
            mounts = parse_mountinfo((proc / "self" / "mountinfo").read_text())
    except OSError:
        return None
    if mounts.v2 is not None and v2_path is not None:
        path = mounts.v2 / v2_path.lstrip("/")
        if (path / "memory.current").exists():
            return Cgroup(2, path)
    if mounts.v1_memory is not None and v1_path is not None:
        path = mounts.v1_memory / v1_path.lstrip("/")
        if (path / "memory.usage_in_bytes").exists():
            return Cgroup(1, path)
    return None


def writable(cgroup: Cgroup) -> bool:
    """May this process make children in `cgroup` (the first test of delegation)?"""
    return os.access(cgroup.path, os.W_OK)
