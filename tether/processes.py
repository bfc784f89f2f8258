"""OS processes of a runtime: find them, measure them, kill them (psutil, bounded waits).

Shared by the actors (a ProcessActor kills its subprocess tree; a supervisor kills what a
crashed child owned; every actor's watchdog checks the host) and the host side (shutdown,
the port-file clean-up). A zombie counts as gone everywhere: once the parent of a killed
process is gone too, nobody may reap it soon, and waiting for it would block.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TypedDict, Unpack

import psutil
from setproctitle import setproctitle


class ProcessInfo(TypedDict):
    """One OS process of a node (process_info; a health node's pids)."""

    pid: int
    cmd: str
    rss: int  # bytes
    cpu: float  # percent
    alive: bool


def host_alive(pid: int, create_time: float) -> bool:
    """True if the process `pid` exists and is the one created at `create_time`."""
    if pid <= 0:
        return True
    try:
        proc = psutil.Process(pid)
        if create_time and abs(proc.create_time() - create_time) > 0.01:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def owner_pidfds(parent_pid: int, host_pid: int, host_create_time: float) -> list[int] | None:
    """pidfds on an actor's parent and on the host, readable when either exits: the kernel
    tells the actor at once, where a timer would wake it to look (every actor, four times
    a second, idle or not). None: one of them is gone already; []: no pidfd here (the
    caller polls). Each is checked after it is opened, so it is the process meant and not
    one that took a freed pid: the parent is still ours, the host still the one created
    at `host_create_time`."""
    fds: list[int] = []
    try:
        for pid in (parent_pid, host_pid):
            if pid > 0:
                fds.append(os.pidfd_open(pid))
    except OSError as exc:
        gone = exc.errno == errno.ESRCH
    else:
        gone = os.getppid() != parent_pid or not host_alive(host_pid, host_create_time)
        if not gone:
            return fds
    for fd in fds:
        os.close(fd)
    return None if gone else []


# pid -> the psutil.Process health asks again: a CPU percent is the use since the last
# ask on the same object (a fresh one says 0.0)
_measured: dict[int, psutil.Process] = {}


def process_info(pid: int) -> ProcessInfo:
    """pid, command, RSS (bytes) and CPU percent (since the last ask) of one process, for
    health."""
    try:
        proc = _measured.get(pid)
        if proc is None or not proc.is_running():  # (a pid used again is a new process)
            proc = _measured[pid] = psutil.Process(pid)
            if len(_measured) > 256:  # (processes gone since)
                for gone in [p for p, known in _measured.items() if not known.is_running()]:
                    del _measured[gone]
        with proc.oneshot():
            return {
                "pid": pid,
                # (a titled process's cmdline is its title padded with empty arguments)
                "cmd": " ".join([a for a in proc.cmdline() if a][:3])[:120] or proc.name(),
                "rss": proc.memory_info().rss,
                "cpu": proc.cpu_percent(interval=None),
                "alive": proc.status() != psutil.STATUS_ZOMBIE,
            }
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        _measured.pop(pid, None)
        return {"pid": pid, "cmd": "", "rss": 0, "cpu": 0.0, "alive": False}


# the kernel lists each thread's children (/proc/<pid>/task/<tid>/children, from Linux 3.5
# with CONFIG_PROC_CHILDREN, which Debian's kernels have)
_KERNEL_LISTS_CHILDREN = os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")


def children(pid: int) -> list[psutil.Process]:
    """`pid`'s children (zombies included: one is listed until its parent reaps it), as
    the kernel lists them (psutil's scan where it keeps no list); [] if it is gone."""
    if not _KERNEL_LISTS_CHILDREN:
        with contextlib.suppress(psutil.NoSuchProcess):
            return psutil.Process(pid).children()
        return []
    found: list[psutil.Process] = []
    for kid in dict.fromkeys(_children(pid)):
        with contextlib.suppress(psutil.NoSuchProcess):
            found.append(psutil.Process(kid))
    return found


def descendants(pid: int) -> list[psutil.Process]:
    """`pid`'s descendants, parents before their children; [] if it is gone. Read from the
    kernel's list of each process's children: a few reads per process of the subtree, where
    psutil's children() reads the stat of every process of the machine (~10 ms with a few
    hundred), at every health answer of an actor that owns a process. psutil's scan where
    the kernel keeps no such list."""
    if not _KERNEL_LISTS_CHILDREN:
        with contextlib.suppress(psutil.NoSuchProcess):
            return psutil.Process(pid).children(recursive=True)
        return []
    found: list[psutil.Process] = []
    seen = {pid}
    parents = [pid]
    while parents:
        for kid in children(parents.pop(0)):
            if kid.pid not in seen:
                seen.add(kid.pid)
                found.append(kid)
                parents.append(kid.pid)
    return found


def _children(pid: int) -> list[int]:
    """The pids the kernel lists as children of `pid`'s threads (none once it is gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    kids: list[int] = []
    for tid in tids:
        with contextlib.suppress(OSError):  # (a thread that ended meanwhile)
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids += [int(k) for k in f.read().split()]
    return kids


def kill_tree(pid: int, grace: float = 0.5, group: bool = True, wait: bool = True) -> list[int]:
    """Kill `pid`, its process group (if it leads one) and all its descendants.

    SIGTERM first, then SIGKILL for whatever is still alive after `grace` seconds (grace 0:
    SIGKILL at once). With wait, returns once they are gone, within about grace + 0.5 s;
    without, returns at once (a supervisor's message loop must not block). Returns the
    pids that were signalled.
    """
    try:
        procs = [psutil.Process(pid), *descendants(pid)]
    except psutil.NoSuchProcess:
        procs = []
    signalled = [p.pid for p in procs]
    signals = (
        ((signal.SIGTERM, grace), (signal.SIGKILL, 0.5)) if grace > 0 else ((signal.SIGKILL, 0.5),)
    )
    for sig, wait_for in signals:
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, sig)
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                proc.send_signal(sig)
        if not procs or not wait:
            break
        procs = wait_gone(procs, time.monotonic() + wait_for)
        if not procs:
            break
    return signalled


def close_inherited_fds(actor: object) -> list[int]:  # (a thespian actor: read by getattr)
    """Close the pipes (and pidfds) this actor process inherited from its parent actor.

    Thespian forks every actor from its parent actor and closes only the parent's own
    transport sockets in the child; the pipes multiprocessing keeps per child (two per
    sibling) are inherited, so each new actor carries more fds than the one before
    (measured: +3 per run under the run supervisor). Sockets are left alone: thespian
    tracks its own, and closing one it still uses loses messages. Called on the first
    message (Start), when this process's own transport is up: everything it uses is in
    its transport's tables and is kept, as are stdio and the multiprocessing sentinel.
    """
    transport = getattr(getattr(actor, "_myRef", None), "transport", None)
    reset = getattr(transport, "childResetFileNumList", None)
    if reset is None:
        return []
    keep = {0, 1, 2, *reset()}
    import multiprocessing

    parent = multiprocessing.parent_process()
    sentinel = getattr(parent, "_sentinel", None)
    if isinstance(sentinel, int):
        keep.add(sentinel)
    closed = []
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return []
    for fd in fds:
        if fd in keep:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        # (and the parent actor's pidfds: on its own parent and the host, not ours)
        if target.startswith("pipe:") or target == "anon_inode:[pidfd]":
            with contextlib.suppress(OSError):
                os.close(fd)
                closed.append(fd)
    return closed


def proc_create_time(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return 0.0


def same_process(pid: int, create_time: float) -> bool:
    """True if `pid` is still the (running, not zombie) process created at `create_time`."""
    try:
        proc = psutil.Process(pid)
        return (
            abs(proc.create_time() - create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.NoSuchProcess:
        return False


PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int) -> None:
    """Have the kernel send `sig` to this process when its parent exits (Linux; 0 turns it
    off). For a process that cannot watch its parent yet."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


# util-linux's setpriv sets the parent-death signal and execs: the same guarantee as a
# preexec_fn, without one. A preexec_fn makes Popen fork the whole calling process instead
# of vfork; from an actor process that costs 10-17 ms per start (measured by
# benchmarks/vibe.py), against about 1 ms for the extra exec.
SETPRIV = shutil.which("setpriv")


class PopenOptions(TypedDict, total=False):
    """The subprocess.Popen arguments a started process is given (tether.owned_process)."""

    cwd: str | None
    env: Mapping[str, str] | None
    stdin: int | IO[bytes] | None
    stdout: int | IO[bytes] | None
    stderr: int | IO[bytes] | None
    start_new_session: bool
    close_fds: bool


def popen_dying_with_us(
    argv: Sequence[str], **kwargs: Unpack[PopenOptions]
) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(argv, **kwargs)` whose process gets SIGKILL when the calling process
    dies (Linux parent-death signal), even if the caller is SIGKILLed itself. A program
    that cannot be found raises FileNotFoundError here, as Popen does."""
    if SETPRIV is None:
        return subprocess.Popen(argv, preexec_fn=lambda: die_with_parent(signal.SIGKILL), **kwargs)
    program = _resolve(argv[0], kwargs.get("env"), kwargs.get("cwd"))
    wrapped = [SETPRIV, "--pdeathsig", "KILL", "--", program, *argv[1:]]
    return subprocess.Popen(wrapped, **kwargs)


def _resolve(program: str, env: Mapping[str, str] | None, cwd: str | None) -> str:
    """The file Popen would run for `program` (searched on env's PATH, as Popen does)."""
    if os.sep in program:
        path = os.path.join(cwd or "", program)
        if not os.access(path, os.X_OK) or os.path.isdir(path):
            raise FileNotFoundError(errno.ENOENT, f"no executable {program!r}", program)
        return program
    search = os.pathsep.join(os.get_exec_path(dict(env) if env is not None else None))
    found = shutil.which(program, path=search)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, f"{program!r} is not on PATH", program)
    return found


def session_processes(sid: int, not_before: float) -> list[psutil.Process]:
    """The live processes of session `sid` (thespian's admin starts one with setsid; every
    actor stays in it) created no earlier than `not_before` (guards against a reused sid)."""
    if sid <= 1:
        return []
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and os.getsid(proc.pid) == sid:
                if (
                    proc.create_time() >= not_before - 0.01
                    and proc.status() != psutil.STATUS_ZOMBIE
                ):
                    found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            continue
    return found


TOKEN_ENV = "TETHER_RUNTIME_TOKEN"  # set by the host while it forks the tree (tether.runtime)
TOKEN_RE = re.compile(r"[0-9a-f]{12}")


def tree_process_name(token: str) -> str:
    """The name (/proc/<pid>/comm, 15 bytes at most) of a process thespian forked for the
    runtime with this token."""
    return f"tether-{token[:8]}"


def _name_forked_tree_process() -> None:
    token = os.environ.get(TOKEN_ENV, "")
    if TOKEN_RE.fullmatch(token):
        _set_name(tree_process_name(token))


def _set_name(name: str) -> None:
    """This thread's name (the process's /proc/<pid>/comm when it is the main thread)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()), 0, 0, 0)


def tree_process_title(kind: str, key: str) -> str:
    """What `ps ax` shows for a tree process: `tether: supervisor language_server`,
    `tether: language_server basedpyright:/abs/root`, `tether: run conv-1`, `tether: root`
    (the kind and key of its node in rt.health())."""
    return f"tether: {kind} {key}" if key else f"tether: {kind}"


def title_tree_process(title: str) -> None:
    """Show `title` as this process's command line (/proc/<pid>/cmdline: `ps ax`, `tether
    status`) and keep its name. setproctitle also renames the process (comm, 15 bytes),
    and the name a forked tree process gave itself is the reaper's proof that it is the
    runtime's (`carries_token`), so the name is put back."""
    try:
        with open("/proc/thread-self/comm", "rb") as f:
            name = f.read().decode(errors="replace").rstrip("\n")
    except OSError:
        name = ""
    setproctitle(title)
    if name:
        _set_name(name)


def name_forked_tree_processes() -> None:
    """Idempotent. Every process forked from here on while the runtime's token is in
    os.environ (thespian's admin and, forked from it, every actor and the logger) names
    itself `tree_process_name(token)`. Forked without exec, their /proc environ is the
    host's and their cmdline a title (`title_tree_process`), so the name is what lets the
    next start's reaper prove such a process belongs to the runtime it is cleaning up
    after (`carries_token`)."""
    global _naming
    if not _naming:
        os.register_at_fork(after_in_child=_name_forked_tree_process)
        _naming = True


_naming = False
PR_SET_NAME = 15


# --- the host's descriptors stay in the host ----------------------------------------------
# Forked without exec, thespian's first child of the host (which forks the admin, which
# forks every actor) would inherit every descriptor the host holds: its files, its own
# listening sockets, thespian's host endpoint. Measured: a file and a listening socket the
# host opened before the start were open in the admin and in every actor, and a port the
# host closed stayed bound by the tree. `host_fds_stay_home` marks, for the forks of one
# boot, what the child must drop at once (`_drop_host_fds`, an at-fork hook).


@dataclass(frozen=True)
class _HostFds:
    pid: int  # the host
    thread: int  # the thread that boots the tree (only its forks are the tree's)
    fds: Mapping[int, tuple[int, int]]  # open in the host before the boot: fd -> (dev, inode)


_host_fds: _HostFds | None = None
_dropping = False


def open_fds() -> list[int]:
    """The descriptors open in this process (Linux /proc; [] elsewhere)."""
    try:
        return sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    except OSError:
        return []


@contextlib.contextmanager
def host_fds_stay_home() -> Iterator[None]:
    """While inside, a process this thread forks drops what it inherited of the host:
    every descriptor open here before entering, and every socket (thespian's host endpoint,
    made just before the fork). Stdio and the pipes multiprocessing makes for the child
    itself (its sentinel) are kept. A dropped descriptor is pointed at /dev/null rather
    than closed, so its number is not reused while a copied Python object still names it."""
    global _host_fds, _dropping
    if not _dropping:
        os.register_at_fork(after_in_child=_drop_host_fds)
        _dropping = True
    _host_fds = _HostFds(os.getpid(), threading.get_ident(), _identities(open_fds()))
    try:
        yield
    finally:
        _host_fds = None


def _identities(fds: Iterable[int]) -> dict[int, tuple[int, int]]:
    """fd -> (device, inode): what tells the host's descriptor from a later one that took
    its number after the host closed it."""
    out = {}
    for fd in fds:
        with contextlib.suppress(OSError):
            st = os.fstat(fd)
            out[fd] = (st.st_dev, st.st_ino)
    return out


def _drop_host_fds() -> None:
    marked = _host_fds
    if marked is None or os.getppid() != marked.pid or threading.get_ident() != marked.thread:
        return
    try:
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return
    for fd in open_fds():
        if fd <= 2 or fd == null:
            continue
        with contextlib.suppress(OSError):
            st = os.fstat(fd)
            if marked.fds.get(fd) == (st.st_dev, st.st_ino) or stat.S_ISSOCK(st.st_mode):
                os.dup2(null, fd, inheritable=False)
    os.close(null)


def carries_token(proc: psutil.Process, token: str) -> bool:
    """True if `proc` proves it belongs to the runtime with `token`: the token in its
    exec-time environment (a subprocess an actor started), or the name a forked process
    of that runtime gave itself (`name_forked_tree_processes`)."""
    if not TOKEN_RE.fullmatch(token or ""):
        return False
    try:
        if proc.name() == tree_process_name(token):
            return True
        return proc.environ().get(TOKEN_ENV) == token
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return False


def processes_with_token(token: str) -> list[psutil.Process]:
    """Every live process whose exec-time environment carries this runtime's token: the
    subprocesses the actors started (unless started with a custom env). Thespian's own
    processes are forked without exec, so /proc shows them the host's environment; they
    are found as descendants of the admin instead."""
    # (every process of the machine is looked at, at each shutdown and orphan check: its
    # raw environment is searched for the entry, and only a match is parsed - by psutil,
    # again, on the process object kept, so a pid reused in between is not taken)
    entry = f"\0{TOKEN_ENV}={token}\0".encode()
    found = []
    for pid in psutil.pids():
        if pid == os.getpid() or entry not in b"\0" + _raw_environ(pid):
            continue
        try:
            proc = psutil.Process(pid)
            if proc.environ().get(TOKEN_ENV) == token and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            continue
    return found


def _raw_environ(pid: int) -> bytes:
    """/proc/<pid>/environ as it is (NUL-separated); b"" when it cannot be read."""
    try:
        fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY)
    except OSError:
        return b""
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(fd)


def pid_running(pid: int) -> bool:
    """True if process `pid` exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def still_running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(procs: list[psutil.Process], deadline: float) -> list[psutil.Process]:
    """Wait until every process exited (a zombie counts as exited) or the deadline passed;
    returns the ones still running."""
    alive = [p for p in procs if still_running(p)]
    while alive and time.monotonic() < deadline:
        psutil.wait_procs(alive, timeout=min(0.02, max(deadline - time.monotonic(), 0.001)))
        alive = [p for p in alive if still_running(p)]
    return alive
