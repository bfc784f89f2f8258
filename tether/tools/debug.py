"""debug: drive a debugger (SPEC.md "debug", tier exec).

Host side: validates the op, resolves paths (already confined by the guardrails) and the
adapter (the intersection rule of `tether.debug.adapters`: a root marker from the
program's directory up to the workspace AND the adapter's binary), then sends a typed op
(`tether.messages.debug_ops`) to the run's one DebugSessionActor and renders its answer.
`adapters` needs no session: it is answered here.

Every call is sent as idempotent: a call whose actor went away (its TTL, `terminate`, a
crash) is retried once on the run's next session actor, which has no program of the old
one to act on - it answers with why the previous session ended.

The breakpoints a run set are its intent until it clears them (or `terminate` does), so
the host keeps them (`ctx.state["debug"]`) and sends them with every launch and attach: a
session actor that lost them (restarted after a crash or its TTL, built anew with its
RunActor or the whole tree, or a retried launch on a new incarnation) sets them again
before it starts the program, and says so.
"""

from __future__ import annotations

from typing import Any

from tether.debug import adapters
from tether.debug import breakpoints as bp
from tether.debug.render import (
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
from tether.messages.calls import ResourceError
from tether.messages.debug_ops import (
    KEY,
    KIND,
    Attach,
    Continue,
    Evaluate,
    Launch,
    Output,
    Pause,
    Scopes,
    SetBreakpoints,
    SetExceptionBreakpoints,
    SetFunctionBreakpoints,
    Stack,
    Status,
    StepIn,
    StepOut,
    StepOver,
    Terminate,
    Threads,
    Variables,
)
from tether.messages.ops import op_args, op_name
from tether.tools.results import ToolResult
from tether.tools.schema import JSON_SAFE_INTEGER, MAX_LINE
from tether.tools.spec import Needs, Tier, ToolContext, ToolSpec

FAMILY = "debug"
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
STEPS = {"continue": Continue, "step_over": StepOver, "step_in": StepIn, "step_out": StepOut}


def _send(ctx: ToolContext, op: Any, timeout: float) -> dict[str, Any]:
    return dict(ctx.call_resource(KIND, KEY, op_name(op), op_args(op), timeout, idempotent=True))


def _need(args: dict[str, Any], name: str, op: str) -> Any:
    if args.get(name) is None:
        raise ResourceError("bad_request", f"debug {op} needs {name}")
    return args[name]


def _debug(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    op = args["op"]
    ws = ctx.workdir
    wait = float(args.get("wait", ATTACH_WAIT if op == "attach" else DEFAULT_WAIT))
    if op == "adapters":
        place = getattr(ctx, "place", None)
        rows = adapters.adapters_report(ws, place.kind if place is not None else "host")
        seen = ctx.state.get(FAMILY, {}).get("features", {})
        for r in rows:  # what an adapter said of itself in this run beats the table
            r["breakpoints"] = seen.get(r["adapter"], r["breakpoints"])
        where = f"adapters run in this run's place: {place.describe() if place else 'host'}"
        return ToolResult.ok(
            f"{where}\n{render_adapters(rows)}", data={"adapters": rows, "place": where}
        )
    if op == "status":
        p = _send(ctx, Status(), INSPECT_TIMEOUT)
        return ToolResult.ok(render_status(p, ws), data=p)
    if op == "breakpoints":
        return _breakpoints(ctx, args)
    if op in ("launch", "attach"):
        return _start(ctx, args, op, wait)
    if op in STEPS:
        p = _send(ctx, STEPS[op](args.get("thread_id"), wait), wait + INSPECT_TIMEOUT)
        return ToolResult.ok(render_outcome(p, ws), data=p)
    if op == "pause":
        p = _send(ctx, Pause(args.get("thread_id"), min(wait, 5.0)), wait + INSPECT_TIMEOUT)
        return ToolResult.ok(render_outcome(p, ws), data=p)
    if op == "threads":
        p = _send(ctx, Threads(), INSPECT_TIMEOUT)
        text = "\n".join(f"  {t['id']}: {t['name']}" for t in p["threads"]) or "  (none)"
        return ToolResult.ok("threads:\n" + text, data=p)
    if op == "stack":
        p = _send(ctx, Stack(args.get("thread_id")), INSPECT_TIMEOUT)
        head = f"thread {p['thread_id']}: {len(p['frames'])} of {p['total_frames']} frames (cap {p['cap']})"
        return ToolResult.ok("\n".join([head, *(frame_line(f, ws) for f in p["frames"])]), data=p)
    if op == "scopes":
        p = _send(ctx, Scopes(int(_need(args, "frame_id", op))), INSPECT_TIMEOUT)
        scope_rows = [
            f"  {s['name']}: reference {s['reference']}"
            + (" (expensive)" if s["expensive"] else "")
            for s in p["scopes"]
        ]
        text = f"scopes of frame {p['frame_id']}:\n" + "\n".join(scope_rows)
        return ToolResult.ok(text, data=p)
    if op == "variables":
        p = _send(ctx, Variables(int(_need(args, "reference", op))), INSPECT_TIMEOUT)
        body = variables_lines(p) or ["  (no children)"]
        return ToolResult.ok(f"reference {p['reference']}:\n" + "\n".join(body), data=p)
    if op == "evaluate":
        expr = str(_need(args, "expression", op))
        p = _send(ctx, Evaluate(expr, args.get("frame_id")), INSPECT_TIMEOUT)
        kind = f" ({p['type']})" if p.get("type") else ""
        more = f" [reference {p['reference']}]" if p.get("reference") else ""
        return ToolResult.ok(f"{expr}{kind} = {p['value']}{more}", data=p)
    if op == "output":
        p = _send(ctx, Output(), INSPECT_TIMEOUT)
        dropped = f"(the first {p['dropped']} characters were dropped)\n" if p["dropped"] else ""
        return ToolResult.ok(dropped + (p["output"] or "(no output yet)"), data=p)
    if op == "terminate":
        p = _send(ctx, Terminate(), INSPECT_TIMEOUT)
        for kind in ("breakpoints", "functions", "exceptions"):  # (terminate clears them)
            ctx.state.get(FAMILY, {}).pop(kind, None)
        left = p.get("processes_left") or []
        ended = (
            "detached from the attached program (its breakpoints removed, left running)"
            if p.get("detached")
            else "adapter and program killed, breakpoints cleared"
        )
        text = f"debug session ended; {ended}" + (f" (still alive: {left})" if left else "")
        tail = p.get("output_tail") or ""
        return ToolResult.ok(text + (f"\noutput tail:\n{tail}" if tail else ""), data=p)
    return ToolResult.error(f"debug: unknown op {op!r}; ops: {', '.join(OPS)}")


def _start(ctx: ToolContext, args: dict[str, Any], op: str, wait: float) -> ToolResult:
    ws = ctx.workdir
    name = args.get("adapter")
    if op == "launch":
        program = ctx.resolve_path(_need(args, "program", op))
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
    state = ctx.state.get(FAMILY, {})
    kept = dict(state.get("breakpoints", {}))
    fns, kinds = list(state.get("functions") or []), state.get("exceptions")
    if op == "launch":
        extra = [str(a) for a in args.get("args") or []]
        launch = Launch(row.name, str(where), root, extra, wait, kept, fns, kinds, _place(ctx))
        p = _send(ctx, launch, timeout)
    else:
        port, pid = args.get("port"), args.get("pid")
        attach = Attach(row.name, root, port, pid, wait, kept, fns, kinds, _place(ctx))
        p = _send(ctx, attach, timeout)
    _keep_launch(ctx, p, row.name)
    return ToolResult.ok(render_launch(p, ws), data=p)


def _place(ctx: ToolContext) -> dict[str, Any] | None:
    """The run's place for the adapter and its debuggee (None: the host)."""
    place = getattr(ctx, "place", None)
    return place.to_wire() if place is not None and place.kind != "host" else None


def _breakpoints(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """Line breakpoints of one file, function breakpoints, exceptions: whichever are given
    (each replaces what was set of its kind); none given: the list of all of them."""
    ws = ctx.workdir
    given = [k for k in ("file", "functions", "exceptions") if args.get(k) is not None]
    if args.get("lines") is not None and args.get("file") is None:
        return ToolResult.error("debug breakpoints: lines needs file (the source file they are in)")
    try:
        specs = bp.line_specs(args.get("lines") or []) if "file" in given else []
        fns = bp.function_specs(args["functions"]) if "functions" in given else []
        kinds = bp.exception_kinds(args["exceptions"]) if "exceptions" in given else []
    except bp.BreakpointError as e:
        return ToolResult.error(f"debug breakpoints: {e}")
    if not given:
        p = _send(ctx, Status(), INSPECT_TIMEOUT)
        text = render_all_breakpoints(p, ws)
        lost = {
            f: v for f, v in _kept(ctx).get("breakpoints", {}).items() if f not in p["breakpoints"]
        }
        if lost:  # the session actor was started anew: the run still has them
            spots = ", ".join(
                f"{rel(f, ws)}:{','.join(str(x['line']) for x in v)}" for f, v in lost.items()
            )
            text += f"\n(kept by the run, set again at the next launch: {spots})"
        return ToolResult.ok(text, data=p)
    texts, data = [], {}
    if "file" in given:
        path = str(ctx.resolve_path(args["file"]))
        p = _send(ctx, SetBreakpoints(path, specs), INSPECT_TIMEOUT)
        _keep_lines(ctx, {path: p["breakpoints"]}, replace=[path])
        texts.append(render_breakpoints(rel(path, ws), p["breakpoints"], p["sent"]))
        data.update(p)
    if "functions" in given:
        p = _send(ctx, SetFunctionBreakpoints(fns), INSPECT_TIMEOUT)
        _kept(ctx)["functions"] = [f["spec"] for f in p["functions"]]
        texts.append(render_functions(p["functions"], p["sent"]))
        data.update(p)
    if "exceptions" in given:
        p = _send(ctx, SetExceptionBreakpoints(kinds), INSPECT_TIMEOUT)
        _kept(ctx)["exceptions"] = kinds
        texts.append(render_exceptions(p["exceptions"], p["sent"]))
        data.update(p)
    return ToolResult.ok("\n".join(texts), data=data)


def _kept(ctx: ToolContext) -> dict[str, Any]:
    return ctx.state.setdefault(FAMILY, {})


def _keep_lines(
    ctx: ToolContext, rows: dict[str, list[dict[str, Any]]], replace: list[str] | None = None
) -> None:
    """The run's line breakpoints, as the session answered them (their anchors, and their
    lines as the last launch moved them); `replace`: files whose set is exactly `rows`."""
    kept = _kept(ctx).setdefault("breakpoints", {})
    for path in replace or []:
        kept.pop(path, None)
    for path, file_rows in rows.items():
        if file_rows:
            kept[path] = [r["spec"] for r in file_rows]


def _keep_launch(ctx: ToolContext, p: dict[str, Any], adapter: str) -> None:
    """After a launch: the breakpoints as it moved them, and what the adapter said it can do."""
    _keep_lines(ctx, p.get("breakpoints") or {})
    if p.get("functions"):
        _kept(ctx)["functions"] = [f["spec"] for f in p["functions"]]
    if p.get("features"):
        _kept(ctx).setdefault("features", {})[adapter] = p["features"]


_DESCRIPTION = """Drive a debugger (Python: debugpy, C/C++/Rust binaries: lldb-dap, Go: delve, Dart). \
One session per conversation (hard TTL 30 min); calls run one at a time.
Ops:
- adapters: which adapters can be used here, and why not
- status: whether a session runs, and where it is stopped
- breakpoints: file + lines[] (empty clears the file); each line a number or {"line": 12, \
"condition": "x > 3", "hit_condition": "900", "log_message": "x={x}"} (hit_condition: N = the Nth hit \
only, ">= N" = from the Nth on, "% N" = every Nth; log_message: a logpoint, written to output, no stop); \
functions: [name or {"name", "condition", "hit_condition"}] (replaces them); exceptions: ["raised", \
"uncaught"] (replaces; [] stops on none). May be set before launch; no arguments: lists them all. \
A breakpoint follows its line's text: an edit while a program runs leaves it on the code that \
runs ("changed since launch"); the next launch moves it to where its text is now, or says it lost it
- launch: program (a .py file, a Go package dir or .go file, an executable built with -g), args[]; \
stops at your breakpoints, or says it exited (code, output tail) or still runs
- attach: adapter + port (debugpy --listen, lldb gdb-remote, dlv --headless) or pid (lldb, delve); \
terminate detaches and leaves that program running
- continue / step_over / step_in / step_out / pause: thread_id? ; wait? seconds
- threads; stack: thread_id? (30 frames); scopes: frame_id; variables: reference (50 children)
- evaluate: expression, frame_id? ; output: the program's output (bounded) ; terminate
Frame ids and references go stale when the program moves: call stack again after a step.
Example: {"op": "breakpoints", "file": "app.py", "lines": [12]} then {"op": "launch", "program": "app.py"}"""


_CONDITIONS: dict[str, Any] = {
    "condition": {"type": "string", "description": "stop only when this expression is true"},
    "hit_condition": {
        "type": ["string", "integer"],
        "minimum": 1,
        "maximum": 10**9,
        "description": 'N: the Nth hit only; ">= N": from the Nth on; "% N": every Nth',
    },
}


def specs() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="debug",
            tier=Tier.EXEC,
            description=_DESCRIPTION,
            schema={
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": list(OPS)},
                    "file": {"type": "string", "description": "workspace-relative source file"},
                    "lines": {
                        "type": "array",
                        "items": {
                            "anyOf": [
                                {"type": "integer", "minimum": 1, "maximum": MAX_LINE},
                                {
                                    "type": "object",
                                    "properties": {
                                        "line": {
                                            "type": "integer",
                                            "minimum": 1,
                                            "maximum": MAX_LINE,
                                        },
                                        **_CONDITIONS,
                                        "log_message": {
                                            "type": "string",
                                            "description": "a logpoint: {expr} interpolated",
                                        },
                                    },
                                    "required": ["line"],
                                    "additionalProperties": False,
                                },
                            ]
                        },
                    },
                    "functions": {
                        "type": "array",
                        "items": {
                            "anyOf": [
                                {"type": "string", "minLength": 1},
                                {
                                    "type": "object",
                                    "properties": {
                                        "name": {"type": "string", "minLength": 1},
                                        **_CONDITIONS,
                                    },
                                    "required": ["name"],
                                    "additionalProperties": False,
                                },
                            ]
                        },
                    },
                    "exceptions": {
                        "type": "array",
                        "items": {"type": "string", "enum": list(bp.EXCEPTION_KINDS)},
                    },
                    "program": {"type": "string", "description": "workspace-relative program"},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "adapter": {"type": "string", "enum": list(adapters.BY_NAME)},
                    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "pid": {"type": "integer", "minimum": 1, "maximum": 2**22},  # Linux pid_max
                    "thread_id": {"type": "integer", "minimum": 0, "maximum": JSON_SAFE_INTEGER},
                    "frame_id": {"type": "integer", "minimum": 0, "maximum": JSON_SAFE_INTEGER},
                    "reference": {"type": "integer", "minimum": 1, "maximum": JSON_SAFE_INTEGER},
                    "expression": {"type": "string", "minLength": 1},
                    "wait": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": MAX_WAIT,
                        "description": (
                            "seconds a run-control op waits for a stop (default 10; attach 2)"
                        ),
                    },
                },
                "required": ["op"],
                "additionalProperties": False,
            },
            handler=_debug,
            needs=frozenset({Needs.WORKDIR, Needs.CONVERSATION, Needs.DEBUG_SESSIONS}),
            path_args=("file", "program"),
            parallel_safe=False,
        )
    ]
