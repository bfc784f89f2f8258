"""`tether status --port N`: fetch the health tree of a runtime in another process and draw it.

The runtime's admin listens on 127.0.0.1:N. We attach to that actor system as one more
external client (never shutting it down: that would stop the runtime), find the root
supervisor by its global name, and ask it for health with a deadline, exactly as
`Runtime.health()` does in-process. `render_tree` draws any health dict.

Every connection into a runtime must prove its transport secret (tether.host.transport_auth).
We read it from the runtime's port file, `<state dir>/<N>.json`: that file is 0600 in a
0700 directory owned by the user, and `tether.host.portfile` checks both before reading, so
only the user who started the runtime (or root) can join it. The check matters for us
too: whoever could plant that file could point us at an actor system of theirs, and we
unpickle what it sends back. (Against processes of the same user a file mode is no
boundary - they can read the runtime's memory - see tether.host.transport_auth.)
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO, cast

import psutil

from tether.health_node import HealthNode, NodeState
from tether.host import thespian_patches
from tether.json_types import JSONObject, JSONValue
from tether.processes import ProcessInfo

STATE_MARK: dict[str, str] = {  # (a StrEnum key is found by its plain string)
    NodeState.READY: "",
    NodeState.BUSY: "",
    NodeState.STARTING: "~",
    NodeState.RESTARTING: "!",
    NodeState.STOPPING: "~",
    NodeState.UNRESPONSIVE: "!",
    NodeState.FAILED: "X",
    NodeState.STOPPED: "-",
}


class StatusError(RuntimeError):
    pass


def fetch_health(port: int, timeout: float = 5.0) -> HealthNode:
    """The health tree of the tether runtime whose admin listens on 127.0.0.1:`port`."""
    thespian_patches.apply()
    with socket.socket() as sock:
        sock.settimeout(0.5)
        if sock.connect_ex((thespian_patches.LOOPBACK, port)) != 0:
            raise StatusError(
                f"nothing listens on 127.0.0.1:{port}; is the runtime running? "
                "(its admin port is Runtime.admin_port, also in its port file)"
            )
    secret = _secret(port)
    result: dict[str, HealthNode] = {}
    failed: dict[str, Exception] = {}

    def fetch() -> None:
        try:
            result["health"] = _fetch(port, timeout, secret)
        except Exception as exc:  # reported below, with the port
            failed["error"] = exc

    worker = threading.Thread(target=fetch, name="tether-status", daemon=True)
    worker.start()
    worker.join(timeout + 2.0)
    if "health" in result:
        health = result["health"]
        capacity = _capacity(port)
        if capacity is not None:
            health["capacity"] = capacity
        return health
    if "error" in failed:
        raise StatusError(
            f"could not read the health of the runtime on port {port}: {failed['error']}"
        )
    raise StatusError(f"the runtime on port {port} did not answer within {timeout:g} s")


def _secret(port: int) -> bytes:
    from tether.host.portfile import StateDirError, default_state_dir, runtime_secret

    where = default_state_dir()
    try:
        return runtime_secret(port, where)
    except FileNotFoundError:
        raise StatusError(
            f"no port file {where / f'{port}.json'}: tether status reads the runtime's "
            "transport secret from it; run it as the user who started the runtime, with "
            "the same TETHER_STATE_DIR"
        ) from None
    except (StateDirError, OSError, ValueError) as exc:
        raise StatusError(f"cannot read the transport secret of port {port}: {exc}") from None


def _capacity(port: int) -> JSONObject | None:
    """The runtime's capacity summary, which its governor keeps beside the port file
    (`<port>.capacity`, 0600, rewritten at each sample: tether.capacity.governor)."""
    import json

    from tether.host.portfile import default_state_dir

    try:
        data = json.loads((default_state_dir() / f"{port}.capacity").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def render_capacity(cap: JSONObject) -> str:
    """One paragraph: the budget, what is used and by what, and how many more fit."""
    by_kind, evictions = cap.get("by_kind"), cap.get("evictions") or {}
    held = (
        {k: v for k, v in by_kind.items() if isinstance(v, dict)}
        if isinstance(by_kind, dict)
        else {}
    )
    kinds = ", ".join(
        f"{kind} {_mib(_n(h.get('bytes', 0)))} ({h.get('count', 0)})"
        for kind, h in sorted(held.items(), key=lambda kv: -_n(kv[1].get("bytes", 0)))
    )
    lines = [
        f"capacity: {_mib(_n(cap.get('used', 0)))} of {_mib(_n(cap.get('budget', 0)))} used "
        f"({cap.get('used_source', '?')}; budget: {cap.get('budget_source', '?')}), "
        f"{_mib(_n(cap.get('reserved', 0)))} reserved, {_mib(_n(cap.get('free', 0)))} free",
        f"  {cap.get('conversations', 0)} conversations, average "
        f"{_mib(_n(cap.get('average_conversation', 0)))}: {cap.get('fit', 0)} more fit",
        f"  by kind: {kinds or 'nothing sampled yet'}",
    ]
    if evictions or cap.get("refusals"):
        counts = sorted(evictions.items()) if isinstance(evictions, dict) else []
        stopped = ", ".join(f"{k} {n}" for k, n in counts) or "none"
        lines.append(f"  evictions: {stopped}; refused: {cap.get('refusals', 0)}")
    if cap.get("last_error"):
        lines.append(f"  error: {cap['last_error']}")
    return "\n".join(lines)


def _n(value: JSONValue) -> float:
    """A byte count of the summary (0 if it is not a number)."""
    return value if isinstance(value, int | float) else 0


def _fetch(port: int, timeout: float, secret: bytes) -> HealthNode:
    from thespian.actors import ActorSystem

    from tether.host import transport_auth
    from tether.host.contexts import post
    from tether.messages.codec import decode, encode
    from tether.messages.control import HealthQuery, HealthReport
    from tether.runtime import ROOT_NAME
    from tether.supervisors.tree import RootSupervisor

    with transport_auth.using_secret(secret):
        asys = ActorSystem(
            "multiprocTCPBase", capabilities={"Admin Port": port}, transientUnique=True
        )
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
                    node = cast(HealthNode, dict(report.node))  # (built by health_node)
                    node["admin_port"] = port
                    return node
    raise StatusError(f"no health report within {timeout:g} s")


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def describe(node: HealthNode) -> str:
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
    if node.get("place"):
        parts.append(f"in {node['place']}")
    extra = node.get("extra") or {}
    shown = {
        k: v
        for k, v in extra.items()
        if isinstance(v, str | int | float | bool) and v != "" and k != "place"  # (said above)
    }
    if shown:
        parts.append(" ".join(f"{k}={v}" for k, v in sorted(shown.items())))
    line = "  ".join(parts)
    if node.get("last_error"):
        line += f"\n    error: {node['last_error']}"
    return line


def render_tree(health: HealthNode) -> str:
    """Draw a health dict as a tree (box-drawing characters), one actor per line."""
    lines: list[str] = []
    if "admin_port" in health:
        lines.append(f"tether runtime on 127.0.0.1:{health['admin_port']}")

    def walk(node: HealthNode, prefix: str, last: bool, top: bool) -> None:
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
    if isinstance(health.get("capacity"), dict):  # (below the tree: its first line stays the root)
        lines.append(render_capacity(health["capacity"]))
    return "\n".join(lines)


def status_main(
    port: int, out: TextIO | None = None, timeout: float = 5.0, as_json: bool = False
) -> int:
    """Print the health tree of the runtime on `port` (`as_json`: the health dict, for a
    program). Exit status 0, or 1 with the reason."""
    out = out or sys.stdout
    try:
        health = fetch_health(port, timeout)
    except StatusError as exc:
        print(f"tether status: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(health, indent=2, default=str) if as_json else render_tree(health), file=out)
    return 0


class CpuSampler:
    """CPU % per process between two frames. A process's `cpu_percent` is measured since
    the previous call on the same psutil handle: a fresh handle each time (what the tree's
    health report has) always says 0 %. So top keeps one handle per (pid, start time)."""

    def __init__(self) -> None:
        self._handles: dict[int, psutil.Process] = {}

    def percent(self, pid: int) -> float:
        handle = self._handles.get(pid)
        try:
            if handle is None or not handle.is_running():  # (is_running: the pid not reused)
                handle = self._handles[pid] = psutil.Process(pid)
                handle.cpu_percent(None)  # the first call starts the measure
                return 0.0
            return float(handle.cpu_percent(None))
        except psutil.Error:
            self._handles.pop(pid, None)
            return 0.0

    def forget_others(self, alive: set[int]) -> None:
        for pid in set(self._handles) - alive:
            del self._handles[pid]


# --- tether top ----------------------------------------------------------------------
TOP_COLUMNS = ("actor", "state", "up", "restarts", "pending", "rss", "cpu", "place")
CLEAR = "\x1b[H\x1b[J"  # cursor home, clear to the end: the frame is redrawn in place


def top_rows(health: HealthNode, cpu: CpuSampler | None = None) -> list[tuple[str, ...]]:
    """One row per actor, indented by depth: the table `tether top` draws. With `cpu`, the
    CPU column is measured here between frames (the report's own is a single look)."""
    rows: list[tuple[str, ...]] = []

    def cpu_of(p: ProcessInfo) -> float:
        return cpu.percent(int(p["pid"])) if cpu is not None else float(p.get("cpu", 0))

    def walk(node: HealthNode, depth: int) -> None:
        pids = [p for p in node.get("pids", []) if p.get("alive", True) and "pid" in p]
        state = str(node.get("state", "?"))
        rows.append(
            (
                "  " * depth + str(node.get("name", "?")),
                state + STATE_MARK.get(state, ""),
                f"{node.get('uptime', 0):.0f}s",
                str(node.get("restarts", 0)),
                str(node.get("pending", 0)),
                _mib(sum(int(p.get("rss", 0)) for p in pids)),
                f"{sum(cpu_of(p) for p in pids):.0f}%",
                short_place(str(node.get("place", ""))),
            )
        )
        for child in node.get("children", []):
            walk(child, depth + 1)

    walk(health, 0)
    return rows


def short_place(place: str) -> str:
    """A top cell for a node's place (`Place.describe()`): its kind, "+net" for a sandbox
    with network on; "" for an actor that runs no process of a place (a supervisor)."""
    kind = place.split(" ", 1)[0]
    return kind + "+net" if kind == "sandbox" and "network on" in place else kind


def render_top(
    health: HealthNode,
    now: str,
    cpu: CpuSampler | None = None,
    size: tuple[int, int] | None = None,
) -> str:
    """The frame. `size` (columns, lines): every line cut to the width (a wrapped row would
    push the header off the top) and the rows to the height, saying how many were left."""
    rows = top_rows(health, cpu)
    restarts = sum(int(r[3]) for r in rows)
    pending = sum(int(r[4]) for r in rows)
    header = (
        f"tether top  127.0.0.1:{health.get('admin_port', '?')}  {now}  "
        f"{len(rows)} actors  {restarts} restarts  {pending} pending"
    )
    widths = [max(len(r[i]) for r in [TOP_COLUMNS, *rows]) for i in range(len(TOP_COLUMNS))]
    lines = [header, ""]
    for row in [TOP_COLUMNS, *rows]:
        cells = [
            row[0].ljust(widths[0]),
            *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)),
        ]
        lines.append("  ".join(cells).rstrip())
    return fit(lines, size)


