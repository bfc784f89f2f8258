"""Cgroups, v1 and v2: the one package that finds, reads, makes and removes them.

Its parts: `core` (one `Cgroup`: charge, limit, OOM kills, refused forks, the join prefix;
made under `<own>/tether/`, removed once empty), `mounts` (where the hierarchies are, from
/proc/self/mountinfo and /proc/<pid>/cgroup) and `rlimits` (the fallback where no cgroup is
delegated). Everything is used as `tether.cgroups.<name>`.
"""

from tether.cgroups.core import (
    CPU_SHARES_PER_WEIGHT,
    JOIN_SCRIPT,
    REAP_AGE,
    TETHER,
    Cgroup,
    CgroupError,
    Wanted,
    _mkdir,  # (tests/capacity/test_cgroups.py races it)
    make,
    missing,
    of_process,
    writable,
)
from tether.cgroups.mounts import (
    PROC,
    V1_CONTROLLERS,
    Mounts,
    parse_mountinfo,
    parse_proc_cgroup,
    read_mounts,
)
from tether.cgroups.rlimits import RLIMITS_ONLY_ENV, rlimit_argv, rlimit_reason, rlimits_only

__all__ = [
    "CPU_SHARES_PER_WEIGHT",
    "JOIN_SCRIPT",
    "PROC",
    "REAP_AGE",
    "RLIMITS_ONLY_ENV",
    "TETHER",
    "V1_CONTROLLERS",
    "Cgroup",
    "CgroupError",
    "Mounts",
    "Wanted",
    "_mkdir",
    "make",
    "missing",
    "of_process",
    "parse_mountinfo",
    "parse_proc_cgroup",
    "read_mounts",
    "rlimit_argv",
    "rlimit_reason",
    "rlimits_only",
    "writable",
]
