"""debug: drive a debugger (SPEC.md "debug", tier exec).

Host side: validates the op, resolves paths (already confined by the guardrails) and the
adapter (the intersection rule of `tether.debug.adapters`: a root marker from the
program's directory up to the workspace AND the adapter's binary), then sends a typed op
(`tether.messages.debug_ops`) to the run's one DebugSessionActor and renders its answer.
`adapters` needs no session: it is answered here.

Every op is idempotent (`DEBUG`, its vocabulary, says so): a call whose actor went away
(its TTL, `terminate`, a crash) is retried once on the run's next session actor, which has
no program of the old one to act on - it answers with why the previous session ended.

Every launch and attach carries the breakpoints the run keeps (`kept`), so a session actor
that lost them sets them again before it starts the program.
"""

from __future__ import annotations

from collections.abc import Mapping

from tether.debug import adapters
from tether.debug import breakpoints as bp
from tether.json_types import JSONObject, JSONValue
from tether.messages.calls import ResourceError
from tether.messages.debug_ops import (
    KEY,
    KIND,
    Attach,
    BreakpointsReply,
    Continue,
    DebugOp,
    Evaluate,
    EvaluateReply,
    ExceptionsReply,
    FunctionsReply,
    Launch,
    Outcome,
    Output,
    OutputReply,
    Pause,
    R,
    Scopes,
    ScopesReply,
    SetBreakpoints,
    SetExceptionBreakpoints,
    SetFunctionBreakpoints,
    Stack,
    StackReply,
    Started,
    Status,
    StatusReply,
    StepIn,
    StepOut,
    StepOver,
    Terminate,
    TerminateReply,
    Threads,
    ThreadsReply,
    Variables,
    VariablesReply,
    debug_payload,
    read_reply,
)
from tether.places import Place
from tether.tools.debug_tool.kept import (
    forget_breakpoints,
    keep_exceptions,
    keep_functions,
    keep_launch,
    keep_lines,
    kept,
    seen,
)
from tether.tools.debug_tool.render import (
    frame_line,
    rel,
    render_adapters,
    render_all_breakpoints,
    render_breakpoints,
    render_exceptions,
    render_functions,
    render_launch,
    render_outcome,
    render_status,
    variables_lines,
)
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

OPS = (
    "adapters",
    "status",
    "breakpoints",
    "launch",
    "attach",
    "continue",
    "pause",
    "step_over",
    "step_in",
    "step_out",
    "threads",
    "stack",
    "scopes",
    "variables",
    "evaluate",
    "output",
    "terminate",
)
DEFAULT_WAIT = 10.0  # s a run-control op waits for a stop or the exit
ATTACH_WAIT = 2.0  # an attached program usually runs on: attach says so soon, unless told
MAX_WAIT = 120.0
INSPECT_TIMEOUT = 20.0  # s for an op that only asks the adapter something
STEPS: dict[str, type[Continue] | type[StepOver] | type[StepIn] | type[StepOut]] = {
    "continue": Continue,
    "step_over": StepOver,
    "step_in": StepIn,
    "step_out": StepOut,
}


def _call(ctx: ToolContext, op: DebugOp, timeout: float) -> Mapping[str, object]:
    return ctx.call_resource(KIND, KEY, op, None, timeout)  # (every op: idempotent)


def _ask(ctx: ToolContext, op: DebugOp, expect: type[R], timeout: float) -> R:
    """One call to the run's session actor, answered with `expect`, the reply `op`
    declares (`op.reply`), read back checked."""
    if op.reply is not expect:
        raise TypeError(f"{type(op).__name__} answers {op.reply.__name__}, not {expect.__name__}")
    return read_reply(expect, _call(ctx, op, timeout))


def _ask_outcome(
    ctx: ToolContext, op: Continue | StepOver | StepIn | StepOut | Pause, timeout: float
) -> Outcome:
    """A run-control op: the outcome it came to (its `op.reply` is OutcomeReply)."""
    return read_reply(op.reply, _call(ctx, op, timeout))


def _need(args: JSONObject, name: str, op: str) -> JSONValue:
    value = args.get(name)
    if value is None:
        raise ResourceError("bad_request", f"debug {op} needs {name}")
    return value


def _int(args: JSONObject, name: str) -> int | None:
    """An integer argument (the schema checked its type; None when not given)."""
    value = args.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _needs_int(args: JSONObject, name: str, op: str) -> int:
    value = _need(args, name, op)
    if not isinstance(value, int | float | str) or isinstance(value, bool):
        raise ResourceError("bad_request", f"debug {op}: {name} must be a number")
    return int(value)


def _run_place(ctx: ToolContext) -> Place | None:
    place: Place | None = getattr(ctx, "place", None)  # (the run's; not every context has one)
    return place


