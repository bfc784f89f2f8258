"""`wrap`: the command to exec so that a process runs in its place.

Every spawn of a conversation's process goes through here (tether.actors.process,
tether.kernels.launch): the owner says what it wants to run (argv, env, cwd), which
directories of its own the process needs (a kernel's socket dir, read-write), and gets
back the argv and env to hand to Popen. The owner keeps doing what it always does with
the process (own session, parent-death signal, `kill_tree` of its pid): the wrapping keeps
that true.

- host: unchanged.
- sandbox: `/bin/sh` joining the place's cgroup (`tether.cgroups`, where one is
  delegated), exec'ing bwrap (`tether.places.sandbox`), whose init is pid 1 of the place's
  pid namespace. Killing the tree of the spawned pid kills bwrap and its init, and the
  kernel then kills everything left in that namespace: no process survives its owner
  (and `--die-with-parent` covers an owner that was SIGKILLed). Where no cgroup is
  delegated (or TETHER_PLACE_RLIMITS_ONLY=1), the limits are rlimits instead, set by a
  `prlimit` inside bwrap, before the program: what they can and cannot hold is said at
  `tether.cgroups.rlimit_argv`.
- prefix: the place's command, then `env -C <cwd inside> VAR=value... argv` with the
  paths mapped (`Place.inside`); what the environment does with signals is its own (a
  container's `exec` session dies with the command it ran). The command starts in the
  place's cgroup, where one is delegated: that bounds what it starts as its children (a
  bubblewrap or chroot entry: `tether.places.rootfs`); a container's `exec` runs in the
  container's own cgroup, which its own limits bound. No rlimit fallback there (prlimit
  would have to be in the environment).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tether import cgroups
from tether.cgroups import Cgroup
from tether.places import sandbox
from tether.places.place import Place, PlaceError
from tether.private_dirs import default_state_dir

PROBE_TIMEOUT = 20.0  # s for `true` through a prefix command at open_run (a container's exec)


class GroupHold:
    """A shared lock on a place instance's cgroup, taken by each of its processes before the
    cgroup is made and kept until that process ended: the last one out removes the cgroup,
    and nobody removes it between another process's make and its join (a run's workers
    started back to back from two actors: "cgroup.procs: Directory nonexistent"). A flock
    on a file of the state dir: it goes with the holder, killed or not."""

    def __init__(self, name: str) -> None:
        holds = default_state_dir() / "cgroup-holds"
        holds.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = holds / f"{name}.lock"
        self.fd = self._open()
        fcntl.flock(self.fd, fcntl.LOCK_SH)  # (waits only while a last one out removes it)

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def leave(self, last: Callable[[], object]) -> None:
        """Let go; if no other process of the instance holds it, call `last` (the removal)
        under an exclusive lock, so that nobody joins the cgroup meanwhile."""
        if self.fd < 0:
            return
        os.close(self.fd)
        self.fd = self._open()
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # another process of the instance runs, or is about to join: it removes
        else:
            last()
        finally:
            os.close(self.fd)
            self.fd = -1


@dataclass(frozen=True)
class Wrapped:
    """A command ready to exec in its place, and what its owner asks of it afterwards."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    place: Place
    cgroup: Cgroup | None = field(default=None, compare=False)
    # the cgroup's counts when this process started (a run's processes share one cgroup)
    baseline: tuple[int, int] = (0, 0)
    rlimits: bool = False  # no cgroup: the place's limits are rlimits (cgroups.rlimit_argv)
    hold: GroupHold | None = field(default=None, compare=False)  # on the shared cgroup

    def exit_reason(self, code: int | None = None) -> str:
        """Why the place may have ended the process ("" if no limit of the place was hit);
        code: the program's return code (`returncode`), which says an rlimit's signal."""
        if self.rlimits:
            return cgroups.rlimit_reason(self.place.limits, self.place.limits.tmp_mb, code)
        if self.cgroup is None:
            return ""
        limits = self.place.limits
        if self.cgroup.oom_kills() > self.baseline[0]:
            return (
                f"it went over its place's memory limit ({limits.memory_mb} MiB) and the "
                "kernel killed it"
            )
        if self.cgroup.pids_refused() > self.baseline[1]:
            return f"its place refused new processes over its limit of {limits.pids}"
        return ""

    def returncode(self, code: int | None) -> int | None:
        """The wrapped program's own return code (negative: killed by that signal) from the
        spawned process's: bubblewrap exits 128 + N for a program killed by signal N."""
        if self.place.kind == "sandbox" and code is not None and 128 < code < 128 + 65:
            return 128 - code
        return code

    def release(self) -> None:
        """The process ended: remove its place's cgroup if nothing else of the place runs
        in it or is about to join it."""
        if self.cgroup is None:
            return
        if self.hold is None:
            self.cgroup.remove()
        else:
            self.hold.leave(self.cgroup.remove)


