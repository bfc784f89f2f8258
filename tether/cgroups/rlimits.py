"""The fallback where no cgroup is delegated: a place's limits as rlimits, per process.

A part of `tether.cgroups`: where `missing` says no cgroup can hold a place's limits (or
TETHER_PLACE_RLIMITS_ONLY=1 asks for this), tether.places.wrap starts the place's command
under a `prlimit` prefix instead, and reads a return code for the limit that ended it.
"""

from __future__ import annotations

import os
import shutil
import signal

from tether.cgroups.core import CgroupError, Wanted

# "1": places use rlimits even where a cgroup is delegated (to test the fallback, or where an
# operator wants no cgroups made); capacity's ceilings are not affected
RLIMITS_ONLY_ENV = "TETHER_PLACE_RLIMITS_ONLY"


def rlimits_only() -> bool:
    return os.environ.get(RLIMITS_ONLY_ENV) == "1"


def rlimit_argv(limits: Wanted, file_mb: int | None) -> list[str]:
    """The `prlimit` prefix that holds `limits` per process where no cgroup can (what each
    rlimit can and cannot do, measured on Linux 6.x):

    - memory_mb -> RLIMIT_DATA (private writable memory: heap, anonymous maps, thread
      stacks), per process, not per place: an allocation past it fails (Python's
      MemoryError) instead of an OOM kill. Not RLIMIT_AS: V8 and Go reserve far more
      address space than they use, and would not start under it.
    - pids -> RLIMIT_NPROC, which the kernel counts per uid *per user namespace*: inside
      a sandbox (its own userns, uid 1000) it counts that sandbox's processes only, so
      the prefix must run inside it (its parent's count stays unlimited). It is not
      enforced where the uid outside is root: the kernel exempts uid 0's user, and a
      sandbox started by root maps its uid to root outside (measured: 60 of 60 forks
      with a limit of 20). As a plain user it holds (refused after 18 of 20).
    - file_mb -> RLIMIT_FSIZE: the largest file one process may write (SIGXFSZ past it),
      anywhere it may write, not the total of its files (the tmpfs size bounds /tmp).
    - cpu_weight -> nothing: RLIMIT_CPU is a budget of CPU seconds that ends the process
      (SIGXCPU, then SIGKILL), not a share of the machine; a busy loop keeps its core.
      (Each place's processes run in a session of their own, which the scheduler's
      autogroup already weighs as one against the others, where it is enabled.)
    """
    prlimit = shutil.which("prlimit", path=os.defpath + ":/usr/bin:/bin")
    if prlimit is None:
        raise CgroupError(
            "no cgroup is delegated here and the rlimit fallback needs prlimit (util-linux), "
            "which is not on PATH: install util-linux, or delegate a cgroup to this user"
        )
    out = [prlimit]
    if limits.memory_mb:
        out.append(f"--data={limits.memory_mb * 2**20}")
    if limits.pids:
        out.append(f"--nproc={limits.pids}")
    if file_mb:
        out.append(f"--fsize={file_mb * 2**20}")
    return [*out, "--"]


def rlimit_reason(limits: Wanted, file_mb: int | None, code: int | None) -> str:
    """Why a process under `rlimit_argv` may have ended, from its return code ("" if no
    rlimit says so: a refused fork or allocation is the program's own error to report)."""
    if code == -signal.SIGXFSZ and file_mb:
        return f"it wrote a file past its place's file size limit ({file_mb} MiB, an rlimit)"
    return ""