def debug(ctx: ToolContext, args: JSONObject) -> ToolResult:
    """The `debug` tool's handler: one op."""
    op = str(args["op"])
    ws = ctx.workdir
    given_wait = args.get("wait")
    wait = (
        float(given_wait)
        if isinstance(given_wait, int | float)
        else (ATTACH_WAIT if op == "attach" else DEFAULT_WAIT)
    )
    if op == "adapters":
        place = _run_place(ctx)
        rows = adapters.adapters_report(ws, place.kind if place is not None else "host")
        said = seen(ctx).get("features", {})
        for r in rows:  # what an adapter said of itself in this run beats the table
            r["breakpoints"] = said.get(r["adapter"], r["breakpoints"])
        where = f"adapters run in this run's place: {place.describe() if place else 'host'}"
        return ToolResult.ok(
            f"{where}\n{render_adapters(rows)}", data={"adapters": rows, "place": where}
        )
    if op == "status":
        st = _ask(ctx, Status(), StatusReply, INSPECT_TIMEOUT)
        return ToolResult.ok(render_status(st, ws), data=debug_payload(st))
    if op == "breakpoints":
        return _breakpoints(ctx, args)
    if op in ("launch", "attach"):
        return _start(ctx, args, op, wait)
    if op in STEPS:
        step = STEPS[op](_int(args, "thread_id"), wait)
        outcome = _ask_outcome(ctx, step, wait + INSPECT_TIMEOUT)
        return ToolResult.ok(render_outcome(outcome, ws), data=debug_payload(outcome))
    if op == "pause":
        pause = Pause(_int(args, "thread_id"), min(wait, 5.0))
        outcome = _ask_outcome(ctx, pause, wait + INSPECT_TIMEOUT)
        return ToolResult.ok(render_outcome(outcome, ws), data=debug_payload(outcome))
    if op == "threads":
        threads = _ask(ctx, Threads(), ThreadsReply, INSPECT_TIMEOUT)
        text = "\n".join(f"  {t.id}: {t.name}" for t in threads.threads) or "  (none)"
        return ToolResult.ok("threads:\n" + text, data=debug_payload(threads))
    if op == "stack":
        stack = _ask(ctx, Stack(_int(args, "thread_id")), StackReply, INSPECT_TIMEOUT)
        head = (
            f"thread {stack.thread_id}: {len(stack.frames)} of {stack.total_frames} frames "
            f"(cap {stack.cap})"
        )
        text = "\n".join([head, *(frame_line(f, ws) for f in stack.frames)])
        return ToolResult.ok(text, data=debug_payload(stack))
    if op == "scopes":
        ask = Scopes(_needs_int(args, "frame_id", op))
        scopes = _ask(ctx, ask, ScopesReply, INSPECT_TIMEOUT)
        scope_rows = [
            f"  {s.name}: reference {s.reference}" + (" (expensive)" if s.expensive else "")
            for s in scopes.scopes
        ]
        text = f"scopes of frame {scopes.frame_id}:\n" + "\n".join(scope_rows)
        return ToolResult.ok(text, data=debug_payload(scopes))
    if op == "variables":
        ref = Variables(_needs_int(args, "reference", op))
        block = _ask(ctx, ref, VariablesReply, INSPECT_TIMEOUT)
        body = variables_lines(block.variables, block.total) or ["  (no children)"]
        text = f"reference {block.reference}:\n" + "\n".join(body)
        return ToolResult.ok(text, data=debug_payload(block))
    if op == "evaluate":
        expr = str(_need(args, "expression", op))
        ev = Evaluate(expr, _int(args, "frame_id"))
        got = _ask(ctx, ev, EvaluateReply, INSPECT_TIMEOUT)
        kind = f" ({got.type})" if got.type else ""
        more = f" [reference {got.reference}]" if got.reference else ""
        return ToolResult.ok(f"{expr}{kind} = {got.value}{more}", data=debug_payload(got))
    if op == "output":
        out = _ask(ctx, Output(), OutputReply, INSPECT_TIMEOUT)
        dropped = f"(the first {out.dropped} characters were dropped)\n" if out.dropped else ""
        return ToolResult.ok(dropped + (out.output or "(no output yet)"), data=debug_payload(out))
    if op == "terminate":
        end = _ask(ctx, Terminate(), TerminateReply, INSPECT_TIMEOUT)
        forget_breakpoints(ctx)
        left = end.processes_left
        ended = (
            "detached from the attached program (its breakpoints removed, left running)"
            if end.detached
            else "adapter and program killed, breakpoints cleared"
        )
        text = f"debug session ended; {ended}" + (f" (still alive: {left})" if left else "")
        tail = end.output_tail
        text += f"\noutput tail:\n{tail}" if tail else ""
        return ToolResult.ok(text, data=debug_payload(end))
    return ToolResult.error(f"debug: unknown op {op!r}; ops: {', '.join(OPS)}")


