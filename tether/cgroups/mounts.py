"""Where the cgroup hierarchies are: the mounts of cgroup2 and of the v1 controllers
tether uses (from /proc/self/mountinfo), and a process's cgroup paths (from
/proc/<pid>/cgroup: `0::/path` for v2, `N:memory:/path` for v1).

A part of `tether.cgroups`; the readers take their texts or root paths as arguments, so a
test can point them at a directory that looks like either version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
V1_CONTROLLERS = ("memory", "pids", "cpu")


@dataclass(frozen=True)
class Mounts:
    """Where the hierarchies are mounted: the cgroup2 one (None: not mounted) and the v1
    controllers tether uses (controller -> mount point; absent: not mounted)."""

    v2: Path | None
    v1: Mapping[str, Path] = field(default_factory=dict)

    @property
    def v1_memory(self) -> Path | None:
        return self.v1.get("memory")


def parse_mountinfo(text: str) -> Mounts:
    """The cgroup2 mount and the v1 controllers' mounts, from /proc/self/mountinfo."""
    v2: Path | None = None
    v1: dict[str, Path] = {}
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
        elif fstype == "cgroup":
            for controller in V1_CONTROLLERS:
                if controller in options:
                    v1.setdefault(controller, Path(mount_point))
    return Mounts(v2, v1)


def read_mounts(proc: Path = PROC) -> Mounts:
    """This machine's mounts (none where /proc cannot be read)."""
    try:
        return parse_mountinfo((proc / "self" / "mountinfo").read_text())
    except OSError:
        return Mounts(None)


def parse_proc_cgroup(text: str) -> tuple[str | None, str | None]:
    """(v2 path, v1 memory path) of a process, from /proc/<pid>/cgroup."""
    own = _own_paths(text)
    return own.get(""), own.get("memory")


def _own_paths(text: str) -> dict[str, str]:
    """controller (or "" for v2) -> the cgroup path, from a /proc/<pid>/cgroup text."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            out[""] = path
        else:
            for controller in controllers.split(","):
                out.setdefault(controller, path)
    return out