def fit(lines: list[str], size: tuple[int, int] | None) -> str:
    if size is None:
        return "\n".join(lines)
    columns, height = size
    if len(lines) > height - 1:
        hidden = len(lines) - (height - 2)
        lines = [*lines[: height - 2], f"... {hidden} more rows (a taller terminal shows them)"]
    return "\n".join(line[:columns] for line in lines)


@contextlib.contextmanager
def keys(stream: TextIO) -> Iterator[bool]:
    """The terminal in cbreak mode (a key arrives without Enter, echo off) while top runs,
    restored after; yields whether keys can be read at all."""
    try:
        import termios
        import tty

        fd = stream.fileno()
        saved = termios.tcgetattr(fd)
    except (ImportError, OSError, ValueError, AttributeError):
        yield False
        return
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def wait_key(stream: TextIO, seconds: float) -> str:
    """The key pressed within `seconds`, or "" (the frame is due)."""
    ready, _, _ = select.select([stream], [], [], seconds)
    return os.read(stream.fileno(), 1).decode(errors="replace") if ready else ""


def top_main(
    port: int,
    interval: float = 1.0,
    count: int = 0,
    out: TextIO | None = None,
    timeout: float = 5.0,
) -> int:
    """Redraw the runtime's actors every `interval` seconds (in place on a terminal, one
    frame after another on a pipe) until interrupted, or `count` frames (0: forever). A
    runtime that stops answering is shown as such, and watched until it is back."""
    out = out or sys.stdout
    in_place = out.isatty()
    cpu = CpuSampler()
    frames = 0
    last: HealthNode | None = None
    with keys(sys.stdin) if in_place and sys.stdin.isatty() else contextlib.nullcontext(False) as k:
        try:
            while not count or frames < count:
                now = time.strftime("%H:%M:%S")
                size = tuple(shutil.get_terminal_size()) if in_place else None
                try:
                    last = fetch_health(port, timeout)
                    frame = render_top(last, now, cpu, size)  # type: ignore[arg-type]
                except StatusError as exc:
                    # the runtime went away: keep its last table, say so above it
                    gone = f"tether top  127.0.0.1:{port}  {now}\n{exc}"
                    frame = gone if last is None else gone + "\n" + render_top(last, "(last)")
                    frame = fit(frame.split("\n"), size)  # type: ignore[arg-type]
                print((CLEAR if in_place else "") + frame, file=out, flush=True)
                frames += 1
                if count and frames >= count:
                    break
                if not in_place:
                    print("", file=out)
                if k:
                    if wait_key(sys.stdin, interval) in ("q", "Q"):
                        break
                else:
                    select.select([], [], [], interval)  # the next frame is due: a timer
        except KeyboardInterrupt:
            pass
    return 0
