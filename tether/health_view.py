"""`tether status --port N`: fetch the health tree of a runtime in another process and draw it.

The runtime's admin listens on 127.0.0.1:N. We attach to that actor system as one more
external client (never shutting it down: that would stop the runtime), find the root
supervisor by its global name, and ask it for health with a deadline, exactly as
`Runtime.health()` does in-process. `render_tree` draws any health dict.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from typing import Any, TextIO

from tether import thespian_patches

STATE_MARK = {
    "ready": "",
    "busy": "",
    "starting": "~",
    "restarting": "!",
    "stopping": "~",
    "unresponsive": "!",
    "failed": "X",
    "stopped": "-",
}


class StatusError(RuntimeError):
    pass


def fetch_health(port: int, timeout: float = 5.0) -> dict[str, Any]:
    """The health tree of the tether runtime whose admin listens on 127.0.0.1:`port`."""
    thespian_patches.apply()
    with socket.socket() as sock:
        sock.settimeout(0.5)
        if sock.connect_ex((thespian_patches.LOOPBACK, port)) != 0:
            raise StatusError(
                f"nothing listens on 127.0.0.1:{port}; is the runtime running? "
                "(its admin port is Runtime.admin_port, also in its port file)"
            )
    result: dict[str, Any] = {}

    def fetch() -> None:
        try:
            result["health"] = _fetch(port, timeout)
        except Exception as exc:  # reported below, with the port
            result["error"] = exc

    worker = threading.Thread(target=fetch, name="tether-status", daemon=True)
    worker.start()
    worker.join(timeout + 2.0)
    if "health" in result:
        return result["health"]
    if "error" in result:
        raise StatusError(
            f"could not read the health of the runtime on port {port}: {result['error']}"
        )
    raise StatusError(f"the runtime on port {port} did not answer within {timeout:g} s")


def _fetch(port: int, timeout: float) -> dict[str, Any]:
    from thespian.actors import ActorSystem

    from tether.contexts import post
    from tether.messages.codec import decode, encode
    from tether.messages.control import HealthQuery, HealthReport
    from tether.runtime import ROOT_NAME
    from tether.supervisors.tree import RootSupervisor

    asys = ActorSystem("multiprocTCPBase", capabilities={"Admin Port": port}, transientUnique=True)
    # no asys.shutdown(): we are a guest in that actor system
    root = asys.createActor(RootSupervisor, globalName=ROOT_NAME)
    query = HealthQuery(f"status-{time.monotonic_ns()}", time.monotonic() + timeout * 0.9)
    with asys.private() as ctx:
        post(ctx, root, encode(query))  # (listen drives it; tell would wait on the root)
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            msg = ctx.listen(remaining)
            if isinstance(msg, bytes):
                report = decode(msg)
                if isinstance(report, HealthReport) and report.query_id == query.query_id:
                    node = dict(report.node)
                    node["admin_port"] = port
                    return node
    raise StatusError(f"no health report within {timeout:g} s")


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def describe(node: dict[str, Any]) -> str:
    state = node.get("state", "?")
    parts = [node.get("name", "?"), f"[{state}{STATE_MARK.get(state, '')}]"]
    parts.append(f"up {node.get('uptime', 0):.1f}s")
    if node.get("restarts"):
        parts.append(f"restarts {node['restarts']}")
    if node.get("pending"):
        parts.append(f"pending {node['pending']}")
    pids = [p for p in node.get("pids", []) if p.get("alive", True)]
    if pids:
        parts.append(
            "pids "
            + ", ".join(
                f"{p['pid']} ({_mib(p.get('rss', 0))}, {p.get('cpu', 0):.0f}%)" for p in pids
            )
        )
    extra = node.get("extra") or {}
    shown = {k: v for k, v in extra.items() if isinstance(v, str | int | float | bool) and v != ""}
    if shown:
        parts.append(" ".join(f"{k}={v}" for k, v in sorted(shown.items())))
    line = "  ".join(parts)
    if node.get("last_error"):
        line += f"\n    error: {node['last_error']}"
    return line


def render_tree(health: dict[str, Any]) -> str:
    """Draw a health dict as a tree (box-drawing characters), one actor per line."""
    lines: list[str] = []
    if "admin_port" in health:
        lines.append(f"tether runtime on 127.0.0.1:{health['admin_port']}")

    def walk(node: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└── " if last else "├── ")
        text = describe(node).split("\n")
        lines.append(prefix + branch + text[0])
        child_prefix = prefix if top else prefix + ("    " if last else "│   ")
        for extra_line in text[1:]:
            lines.append(
                child_prefix + ("    " if not node.get("children") else "│   ") + extra_line.strip()
            )
        children = node.get("children", [])
        for i, child in enumerate(children):
            walk(child, child_prefix, i == len(children) - 1, False)

    walk(health, "", True, True)
    return "\n".join(lines)


def status_main(port: int, out: TextIO | None = None, timeout: float = 5.0) -> int:
    """Print the health tree of the runtime on `port`. Exit status 0, or 1 with the reason."""
    out = out or sys.stdout
    try:
        health = fetch_health(port, timeout)
    except StatusError as exc:
        print(f"tether status: {exc}", file=sys.stderr)
        return 1
    print(render_tree(health), file=out)
    return 0
