"""Where a runtime lives: its admin port on loopback, and the port file that outlives a host.

A runtime picks a free loopback port for thespian's admin (several runtimes and parallel
tests on one machine never collide) and writes `<state_dir>/<admin_port>.json`: the host's
and the admin's pid and start time, the admin's session, the runtime's token, and the
transport secret (tether.host.transport_auth) that `tether status` needs to talk to it. If the
host dies without shutting down, the actors' watchdogs take the tree down within a second;
`reap_stale` (run by every `Runtime.start()`) kills whatever is still left and removes
the file. It reads only files named as port files are (`PORT_FILE_NAME`: `<port>.json`)
whose record names that port: the state dir holds other files too (a server's kept
conversations, places' records), and none of them is ever taken for a port file.

state_dir: $TETHER_STATE_DIR, else $XDG_RUNTIME_DIR/tether, else <tmp>/tether-<uid>. It
is private (`ensure_private_dir`): a real directory owned by this user, mode 0700 (a
group/other bit left by an older tether is taken away; a symlink or another owner is
refused, as whoever made it could plant port files or read the secret); port files are
written 0600, and one is read only if it is a regular file owned by this user that no one
else may write. The file is still only a claim: the reaper kills a process only when it
proves the runtime started it (`_proven`): same pid and start time as recorded, and the
runtime's token in its environment or its name (tether.processes.carries_token).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import secrets
import socket
import stat
from pathlib import Path
from typing import TypedDict

import psutil

from tether.host.thespian_patches import LOOPBACK
from tether.json_types import JSONObject, JSONValue
from tether.private_dirs import (
    StateDirError,
    check_private_dir,
    default_state_dir,
    ensure_private_dir,
)
from tether.processes import (
    TOKEN_RE,
    carries_token,
    kill_tree,
    processes_with_token,
    same_process,
    session_processes,
)

MAX_PORT_FILE = 65536


class PortRecord(TypedDict):
    """What a port file holds (`Accounting.port_record` builds it). Read back, a file is
    foreign JSON (`read_port_file`): anyone who can write the state dir may have made it."""

    admin_port: int
    host_pid: int
    host_create_time: float
    admin_pid: int
    admin_create_time: float
    admin_sid: int
    root_pid: int
    token: str
    secret: str  # the transport secret, hex


def _admin_port_range() -> tuple[int, int]:
    """Ports below the kernel's ephemeral range: thespian binds every actor's socket to an
    ephemeral port, so an admin port picked inside that range can be taken by one of them
    between our check and the admin's bind (seen as a rare start failure when several
    runtimes start at once)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return (20000, max(20000 + 1000, min(low, 60000) - 1))


PORT_RANGE = _admin_port_range()


def port_listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((LOOPBACK, port)) == 0


def port_bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def pick_port() -> int:
    for _ in range(200):
        port = random.randint(*PORT_RANGE)
        if port_bindable(port) and not port_listening(port):
            return port
    raise OSError("no free loopback port found for the actor system's admin")


def write_port_file(directory: Path, data: PortRecord) -> Path:
    """Write `data` as `directory/<admin_port>.json`, mode 0600, atomically (write a new
    file, then rename), in the private directory (created if needed)."""
    ensure_private_dir(directory)
    path = directory / f"{data['admin_port']}.json"
    tmp = directory / f".{data['admin_port']}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(data))
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def read_port_file(path: Path) -> JSONObject:
    """The record in a port file. Raises StateDirError if the file is not one this user
    wrote (a symlink, not a regular file, another owner, writable by others), ValueError
    if it does not hold a JSON object, OSError if it cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_PORT_FILE:
            raise StateDirError(f"{path} is not a port file (not a small regular file)")
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise StateDirError(
                f"{path} was not written by you (owner uid {info.st_uid}, mode "
                f"{stat.S_IMODE(info.st_mode):o}); it is ignored"
            )
        data: JSONValue = json.loads(src.read(MAX_PORT_FILE))
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a port record")
    return data


def _proven(pid: JSONValue, create_time: JSONValue, token: str) -> bool:
    """True if `pid` is still the process created at `create_time` and carries `token`."""
    if not isinstance(pid, int) or pid <= 1 or not isinstance(create_time, int | float):
        return False
    if not same_process(pid, float(create_time)):
        return False
    try:
        return carries_token(psutil.Process(pid), token)
    except psutil.Error:
        return False


# A port file's name: the admin port (1-65535, no leading zero) and ".json". Nothing else in
# the state dir is one (a server's state files, a place's records, anything a user put
# there): reap_stale reads and removes only these.
PORT_FILE_NAME = re.compile(r"[1-9][0-9]{0,4}\.json")


def port_files(directory: Path) -> list[Path]:
    """The port files in `directory`, by their name (`PORT_FILE_NAME`, a port <= 65535)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [directory / n for n in names if PORT_FILE_NAME.fullmatch(n) and int(n[:-5]) <= 65535]


def reap_stale(directory: Path) -> list[int]:
    """For every port file in `directory` whose host is gone, kill what is left of its
    actor system - only processes proven to be its own (`_proven`, `carries_token`) - and
    remove the file. Returns the admin ports reaped. Raises StateDirError if `directory`
    is not private to this user (see `check_private_dir`)."""
    if not directory.is_dir() or directory.is_symlink():
        if directory.is_symlink():
            check_private_dir(directory)  # raises, saying why
        return []
    check_private_dir(directory)
    reaped = []
    for path in port_files(directory):
        try:
            data = read_port_file(path)
        except (OSError, ValueError, StateDirError):
            continue  # not ours, or unreadable: trust nothing in it, leave it
        if data.get("admin_port") != int(path.stem):
            continue  # a record of another port: not the port file of this name
        if _proven_host(data):
            continue
        _kill_proven(data)
        with contextlib.suppress(OSError):
            path.unlink()
        reaped.append(int(path.stem))  # (= its admin_port, checked above)
    return reaped


def _proven_host(data: JSONObject) -> bool:
    pid, created = data.get("host_pid", 0), data.get("host_create_time", 0.0)
    return isinstance(pid, int) and isinstance(created, int | float) and same_process(pid, created)


def _kill_proven(data: JSONObject) -> None:
    token = data.get("token")
    if not isinstance(token, str) or not TOKEN_RE.fullmatch(token):
        return  # nothing can be proven ours
    pid, created = data.get("admin_pid"), data.get("admin_create_time", 0.0)
    if isinstance(pid, int) and _proven(pid, created, token):
        with contextlib.suppress(Exception):
            kill_tree(pid, grace=0.2, group=False)
    sid = data.get("admin_sid", 0)
    in_session = (
        session_processes(sid, float(created))
        if isinstance(sid, int) and isinstance(created, int | float)
        else []
    )
    leftovers = [p for p in in_session if carries_token(p, token)]
    leftovers += processes_with_token(token)
    for proc in leftovers:
        with contextlib.suppress(Exception):
            kill_tree(proc.pid, grace=0.0)


def runtime_secret(port: int, directory: Path | None = None) -> bytes:
    """The transport secret of the runtime whose admin listens on `port`, from its port
    file in `directory` (default: `default_state_dir()`). Raises StateDirError or
    FileNotFoundError / ValueError saying what is missing."""
    from tether.host.transport_auth import secret_from_hex

    directory = directory or default_state_dir()
    check_private_dir(directory)
    return secret_from_hex(read_port_file(directory / f"{int(port)}.json").get("secret"))
