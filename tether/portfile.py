"""Where a runtime lives: its admin port on loopback, and the port file that outlives a host.

A runtime picks a free loopback port for thespian's admin (several runtimes and parallel
tests on one machine never collide) and writes `<state_dir>/<admin_port>.json`: the host's
and the admin's pid and start time, the admin's session, the runtime's token. If the host
dies without shutting down, the actors' watchdogs take the tree down within a second;
`reap_stale` (run by every `Runtime.start()`) kills whatever is still left and removes
the file. state_dir: $TETHER_STATE_DIR, or <tmp>/tether-<uid>.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
from pathlib import Path
from typing import Any

from tether.processes import (
    kill_tree,
    processes_with_token,
    same_process,
    session_processes,
)
from tether.thespian_patches import LOOPBACK


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


def write_port_file(directory: Path, data: dict[str, Any]) -> Path:
    """Write `data` as `directory/<admin_port>.json`, atomically (write, then rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{data['admin_port']}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)
    return path


def reap_stale(directory: Path) -> list[int]:
    """For every port file in `directory` whose host is gone, kill what is left of its
    actor system (admin, its session, subprocesses carrying its token) and remove the
    file. Returns the admin ports reaped."""
    reaped = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if same_process(data.get("host_pid", 0), data.get("host_create_time", 0.0)):
            continue
        admin_pid = data.get("admin_pid", 0)
        if admin_pid and same_process(admin_pid, data.get("admin_create_time", 0.0)):
            with contextlib.suppress(Exception):
                kill_tree(admin_pid, grace=0.2, group=False)
        leftovers = session_processes(data.get("admin_sid", 0), data.get("admin_create_time", 0.0))
        if data.get("token"):
            leftovers += processes_with_token(str(data["token"]))
        for proc in leftovers:
            with contextlib.suppress(Exception):
                kill_tree(proc.pid, grace=0.0)
        with contextlib.suppress(OSError):
            path.unlink()
        reaped.append(int(data.get("admin_port", 0)))
    return reaped