def wrap(
    place: Place,
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None = None,
    workspace: str | None = None,
    rw: Sequence[str] = (),
    ro: Sequence[str] = (),
    group: str = "",
    workspace_from: str | None = None,
) -> Wrapped:
    """The command that runs `argv` (in `cwd`, with `env`, default ours) in `place`.

    workspace: the conversation's directory (read-write in a sandbox); rw: directories of
    this process's own, bound read-write (a sandbox) at their own path; ro: toolchains
    beyond the runtime's own. group: the place instance (a run id) whose processes share
    one cgroup with the place's limits (sandbox and prefix; "" for none). workspace_from:
    a sandbox binds this directory at the workspace's path (an isolated worker's copy)."""
    if not argv:
        raise PlaceError("nothing to run: the argv is empty")
    environ = dict(os.environ if env is None else env)
    if place.kind == "host":
        return Wrapped(list(argv), environ, cwd, place)
    if place.kind == "prefix":
        return _prefix(place, argv, cwd, environ, group)
    program = _resolve(argv[0], environ)
    sandbox.refuse_links_out(program, workspace)
    cgroup, hold = _group_cgroup(place, group)
    try:  # no cgroup delegated: rlimits, set inside the sandbox (RLIMIT_NPROC is per userns)
        fallback = _rlimits(place) if group and cgroup is None else []
        wrapped = sandbox.bwrap_argv(
            place,
            [*fallback, program, *argv[1:]],
            cwd,
            workspace,
            rw=[*rw],
            ro=[
                *ro,
                *_program_roots(argv[0]),
                *(sandbox.toolchain_roots([program]) if fallback else []),
            ],
            workspace_from=workspace_from,
            given_tmp=environ.get("TMPDIR"),
        )
        inner_env = sandbox.sandbox_env(environ, rw=[p for p in (workspace, *rw) if p])
        if cgroup is None:
            return Wrapped(wrapped, inner_env, cwd, place, rlimits=bool(fallback))
        baseline = (cgroup.oom_kills(), cgroup.pids_refused())
        joined = [*cgroup.join_argv(), *wrapped]
        return Wrapped(joined, inner_env, cwd, place, cgroup, baseline, hold=hold)
    except BaseException:
        if hold is not None:
            hold.leave(lambda: None)  # (nothing of ours started: the next one out removes)
        raise


def _group_cgroup(place: Place, group: str) -> tuple[Cgroup | None, GroupHold | None]:
    """The cgroup of place instance `group` (made if missing) and this process's hold on
    it; (None, None) where there is none (no group, or none delegated)."""
    if not group or cgroups.rlimits_only():
        return None, None
    name = cgroup_name(group)
    hold = GroupHold(name)  # (before the make: a last one out cannot remove it under us)
    try:
        cgroup = cgroups.make(name, place.limits)
    except BaseException:
        hold.leave(lambda: None)
        raise
    if cgroup is None:
        hold.leave(lambda: None)
        return None, None
    return cgroup, hold


def check(place: Place) -> Place:
    """`place`, once it is seen to be able to start here; else a PlaceError naming what is
    missing (bubblewrap, user namespaces, a network helper)."""
    if place.kind == "sandbox":
        sandbox.check_available()
        if place.network:
            sandbox.bwrap_argv(place, ["true"], "/", None)  # (says what network on lacks)
    elif place.kind == "prefix":
        if shutil.which(place.command[0]) is None:
            raise PlaceError(
                f"the prefix place's command {place.command[0]!r} is not on PATH: install it, "
                "or give its full path"
            )
        problem = _enters(place.command)
        if problem:
            raise PlaceError(
                f"the prefix place's command does not enter its environment here: `true` "
                f"through it failed ({problem}); fix the command or its paths"
            )
    return place


@functools.lru_cache(maxsize=64)
def _enters(command: tuple[str, ...]) -> str:
    """Empty if `true` runs through the prefix command, else why not (once per command:
    a container that is not running, a root without a mount point for a mapped path)."""
    try:
        done = subprocess.run(
            [*command, "env", "true"], capture_output=True, timeout=PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return ""
    said = done.stderr.decode("utf-8", "replace").strip()[-400:]
    return said or f"exit status {done.returncode}"


def _rlimits(place: Place) -> list[str]:
    try:
        return cgroups.rlimit_argv(place.limits, place.limits.tmp_mb)
    except cgroups.CgroupError as exc:
        raise PlaceError(str(exc)) from exc


def cgroup_name(group: str) -> str:
    """A cgroup directory name for a place instance (a run id may hold any character)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", group)[:40].lstrip(".")
    return f"{safe}-{hashlib.sha256(group.encode()).hexdigest()[:8]}"


def _resolve(program: str, env: Mapping[str, str]) -> str:
    if os.sep in program:
        return os.path.abspath(program)
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        raise PlaceError(f"{program!r} is not on PATH, so it cannot be run in the place")
    return found


def _program_roots(program: str) -> list[str]:
    """An interpreter given by a venv path (…/.venv/bin/python -> a base elsewhere)."""
    return sandbox.toolchain_roots([program]) if os.sep in program else []


def _prefix(
    place: Place, argv: Sequence[str], cwd: str, env: dict[str, str], group: str
) -> Wrapped:
    state = str(default_state_dir())
    given = {
        k: v
        for k, v in env.items()
        if os.environ.get(k) != v and not (state in v and place.inside(v) == v)
    }  # (not the paths into the runtime's state dir the environment has no mapping of)
    assigns = [f"{k}={_map_value(place, v)}" for k, v in sorted(given.items())]
    inner = [_map_value(place, a) for a in argv]
    command = [*place.command, "env", "-C", place.inside(cwd), *assigns, *inner]
    cgroup, hold = _group_cgroup(place, group)
    if cgroup is None:
        return Wrapped(command, dict(os.environ), cwd, place)
    baseline = (cgroup.oom_kills(), cgroup.pids_refused())
    joined = [*cgroup.join_argv(), *command]
    return Wrapped(joined, dict(os.environ), cwd, place, cgroup, baseline, hold=hold)


def _map_value(place: Place, value: str) -> str:
    return place.inside(value) if os.path.isabs(value) else value
