"""The session's breakpoints as DAP exchanges: lines, functions, exceptions, and their anchors.

A part of `tether.debug.session.Session` (its base class), sans-io like it: the ops here
are generators of what they wait for, driven one at a time by `tether.debug.driver`.

Lines and the code the program runs: a launch reads each breakpoint file (`Snapshot`) just
before the program starts, after moving each breakpoint to where its text now is
(`breakpoints.relocate`) or marking it lost. While it runs, that snapshot is what a line
number means: a file edited since shows "changed since launch", its breakpoints stay on the
loaded code, and a line asked for by the file as it is now is mapped back to the loaded
code, or refused when the program has no such code. So a stop never lands on a line that
shifted under it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from tether.debug import adapters
from tether.debug.adapters import AdapterRow
from tether.debug.breakpoints import (
    Breakpoint,
    BreakpointError,
    Features,
    FunctionBreakpoint,
    Snapshot,
    anchor_of,
    map_line,
    parse_hit,
    read_lines,
    relocate,
)
from tether.debug.dap import as_int, as_objs
from tether.debug.driver import DebugError, Driver, Step, ask
from tether.json_types import JSONObject, JSONValue
from tether.messages.calls import ErrorCode
from tether.messages.debug_ops import (
    BreakpointRow,
    BreakpointsReply,
    ExceptionReport,
    ExceptionsReply,
    Frame,
    FunctionRow,
    FunctionSpec,
    FunctionsReply,
    LineSpec,
)

MAX_TEXT = 200  # characters of a source line shown


@dataclass
class SessionBreakpoints(Driver):
    row: AdapterRow | None = None
    state: str = "none"  # none | starting | running | stopped | exited | ended
    capabilities: JSONObject = field(default_factory=dict)  # initialize's answer
    breakpoints: dict[str, list[Breakpoint]] = field(default_factory=dict)  # path -> lines
    functions: list[FunctionBreakpoint] = field(default_factory=list)
    exceptions: list[str] | None = None  # ours (raised / uncaught); None: the adapter's default
    exception_notes: list[str] = field(default_factory=list)
    loaded: dict[str, Snapshot] = field(default_factory=dict)  # path -> the file as launched
    launched_at: float = 0.0  # wall clock of the launch (a file modified after: changed)
    # a prebuilt program's build time (its mtime; 0: built at launch, or a script): its code
    # is its sources as they were then
    built_at: float = 0.0

    @property
    def live(self) -> bool:
        return self.state in ("starting", "running", "stopped")

    @property
    def sending(self) -> bool:
        """A program runs under the adapter: breakpoints set now are sent now."""
        return self.state in ("running", "stopped")

    def features(self) -> Features | None:
        return adapters.features(self.row, self.capabilities) if self.row else None

    def _timeout(self) -> float:
        return 10.0

    # --- what the agent sets -----------------------------------------------------------------
    def set_breakpoints(self, path: str, specs: list[LineSpec]) -> Step[BreakpointsReply]:
        """Remember them (each with the text of its line); when a program runs, send them."""
        bps = [Breakpoint.from_spec(s) for s in specs]
        if self.live:
            self._anchor_live(path, bps)
            self._check(bps)
        else:
            now = read_lines(path)
            for bp in bps:
                bp.text = anchor_of(now, bp.line)
        self.remember_breakpoints(path, bps)
        if self.sending and path in self.breakpoints:
            yield from self._send_breakpoints(path)
        elif self.sending:  # cleared: the adapter forgets them too
            yield from ask(
                "setBreakpoints", {"source": {"path": path}, "breakpoints": []}, self._timeout()
            )
        return BreakpointsReply(path, self.breakpoint_rows(path), self.sending)

    def remember_breakpoints(self, path: str, bps: list[Breakpoint]) -> None:
        if bps:
            self.breakpoints[path] = bps
        else:
            self.breakpoints.pop(path, None)

    def set_functions(self, specs: list[FunctionSpec]) -> Step[FunctionsReply]:
        fns = [FunctionBreakpoint.from_spec(s) for s in specs]
        if self.live:
            self._check(fns)
        self.functions = fns
        if self.sending:
            yield from self._send_functions()
        return FunctionsReply(self.function_rows(), self.sending)

    def set_exceptions(self, kinds: list[str]) -> Step[ExceptionsReply]:
        self.exceptions = list(kinds)
        if self.sending:
            yield from self._send_exceptions()
        return ExceptionsReply(self.exception_report(), self.sending)

    def _check(self, bps: list[Breakpoint] | list[FunctionBreakpoint]) -> None:
        """While a session runs, a breakpoint its adapter cannot do is refused now."""
        feats = self.features()
        if feats is None:
            return
        if bps and isinstance(bps[0], FunctionBreakpoint) and not feats.function:
            raise DebugError(ErrorCode.BAD_REQUEST, f"{feats.adapter} has no function breakpoints")
        for bp in bps:
            try:
                feats.dap_breakpoint(bp)
            except BreakpointError as e:
                raise DebugError(ErrorCode.BAD_REQUEST, str(e)) from e

    def _anchor_live(self, path: str, bps: list[Breakpoint]) -> None:
        """Lines asked for while a program runs are lines of the file as it is now: the
        program runs the code it loaded, so each is mapped to that code (or refused)."""
        snap = self.loaded.get(path)
        if snap is None:
            if _modified_after(path, self.built_at or self.launched_at):
                since = "the program was built" if self.built_at else "launch"
                raise DebugError(
                    ErrorCode.BAD_REQUEST,
                    f"{path} changed since {since} and tether has no copy of the code the program "
                    f"runs, so a line of it now may be other code in the program; {self._redo()} "
                    "to set breakpoints in it",
                )
            snap = Snapshot.read(path)
            if snap is None:
                return
            self.loaded[path] = snap
        now = read_lines(path) or []
        for bp in bps:
            asked = bp.line
            bp.text = anchor_of(now, asked)
            if not snap.changed(path):
                continue
            mapped = map_line(now, snap.lines, asked)
            if mapped is None or anchor_of(snap.lines, mapped) != bp.text:
                raise DebugError(
                    ErrorCode.BAD_REQUEST,
                    f"line {asked} of {path} changed since launch: the running program has no such "
                    "code (it runs the file as it was at launch); launch again to stop there",
                )
            if mapped != asked:
                bp.line = mapped
                bp.message = f"line {asked} of the file now; line {mapped} of the code it runs"

    # --- at launch ---------------------------------------------------------------------------
    def _redo(self) -> str:
        return "rebuild it and launch (or attach) again" if self.built_at else "launch again"

    def anchor_at_launch(self, built_at: float = 0.0) -> None:
        """Move each breakpoint to where its text is now, or mark it lost; then read the
        files as the program will load them. A prebuilt program (`built_at`, its mtime) has
        its sources as they were when it was built: a source edited since keeps the lines
        of the last launch of that same build, or its breakpoints are not set."""
        stale = {p for p in self.breakpoints if built_at and _modified_after(p, built_at)}
        kept = {p for p in stale if p in self.loaded and self.built_at == built_at}
        for path, bps in self.breakpoints.items():
            now = read_lines(path)
            before = self.loaded.get(path)
            for bp in bps:
                bp.state, bp.moved_from, bp.verified, bp.actual_line, bp.id = (
                    "",
                    None,
                    False,
                    None,
                    None,
                )
                bp.message = ""
                if now is None:
                    bp.state, bp.message = "lost", "the file cannot be read"
                    continue
                if path in kept:
                    continue  # the program runs the code the last launch read: lines hold
                if path in stale:
                    bp.state, bp.message = (
                        "stale",
                        "the file changed after the program was built, and tether has no copy of "
                        f"the code it was built from; {self._redo()}",
                    )
                    continue
                line, why = relocate(bp.line, bp.text, now, before.lines if before else None)
                if line is None:
                    bp.state, bp.message = "lost", why
                elif line != bp.line:
                    bp.moved_from, bp.line = bp.line, line
        for fn in self.functions:
            fn.state, fn.verified, fn.message, fn.id = "", False, "", None
        fresh = {p: s for p in self.breakpoints if p not in stale and (s := Snapshot.read(p))}
        self.loaded = {**{p: self.loaded[p] for p in kept}, **fresh}
        self.built_at = built_at

    def send_all(self) -> Step[None]:
        """Every breakpoint kind, before configurationDone."""
        for path in list(self.breakpoints):
            yield from self._send_breakpoints(path)
        if self.functions:
            yield from self._send_functions()
        yield from self._send_exceptions()

    # --- to the adapter ----------------------------------------------------------------------
    def _send_breakpoints(self, path: str) -> Step[None]:
        feats = self.features()
        sendable: list[Breakpoint] = []
        args: list[JSONValue] = []
        for bp in self.breakpoints.get(path, []):
            if bp.state == "refused":
                bp.state = ""
            if not bp.active or feats is None:
                continue
            try:
                args.append(feats.dap_breakpoint(bp))
                sendable.append(bp)
            except BreakpointError as e:
                bp.state, bp.message = "refused", str(e)
        resp = yield from ask(
            "setBreakpoints", {"source": {"path": path}, "breakpoints": args}, self._timeout()
        )
        for known, got in zip(sendable, as_objs(resp.body.get("breakpoints")), strict=False):
            known.verified = bool(got.get("verified"))
            known.actual_line = as_int(got.get("line"))
            known.id = as_int(got.get("id"))
            known.message = str(got.get("message") or known.message or "")

    def _send_functions(self) -> Step[None]:
        feats = self.features()
        sendable: list[FunctionBreakpoint] = []
        args: list[JSONValue] = []
        for fn in self.functions:
            if fn.state == "refused":
                fn.state = ""
            if not fn.state == "" or feats is None:
                continue
            try:
                if not feats.function:
                    raise BreakpointError(f"{feats.adapter} has no function breakpoints")
                args.append(feats.dap_breakpoint(fn))
                sendable.append(fn)
            except BreakpointError as e:
                fn.state, fn.message = "refused", str(e)
        if not args and not (feats and feats.function):
            return
        resp = yield from ask("setFunctionBreakpoints", {"breakpoints": args}, self._timeout())
        for known, got in zip(sendable, as_objs(resp.body.get("breakpoints")), strict=False):
            known.verified = bool(got.get("verified"))
            known.id = as_int(got.get("id"))
            known.message = str(got.get("message") or "")

    def _send_exceptions(self) -> Step[None]:
        row, feats = self.row, self.features()
        if row is None or feats is None:
            return
        if self.exceptions is None:
            filters, self.exception_notes = list(row.exception_filters), []
        else:
            filters, self.exception_notes = feats.exception_filters(self.exceptions)
        if filters or "exceptionBreakpointFilters" in self.capabilities or self.exceptions == []:
            yield from ask("setExceptionBreakpoints", {"filters": [*filters]}, self._timeout())

    def stop_causes(
        self, hit_ids: list[int], frame: Frame
    ) -> tuple[list[Breakpoint], list[FunctionBreakpoint]]:
        """The breakpoints that may have made this stop: those its hitBreakpointIds name,
        and those placed where it stopped (lldb-dap names only the first breakpoint of an
        address, which may be a logpoint whose condition was false). Logpoints never stop."""
        path, line, name = frame.file, frame.line, frame.name
        lines = [
            b
            for b in self.breakpoints.get(path, [])
            if b.active
            and not b.log_message
            and (b.id in hit_ids or line in (b.line, b.actual_line))
        ]
        for p, bps in self.breakpoints.items():
            if p != path:
                lines += [b for b in bps if b.active and not b.log_message and b.id in hit_ids]
        fns = [
            f
            for f in self.functions
            if not f.state and (f.id in hit_ids or _same_function(name, f.name))
        ]
        return lines, fns

    def spend_hit_once(self, lines: list[Breakpoint], fns: list[FunctionBreakpoint]) -> Step[None]:
        """lldb-dap stops on every hit from the Nth on: a '== N' breakpoint that stopped is
        removed from the adapter (the others keep their counts: lldb-dap amends only what
        changed), and shows as spent until the next launch."""
        feats = self.features()
        if feats is None or not feats.hit_equal_by_removal:
            return
        causes: list[Breakpoint | FunctionBreakpoint] = [*lines, *fns]
        spent = {id(bp) for bp in causes if _equal_hit(bp.hit_condition)}
        for bp in causes:
            if id(bp) in spent:
                bp.state, bp.message = "spent", f"stopped on hit {bp.hit_condition}; removed"
        for path, bps in list(self.breakpoints.items()):
            if any(id(b) in spent for b in bps):
                yield from self._send_breakpoints(path)
        if any(id(f) in spent for f in fns):
            yield from self._send_functions()

    def describe(self, lines: list[Breakpoint], fns: list[FunctionBreakpoint]) -> str:
        """The breakpoint that made a stop, for its text ("" if none of ours)."""
        causes = {id(bp) for bp in lines}
        for path, bps in self.breakpoints.items():
            for bp in bps:
                if id(bp) in causes:
                    return f"{path}:{bp.line}" + _conditions(bp.condition, bp.hit_condition)
        for fn in fns:
            return f"function {fn.name}" + _conditions(fn.condition, fn.hit_condition)
        return ""

    # --- what the agent reads ----------------------------------------------------------------
    def changed_since_launch(self, path: str) -> bool:
        snap = self.loaded.get(path)
        return self.live and snap is not None and snap.changed(path)

    def line_text(self, path: str, line: int) -> str:
        """The text of `line` in the code the program runs: the file as launched when it
        has been read then, else the file."""
        snap = self.loaded.get(path) if self.live else None
        if snap is not None:
            return anchor_of(snap.lines, line)[:MAX_TEXT]
        return anchor_of(read_lines(path) if path else None, line)[:MAX_TEXT]

    def breakpoint_rows(self, path: str) -> list[BreakpointRow]:
        changed = self.changed_since_launch(path)
        return [
            BreakpointRow(
                line=b.line,
                verified=b.verified,
                actual_line=b.actual_line,
                message=b.message,
                state=b.state,
                moved_from=b.moved_from,
                condition=b.condition,
                hit_condition=b.hit_condition,
                log_message=b.log_message,
                source=b.text
                if changed or b.state == "lost"
                else self.line_text(path, b.actual_line or b.line) or b.text,
                changed_since_launch=changed,
                spec=b.spec(),
            )
            for b in self.breakpoints.get(path, [])
        ]

    def function_rows(self) -> list[FunctionRow]:
        return [
            FunctionRow(
                name=f.name,
                verified=f.verified,
                message=f.message,
                state=f.state,
                condition=f.condition,
                hit_condition=f.hit_condition,
                spec=f.spec(),
            )
            for f in self.functions
        ]

    def exception_report(self) -> ExceptionReport:
        return ExceptionReport(
            asked=None if self.exceptions is None else list(self.exceptions),
            default=list(self.row.exception_filters) if self.row else [],
            notes=list(self.exception_notes),
        )

    def all_breakpoints(self) -> tuple[dict[str, list[BreakpointRow]], list[FunctionRow]]:
        """The line breakpoints (path -> rows) and the function breakpoints, as rows."""
        return {p: self.breakpoint_rows(p) for p in self.breakpoints}, self.function_rows()


def _equal_hit(hit_condition: str) -> bool:
    hit = parse_hit(hit_condition) if hit_condition else None
    return hit is not None and hit.op == "=="


def _conditions(condition: str, hit_condition: str) -> str:
    parts = [f"if {condition}"] if condition else []
    if hit_condition:
        parts.append(f"hit {hit_condition}")
    return f" ({', '.join(parts)})" if parts else ""


def _same_function(frame_name: str, name: str) -> bool:
    """A frame of the function `name` ("step" is main.step in Go, step(int) in C++)."""
    return bool(name) and (
        frame_name == name or frame_name.endswith("." + name) or frame_name.startswith(name + "(")
    )


def _modified_after(path: str, when: float) -> bool:
    try:
        return bool(when) and os.stat(path).st_mtime > when
    except OSError:
        return False