def _start(ctx: ToolContext, args: JSONObject, op: str, wait: float) -> ToolResult:
    ws = ctx.workdir
    name = str(args.get("adapter") or "")
    if op == "launch":
        program = ctx.resolve_path(str(_need(args, "program", op)))
        if not program.exists():
            return ToolResult.error(f"debug launch: {rel(str(program), ws)} does not exist")
        row = adapters.BY_NAME.get(name) if name else adapters.adapter_for(program)
        where = program
    else:
        row = adapters.BY_NAME.get(name) if name else None
        where = ws
        if args.get("port") is None and args.get("pid") is None:
            return ToolResult.error("debug attach needs port or pid (pid: lldb and delve)")
    if row is None:
        known = ", ".join(adapters.BY_NAME)
        what = (
            f"adapter {name!r} is not one of {known}"
            if name
            else (
                f"no adapter debugs {rel(str(where), ws)} (by its extension, or as an executable); "
                f"pass adapter ({known})"
                if op == "launch"
                else f"debug attach needs adapter ({known})"
            )
        )
        return ToolResult.error(f"debug {op}: {what}")
    res = adapters.resolve(row, where, ws)
    if not res.usable:
        return ToolResult.error(
            f"debug {op}: {row.name} cannot start for {rel(str(where), ws)}: {res.why_not()}. "
            "Call debug adapters for what is usable here."
        )
    root = str(res.root)
    timeout = wait + row.startup_timeout + row.launch_timeout + 10.0
    state = seen(ctx)
    lines = dict(state.get("breakpoints", {}))
    fns, kinds = list(state.get("functions") or []), state.get("exceptions")
    start: Launch | Attach
    if op == "launch":
        extra = [str(a) for a in _list(args.get("args"))]
        start = Launch(row.name, str(where), root, extra, wait, lines, fns, kinds, _place(ctx))
    else:
        port, pid = _int(args, "port"), _int(args, "pid")
        start = Attach(row.name, root, port, pid, wait, lines, fns, kinds, _place(ctx))
    started = _ask(ctx, start, Started, timeout)
    keep_launch(ctx, started, row.name)
    return ToolResult.ok(render_launch(started, ws), data=debug_payload(started))


def _list(value: JSONValue) -> list[JSONValue]:
    return value if isinstance(value, list) else []


def _place(ctx: ToolContext) -> JSONObject | None:
    """The run's place for the adapter and its debuggee (None: the host)."""
    place = _run_place(ctx)
    return place.to_wire() if place is not None and place.kind != "host" else None


def _breakpoints(ctx: ToolContext, args: JSONObject) -> ToolResult:
    """Line breakpoints of one file, function breakpoints, exceptions: whichever are given
    (each replaces what was set of its kind); none given: the list of all of them."""
    ws = ctx.workdir
    given = [k for k in ("file", "functions", "exceptions") if args.get(k) is not None]
    if args.get("lines") is not None and args.get("file") is None:
        return ToolResult.error("debug breakpoints: lines needs file (the source file they are in)")
    try:
        specs = bp.line_specs(_list(args.get("lines"))) if "file" in given else []
        fns = bp.function_specs(_list(args["functions"])) if "functions" in given else []
        kinds = bp.exception_kinds(_list(args["exceptions"])) if "exceptions" in given else []
    except bp.BreakpointError as e:
        return ToolResult.error(f"debug breakpoints: {e}")
    if not given:
        st = _ask(ctx, Status(), StatusReply, INSPECT_TIMEOUT)
        text = render_all_breakpoints(st, ws)
        lost = {
            f: v for f, v in kept(ctx).get("breakpoints", {}).items() if f not in st.breakpoints
        }
        if lost:  # the session actor was started anew: the run still has them
            spots = ", ".join(
                f"{rel(f, ws)}:{','.join(str(x['line']) for x in v)}" for f, v in lost.items()
            )
            text += f"\n(kept by the run, set again at the next launch: {spots})"
        return ToolResult.ok(text, data=debug_payload(st))
    texts, data = [], {}
    if "file" in given:
        path = str(ctx.resolve_path(str(args["file"])))
        lines = _ask(ctx, SetBreakpoints(path, specs), BreakpointsReply, INSPECT_TIMEOUT)
        keep_lines(ctx, {path: lines.breakpoints}, replace=[path])
        texts.append(render_breakpoints(rel(path, ws), lines.breakpoints, lines.sent))
        data.update(debug_payload(lines))
    if "functions" in given:
        set_fns = SetFunctionBreakpoints(fns)
        got = _ask(ctx, set_fns, FunctionsReply, INSPECT_TIMEOUT)
        keep_functions(ctx, got.functions)
        texts.append(render_functions(got.functions, got.sent))
        data.update(debug_payload(got))
    if "exceptions" in given:
        set_kinds = SetExceptionBreakpoints(kinds)
        report = _ask(ctx, set_kinds, ExceptionsReply, INSPECT_TIMEOUT)
        keep_exceptions(ctx, kinds)
        texts.append(render_exceptions(report.exceptions, report.sent))
        data.update(debug_payload(report))
    return ToolResult.ok("\n".join(texts), data=data)
