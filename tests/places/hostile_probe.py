"""The hostile conversation's attempts, as one Python program: a cell runs it as its code, a
debuggee as its program, a worker as `python probe.py`, so each kind of process is seen to
try the same things (issue 22 item 3). It prints one line per attempt, `WHAT OPEN` or
`WHAT refused ErrorName`, and never prints what it read (the host's pid 1's environment is
the machine's, not a test's to show).

- secret: read another run's file; outside: write beside its own workspace; portfile: read
  the runtime's port file (the transport secret is in it); state: list the state dir;
  loopback: connect to a TCP port of the host's (as thespian's are), when given;
- signal, ptrace, maps, mem, environ: signal (0), ptrace-attach (PTRACE_ATTACH, then
  waited for and detached at once, as `gdb -p` does), read the memory map, a word of
  memory through /proc/PID/mem, and the environment of a tree process (an actor's pid,
  from rt.health());
- pid1 ...: what pid 1 is where the process runs (the program's name only), and whether its
  environment and memory open. pid 1 is never ptraced: on the host that is the machine's
  init (stopping it, even for a moment, is not a test's to do)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

SOURCE = """
import ctypes, errno, os, socket

def probe(what, f):
    try:
        f()
        print(what, "OPEN", flush=True)
    except OSError as e:
        print(what, "refused", type(e).__name__, flush=True)

def ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    os.waitpid(pid, 0x40000000)  # __WALL: its SIGSTOP
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH

def first_word(pid):
    with open(f"/proc/{pid}/maps") as maps:
        start = next(int(l.split("-")[0], 16) for l in maps if l.split()[1].startswith("r"))
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(start)
        if len(mem.read(8)) != 8:
            raise OSError(errno.EIO, "short read")

def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as e:
        return type(e).__name__

def pid1_name():
    try:
        return os.path.basename(open("/proc/1/cmdline", "rb").read().split(b"\\0")[0].decode())
    except OSError as e:
        return type(e).__name__

probe("secret", lambda: open(SECRET).read())
probe("outside", lambda: open(OUTSIDE, "w").write("planted"))
probe("portfile", lambda: open(PORT_FILE).read())
print("state", listing(STATE), flush=True)
if PORT:
    probe("loopback", lambda: socket.create_connection(("127.0.0.1", PORT), 2).close())
probe("signal", lambda: os.kill(TREE_PID, 0))
probe("ptrace", lambda: ptrace(TREE_PID))
probe("maps", lambda: open(f"/proc/{TREE_PID}/maps").read())
probe("mem", lambda: first_word(TREE_PID))
probe("environ", lambda: open(f"/proc/{TREE_PID}/environ", "rb").read())
print("pid1 is", pid1_name(), flush=True)
probe("pid1-environ", lambda: open("/proc/1/environ", "rb").read())
probe("pid1-mem", lambda: first_word(1))
print("cap", open("/proc/self/status").read().split("CapEff:")[1].split()[0], flush=True)
print("uid", os.getuid(), flush=True)
print("probe done", flush=True)
"""


def probe_source(
    *,
    secret: str,
    outside: str,
    port_file: str,
    state: str,
    tree_pid: int,
    port: int = 0,
) -> str:
    """The program, its targets filled in (as Python literals)."""
    head = textwrap.dedent(
        f"""\
        SECRET = {secret!r}
        OUTSIDE = {outside!r}
        PORT_FILE = {port_file!r}
        STATE = {state!r}
        TREE_PID = {tree_pid!r}
        PORT = {port!r}
        """
    )
    return head + SOURCE


def attempts(text: str) -> dict[str, str]:
    """{what: 'OPEN' or 'refused ErrorName'} from the program's output."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        what, _, rest = line.strip().partition(" ")
        if rest == "OPEN" or rest.startswith("refused "):
            out[what] = rest
    return out


def actor_pid(health: dict[str, Any], not_pids: tuple[int, ...] = ()) -> tuple[str, int]:
    """(name, pid) of the first actor of the health tree (depth first) that runs in a
    process of its own (not the runtime's host process, nor any of `not_pids`)."""
    for p in health.get("pids", [])[:1]:
        if p.get("pid") not in (os.getpid(), *not_pids):
            return str(health.get("name")), int(p["pid"])
    for child in health.get("children", []):
        try:
            return actor_pid(child, not_pids)
        except LookupError:
            continue
    raise LookupError(f"no actor in a process of its own under {health.get('name')!r}")


# what each attempt gets in a sandbox, for every kind of process, root's runtime or not
REFUSED_IN_A_SANDBOX = {
    "secret": "refused FileNotFoundError",
    "portfile": "refused FileNotFoundError",
    "loopback": "refused ConnectionRefusedError",
    "signal": "refused ProcessLookupError",
    "ptrace": "refused ProcessLookupError",  # ESRCH: no such pid in its namespace
    "maps": "refused FileNotFoundError",
    "mem": "refused FileNotFoundError",
    "environ": "refused FileNotFoundError",
}


def kept_in_its_place(kind: str, text: str, port_file_name: str, outside: Path) -> None:
    """Assert that the program's output `text` (run by a `kind` of process in a sandbox)
    shows every attempt refused, and that its write outside did not reach `outside`."""
    seen = attempts(text)
    assert "probe done" in text, (kind, text)
    for what, refused in REFUSED_IN_A_SANDBOX.items():
        assert seen.get(what) == refused, (kind, what, text)
    assert not outside.exists(), (kind, text)  # (written, into its private /tmp)
    # the pid 1 it sees is its own bubblewrap (whose environment and memory it may read:
    # they hold the sandbox's own environment), never the machine's init
    assert "pid1 is bwrap" in text, (kind, text)
    assert port_file_name not in text, (kind, text)
    assert "cap 0000000000000000" in text and "uid 1000" in text, (kind, text)
