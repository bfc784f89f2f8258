"""`OwnedProcess`: one process tether started and owns, wherever it runs.

The one place where a resource's process is started in its place, watched, told about and
ended, for every owner: `ProcessActor` (language servers, checkers, git, adapters,
workers), the kernel handle, and the kernel a spare pool hands over.

- It starts in its own session (one process group to signal), dies with its starter
  (parent-death signal) unless asked otherwise, and enters its place (`tether.places.wrap`:
  unchanged on the host, bubblewrap in a sandbox, the command prefix of an environment).
- Its end is watched through a pidfd, readable once it exited: no /proc polling, no
  thread. A process handed over from another (a spare kernel, not our child) is watched
  the same way; only our own child is reaped here.
- How it ended is told one way: the program's own status (through bubblewrap's), and the
  place's limit where one ended it (its memory, its pids).
- It is ended without waiting on its cooperation (SIGKILL to the whole tree), and its
  place's cgroup is released once nothing of the place runs.

What differs between owners stays with them: pipes or a log file, the protocol spoken.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO

import psutil

from tether.places import Place, Wrapped, wrap
from tether.processes import descendants, kill_tree, popen_dying_with_us

# s given to the kernel to end a SIGKILLed child so that it is reaped here (an init that
# reaps nothing may adopt it otherwise); never a wait on the process's cooperation
REAP_WAIT = 0.05

Stream = int | IO[bytes] | None  # what Popen takes for stdin, stdout or stderr


class OwnedProcess:
    """One started process: its pid, a pidfd on it, the place it entered."""

    def __init__(
        self,
        pid: int,
        popen: subprocess.Popen[bytes] | None = None,
        wrapped: Wrapped | None = None,
        program: str = "",
    ) -> None:
        self.pid = pid
        self.popen = popen  # None: not our child (handed over), so not reaped here
        self.wrapped = wrapped  # how it entered its place (None: handed over)
        self.program = program  # what it runs, for messages (`basename(argv[0])`)
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except OSError:  # (gone already, or a kernel without pidfd: poll by /proc)
            self.pidfd = None

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str] | None = None,
        place: Place | None = None,
        workspace: str | None = None,
        rw: Sequence[str] = (),
        ro: Sequence[str] = (),
        group: str = "",
        workspace_from: str | None = None,
        stdin: Stream = subprocess.DEVNULL,
        stdout: Stream = None,
        stderr: Stream = None,
        die_with_us: bool = True,
    ) -> OwnedProcess:
        """Start `argv` in `place` (default the host; see `tether.places.wrap` for
        workspace, rw, ro, group and workspace_from) in its own session. die_with_us:
        SIGKILL when the starting process dies (a spare kernel outlives its pool)."""
        wrapped = wrap(
            place or Place.host(),
            argv,
            cwd=cwd,
            env=env,
            workspace=workspace,
            rw=rw,
            ro=ro,
            group=group,
            workspace_from=workspace_from,
        )
        start = popen_dying_with_us if die_with_us else subprocess.Popen
        try:
            popen = start(
                wrapped.argv,
                cwd=wrapped.cwd,
                env=wrapped.env,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            wrapped.release()
            raise
        return cls(popen.pid, popen, wrapped, os.path.basename(argv[0]) if argv else "")

    @property
    def place(self) -> Place:
        return self.wrapped.place if self.wrapped is not None else Place.host()

    def poll(self) -> int | None:
        """The return code of the spawned process once it ended (our child only)."""
        return self.popen.poll() if self.popen is not None else None

    def exited(self) -> bool:
        """It has ended (its pidfd is readable: no /proc read, no wait)."""
        if self.pidfd is None:
            return not self.alive()
        return bool(select.select([self.pidfd], [], [], 0)[0])

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def owned_pids(self) -> list[int]:
        """Its pid and every descendant's, while it runs."""
        if self.popen is not None and self.popen.returncode is not None:
            return []
        try:
            return [self.pid, *(c.pid for c in descendants(self.pid))]
        except psutil.NoSuchProcess:
            return []

    def signal_group(self, sig: int = signal.SIGKILL) -> bool:
        """Send `sig` to its process group; False if it has ended already."""
        if not self.alive():
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        return True

    def how_it_ended(self, code: int | None) -> str:
        """'was killed by signal N' / 'exited with code N' (the program's own, through its
        place's wrapper), and the place's limit where one ended it."""
        if self.wrapped is not None:
            code = self.wrapped.returncode(code)
        if code is None:
            how = "died"
        elif code < 0:
            how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        limit = self.wrapped.exit_reason(code) if self.wrapped is not None else ""
        return f"{how}: {limit}" if limit else how

    def limits_refused(self) -> int:
        """How many forks its place's cgroup refused so far (0 without a cgroup)."""
        cgroup = self.wrapped.cgroup if self.wrapped is not None else None
        return cgroup.pids_refused() if cgroup is not None else 0

    def kill(self) -> None:
        """SIGKILL to its whole tree at once, never waiting on its cooperation; our own
        child is reaped if the kernel ended it within REAP_WAIT."""
        if self.alive():
            kill_tree(self.pid, grace=0.0, wait=False)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=REAP_WAIT)

    def close_pidfd(self) -> None:
        pidfd, self.pidfd = self.pidfd, None
        if pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(pidfd)

    def release_place(self) -> None:
        """It ended: its place's cgroup goes if nothing else of the place runs in it."""
        wrapped, self.wrapped = self.wrapped, None
        if wrapped is not None:
            wrapped.release()

    def close(self) -> None:
        """Kill it, stop watching it, release its place."""
        self.kill()
        self.close_pidfd()
        self.release_place()
