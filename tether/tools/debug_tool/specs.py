"""The declaration of `debug`: its description and argument schema, for a model."""

from __future__ import annotations

from tether.debug import adapters
from tether.debug import breakpoints as bp
from tether.json_types import JSONObject
from tether.tools.debug_tool.actions import MAX_WAIT, OPS, debug
from tether.tools.schema import JSON_SAFE_INTEGER, MAX_LINE
from tether.tools.spec import Needs, Tier, ToolSpec

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


_CONDITIONS: JSONObject = {
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
            handler=debug,
            needs=frozenset({Needs.WORKDIR, Needs.CONVERSATION, Needs.DEBUG_SESSIONS}),
            path_args=("file", "program"),
            parallel_safe=False,
        )
    ]
