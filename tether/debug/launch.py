"""What a debug `launch` or `attach` asks of its adapter, and the run's breakpoints it
brings along.

A part of `tether.actors.debug_session.DebugSessionActor`, pure: the adapter an op may
start (`adapter_row`: one session at a time, a known adapter, its binary found) and where
(`adapter_place`: the run's place, if the adapter can run there), the DAP
request to send (`adapter_request`), the successor session that keeps what the agent set
(`successor`) and, for a session that lost it (a new incarnation after a crash, a retried
launch), the breakpoints the host kept for the run (`restore_breakpoints`).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from tether.debug import adapters
from tether.debug.adapters import BY_NAME, AdapterRow
from tether.debug.breakpoints import Breakpoint, FunctionBreakpoint
from tether.debug.driver import DebugError, Op, SessionIO
from tether.debug.session import Session
from tether.json_types import JSONObject
from tether.messages.calls import ErrorCode
from tether.messages.debug_ops import Attach, Launch, Restored
from tether.places import Place
from tether.places.sandbox import python_inside


@dataclass(frozen=True)
class AdapterRequest:
    """The DAP request a launch or attach sends, and what the session keeps of it."""

    request: str  # "launch" | "attach"
    program: str  # what is debugged, as the session names it
    config: JSONObject
    wait: float  # s to wait for the first outcome
    built_at: float  # a prebuilt program's build time: its sources as they were then
    built: str  # the binary delve builds for a launch: the session's to remove at the end

    def start(self, s: Session, row: AdapterRow) -> Op:
        """The session's launch op for this request: the handshake, then the first outcome."""
        return s.launch(
            row, self.program, self.config, self.request, self.wait, time.time(), self.built_at
        )


def adapter_row(op: Launch | Attach, s: Session) -> tuple[AdapterRow, str]:
    """The adapter `op` starts and its binary; a DebugError while session `s` is live, for
    an adapter not in the table or one not installed."""
    if s.live:
        raise DebugError(
            ErrorCode.BAD_REQUEST,
            f"a debug session is already running ({s.row.name if s.row else '?'} on "
            f"{s.program or 'an attached process'}, {s.state}); call debug terminate to "
            "end it, then launch again",
        )
    row = BY_NAME.get(op.adapter)
    if row is None:
        raise DebugError(
            ErrorCode.BAD_REQUEST,
            f"no debug adapter {op.adapter!r}; adapters: {', '.join(BY_NAME)}",
        )
    binary = adapters.find_binary(row)
    if not binary:
        raise DebugError(ErrorCode.UNAVAILABLE, f"{row.name}: adapter not found; {row.install}")
    return row, binary


def adapter_place(op: Launch | Attach, row: AdapterRow) -> Place | None:
    """The run's place (None: the host); a DebugError where the adapter cannot run."""
    place = Place.from_wire(op.place) if op.place else None
    why_not = adapters.place_refusal(row, place.kind if place else "host")
    if why_not:
        raise DebugError(ErrorCode.UNAVAILABLE, why_not)
    return place


def successor(old: Session, io: SessionIO, restored: Restored | None) -> Session:
    """A new session after `old`, with what the agent set, and the files as the last launch
    read them (a breakpoint follows its text from there)."""
    fresh = Session(io)
    fresh.breakpoints, fresh.functions, fresh.exceptions = (
        old.breakpoints,
        old.functions,
        old.exceptions,
    )
    fresh.loaded, fresh.built_at = old.loaded, old.built_at
    fresh.restored = restored
    return fresh


def adapter_request(op: Launch | Attach, row: AdapterRow) -> AdapterRequest:
    """The request for `op` on `row`'s adapter; a DebugError for an attach it cannot make."""
    built_at = 0.0
    if isinstance(op, Launch):
        root = Path(op.root)
        config = adapters.launch_config(row, Path(op.program), list(op.args), root)
        python = config.get("python")
        if op.place and isinstance(python, str):  # (one the place has)
            config["python"] = python_inside(python, str(root))
        if row.name == "lldb" or config.get("mode") == "exec":
            with contextlib.suppress(OSError):  # a prebuilt program: when it was built
                built_at = os.stat(op.program).st_mtime
        built = str(config.get("output", ""))
        return AdapterRequest("launch", op.program, config, op.wait, built_at, built)
    try:
        config = adapters.attach_config(row, op.port, op.pid)
    except ValueError as e:
        raise DebugError(ErrorCode.BAD_REQUEST, str(e)) from e
    program = f"pid {op.pid}" if op.pid else f"port {op.port}"
    if op.pid is not None:  # (lldb, delve: a binary, built from its sources then)
        with contextlib.suppress(psutil.Error, OSError):
            built_at = os.stat(psutil.Process(op.pid).exe()).st_mtime
    return AdapterRequest("attach", program, config, op.wait, built_at, "")


def restore_breakpoints(s: Session, op: Launch | Attach, why: str) -> Restored | None:
    """Set the run's breakpoints session `s` does not have; what was set and why it was
    missing (None when nothing was)."""
    missing = {f: specs for f, specs in op.breakpoints.items() if specs and f not in s.breakpoints}
    for path, specs in missing.items():
        s.remember_breakpoints(path, [Breakpoint.from_spec(x) for x in specs])
    files = {f: [int(x["line"]) for x in v] for f, v in missing.items()}
    functions: list[str] = []
    exceptions: list[str] | None = None
    if op.functions and not s.functions:
        s.functions = [FunctionBreakpoint.from_spec(x) for x in op.functions]
        functions = [f.name for f in s.functions]
    if op.exceptions is not None and s.exceptions is None:
        s.exceptions = list(op.exceptions)
        exceptions = list(s.exceptions)
    if not files and not functions and exceptions is None:
        return None
    return Restored(why, files, functions, exceptions)
