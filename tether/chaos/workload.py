"""The conversations of a chaos run: each a thread with its own Run, calling tools in a
random mix (seeded) through the public tool API, and checking every answer.

A conversation owns FILES scratch files (tether.chaos.scratch) and is their only writer,
and its calls are sequential: so it always knows what each file holds, what a read must
show, what a search must find. Each call is tagged where the tool allows it (the file's
version tag, a token in an eval cell or a vibe brief, the program a debug session stops
in), and a reply carrying anyone else's tag is a cross-wired reply. A guard conversation
on a read-only surface tries write and exec tools on its own file: each must be refused
and change nothing.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tether.chaos import invariants as inv
from tether.chaos.scratch import FILES, PROGRAM_LINE, TAG_LINE, Workspace, parse, render, tag
from tether.chaos.scratch import tag_function as tag_fn
from tether.debug.adapters import BY_NAME as DEBUG_ADAPTERS
from tether.json_types import JSONObject, JSONValue
from tether.lsp.servers import SERVERS
from tether.tools.debug_tool.actions import DEFAULT_WAIT as DEBUG_WAIT
from tether.tools.debug_tool.actions import INSPECT_TIMEOUT
from tether.tools.eval import REPLY_SLACK, TAKE_TIMEOUT
from tether.tools.lsp_tool.actions import QUERY_TIMEOUT
from tether.tools.lsp_tool.on_write import WRITE_CAP
from tether.tools.results import ToolResult
from tether.tools.structural import SEARCH_TIMEOUT
from tether.tools.vibe_workers import CALL_SLACK, CALL_TIMEOUT, PREPARE_TIMEOUT

if TYPE_CHECKING:
    from tether.run import Run
    from tether.vibe_runner import WorkerIO

EVAL_WALL = 20.0  # s: the eval budgets the harness gives its runs (a cell here takes ms)
EVAL_INACTIVITY = 10.0
VIBE_WAIT = 20.0  # s a vibe_wait waits for its (echoing) worker
SLACK = 5.0  # s a call may end past its budget (a loaded machine) before it is late

# What a call of each tool may take at most: the sum of the budgets it sets itself (the
# constants of its module), so a call past it is one that nothing bounded.
_LSP_START = max(row.startup_timeout for row in SERVERS)
_WRITE = (WRITE_CAP + 20.0) + (WRITE_CAP + _LSP_START + 2.0)  # baseline, then the sync
_DEBUGPY = DEBUG_ADAPTERS["debugpy"]
BUDGETS: dict[str, float] = {
    "read": 5.0,  # the host reads a file
    "write": _WRITE,
    "edit": _WRITE,
    "apply_patch": _WRITE,
    "resolve": _WRITE,
    "ast_grep": SEARCH_TIMEOUT,
    "ast_edit": SEARCH_TIMEOUT,
    "lsp": QUERY_TIMEOUT,
    "lsp_rename": QUERY_TIMEOUT + _WRITE,
    "eval": TAKE_TIMEOUT + EVAL_WALL + REPLY_SLACK,
    "debug": DEBUG_WAIT + INSPECT_TIMEOUT,
    "vibe_spawn": CALL_TIMEOUT + PREPARE_TIMEOUT + CALL_TIMEOUT,
    "vibe_wait": VIBE_WAIT + CALL_SLACK + CALL_TIMEOUT,
}
DEBUG_LAUNCH = DEBUG_WAIT + _DEBUGPY.startup_timeout + _DEBUGPY.launch_timeout + 10.0

_CODE = re.compile(
    r"\b(deadline|restarting|resource_died|gave_up|unavailable|dropped|failed|bad_request)\b"
)


def budget(tool: str, args: Mapping[str, JSONValue]) -> float:
    if tool == "debug" and args.get("op") == "launch":
        return DEBUG_LAUNCH
    return BUDGETS[tool]


def echo_brief(brief: str, worker: WorkerIO) -> str:
    """The chaos run's vibe worker (a CallableBackend): answers with its own brief."""
    return f"echo {brief}"


@dataclass(frozen=True)
class CallRecord:
    run: str
    tool: str
    started: float  # s since the chaos run began
    took: float
    ok: bool
    code: str  # why it failed: an error code the text names, else "tool_error"; "" if ok
    error: str = ""  # the start of its error text


@dataclass
class Ledger:
    """What every conversation and the fault injector report, in one place (threads)."""

    t0: float = field(default_factory=time.monotonic)
    calls: list[CallRecord] = field(default_factory=list)
    violations: list[inv.Violation] = field(default_factory=list)
    notices: list[inv.Violation] = field(default_factory=list)  # odd, yet no invariant broken
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def record(self, call: CallRecord) -> None:
        with self.lock:
            self.calls.append(call)

    def violate(self, invariant: str, run: str, tool: str, detail: str) -> None:
        if detail:
            with self.lock:
                self.violations.append(inv.Violation(invariant, run, tool, self.now(), detail))

    def notice(self, run: str, tool: str, detail: str) -> None:
        with self.lock:
            self.notices.append(inv.Violation("notice", run, tool, self.now(), detail))


@dataclass(frozen=True)
class InFlight:
    tool: str
    started: float
    deadline: float


class Conversation:
    """One conversation's calls on its own thread, until `stop` is set."""

    def __init__(
        self,
        run: Run,
        workspace: Workspace,
        ledger: Ledger,
        ops: Iterable[str],
        seed: int,
        stop: threading.Event,
        pace: float,
    ):
        self.run = run
        self.name = str(run.run_id)
        self.ws = workspace
        self.ledger = ledger
        self.rng = random.Random(seed)
        self.stop = stop
        self.pace = pace
        self.versions = [0] * FILES
        self.generation = 0
        self.tokens = 0
        self.in_flight: InFlight | None = None
        self.project_total = -1  # what PROJECT_SEARCH found before the load
        self.folder = workspace.relative(workspace.conversation_dir(self.name))
        table = self.ops_table()
        chosen = [op for op in ops if op in table]
        self.ops = [table[op] for op in chosen]
        self.weights = [WEIGHTS.get(op, 1.0) for op in chosen]
        self.thread = threading.Thread(target=self._loop, name=f"chaos-{self.name}", daemon=True)

    def ops_table(self) -> dict[str, Callable[[], None]]:
        return {
            "read": self.read,
            "write": self.write,
            "edit": self.edit,
            "ast_grep": self.ast_grep,
            "ast_edit": self.ast_edit,
            "lsp": self.lsp,
            "eval": self.eval,
            "debug": self.debug,
            "vibe": self.vibe,
            "escape": self.escape,
            "search_project": self.search_project,
        }

    def _loop(self) -> None:
        # the escape check first, once: at its weight a short run on a loaded machine could
        # end before drawing it, and the report would then claim nothing about confinement
        first = [self.escape] if self.escape in self.ops else []
        while not self.stop.wait(self.pace):
            operation = first.pop() if first else self.rng.choices(self.ops, self.weights)[0]
            try:
                operation()
            except Exception as exc:  # noqa: BLE001 - a check that could not be made fails the run
                detail = (
                    f"{operation.__name__} could not check its call: {type(exc).__name__}: {exc}"
                )
                self.ledger.violate(inv.HARNESS, self.name, operation.__name__, detail)

    # --- one call -------------------------------------------------------------------
    def call(self, tool: str, args: Mapping[str, JSONValue], label: str = "") -> ToolResult:
        """One tool call, timed against its deadline and recorded (as `label` if given)."""
        deadline = budget(tool, args)
        started = self.ledger.now()
        self.in_flight = InFlight(tool, started, deadline)
        result = self.run.call(tool, args)
        took = self.ledger.now() - started
        self.in_flight = None
        code = "" if not result.is_error else _error_code(result)
        error = result.text[:240] if result.is_error else ""
        record = CallRecord(
            self.name, label or tool, started, took, not result.is_error, code, error
        )
        self.ledger.record(record)
        self.ledger.violate(inv.DEADLINE, self.name, tool, inv.late(took, deadline, SLACK))
        return result

    def check_reply(
        self, tool: str, result: ToolResult, expected: str, mine: Iterable[str]
    ) -> None:
        """A reply names nothing of another call, and an answer names what it was about."""
        self.ledger.violate(inv.CROSS_WIRED, self.name, tool, inv.foreign_tags(result.text, mine))
        if not result.is_error:
            self.ledger.violate(inv.WRONG, self.name, tool, inv.missing_tag(result.text, expected))

    def path(self, index: int) -> str:
        return self.ws.relative(self.ws.file(self.name, index))

    def file_tags(self, index: int) -> set[str]:
        """Every tag a reply about one of this conversation's files may carry."""
        versions = range(self.versions[index] + 1)
        return {tag_fn(self.name, index), *(tag(self.name, index, v) for v in versions)}

    def token(self, what: str) -> str:
        self.tokens += 1
        return f"tok_{self.name}_{what}{self.tokens}"

    # --- the workload ---------------------------------------------------------------
    def read(self) -> None:
        index = self.rng.randrange(FILES)
        result = self.call("read", {"path": self.path(index)})
        current = tag(self.name, index, self.versions[index])
        self.check_reply("read", result, current, {current, tag_fn(self.name, index)})

    def write(self) -> None:
        index = self.rng.randrange(FILES)
        old = self.versions[index]
        content = render(self.name, index, old + 1, self.generation)
        result = self.call("write", {"path": self.path(index), "content": content})
        self.after_write("write", index, old, result)

    def edit(self) -> None:
        index = self.rng.randrange(FILES)
        old = self.versions[index]
        args = {
            "path": self.path(index),
            "old_string": f'return "{tag(self.name, index, old)}"',
            "new_string": f'return "{tag(self.name, index, old + 1)}"',
        }
        self.after_write("edit", index, old, self.call("edit", args))

    def after_write(self, tool: str, index: int, old: int, result: ToolResult) -> None:
        """The file holds the new version (the call succeeded) or one of old and new (it
        failed), whole; the reply names no other conversation's file."""
        self.versions[index] = old + 1  # (for the reply's check: either version is fine)
        self.check_reply(tool, result, "", self.file_tags(index))
        text = self.ws.read(self.name, index)
        allowed = [old + 1] if not result.is_error else [old, old + 1]
        problem = inv.file_state(text, self.name, index, allowed, self.generation)
        self.ledger.violate(inv.PARTIAL_WRITE, self.name, tool, problem)
        parsed = parse(text)
        self.versions[index] = parsed.version if parsed is not None else old + 1

    def escape(self) -> None:
        """A write to a path just outside the working directory: refused, nothing there."""
        outside = self.ws.outside(f"{self.token('escape')}.txt")
        if outside is None:
            return
        path = os.path.relpath(outside, self.ws.root)
        result = self.call("write", {"path": path, "content": "escaped\n"}, "write (outside)")
        problem = inv.escaped(result.is_error, outside.exists())
        self.ledger.violate(inv.CONFINEMENT, self.name, "write", problem)
        outside.unlink(missing_ok=True)

    def ast_grep(self) -> None:
        args = {"pattern": "GENERATION = $G", "path": self.folder, "language": "python"}
        result = self.call("ast_grep", args)
        if result.is_error:
            return
        matches = (result.data or {}).get("matches", [])
        crossed, wrong = inv.search_matches(matches, self.folder, FILES, self.generation)
        self.ledger.violate(inv.CROSS_WIRED, self.name, "ast_grep", crossed)
        self.ledger.violate(inv.WRONG, self.name, "ast_grep", wrong)

    def search_project(self) -> None:
        """A search of the whole workspace (the project's own files: the harness's files
        import nothing): every parser slot's share, the same total as before the load."""
        result = self.call("ast_grep", PROJECT_SEARCH, "ast_grep (whole workspace)")
        if result.is_error:
            return
        total = (result.data or {}).get("total")
        if total != self.project_total:
            detail = f"found {total} imports; before the load, {self.project_total}"
            self.ledger.violate(inv.WRONG, self.name, "ast_grep", detail)

    def ast_edit(self) -> None:
        """A multi-file change: stage GENERATION g -> g+1 in every file, then accept it."""
        before = self.generation
        args = {
            "pattern": f"GENERATION = {before}",
            "rewrite": f"GENERATION = {before + 1}",
            "path": self.folder,
            "language": "python",
        }
        staged = self.call("ast_edit", args)
        edit_id = (staged.data or {}).get("edit_id") if not staged.is_error else None
        if edit_id is None:
            self.check_generations("ast_edit", before, before, ok=True)  # (nothing written)
            return
        paths = [str(f.get("path")) for f in (staged.data or {}).get("files", [])]
        crossed, _ = inv.search_matches([{"path": p} for p in paths], self.folder, 0, 0)
        self.ledger.violate(inv.CROSS_WIRED, self.name, "ast_edit", crossed)
        accepted = self.call("resolve", {"edit_id": edit_id, "action": "accept"})
        self.check_generations("resolve", before, before + 1, ok=not accepted.is_error)

    def check_generations(self, tool: str, before: int, after: int, ok: bool) -> None:
        files = [parse(self.ws.read(self.name, i)) for i in range(FILES)]
        problem = inv.generations(files, before, after, ok)
        self.ledger.violate(inv.PARTIAL_WRITE, self.name, tool, problem)
        if files[0] is not None and not problem:
            self.generation = files[0].generation

    def lsp(self) -> None:
        index = self.rng.randrange(FILES)
        name = tag_fn(self.name, index)
        args: JSONObject = {
            "action": "hover",
            "file": self.path(index),
            "line": TAG_LINE,
            "symbol": name,
        }
        self.check_reply("lsp", self.call("lsp", args), name, self.file_tags(index))

    def eval(self) -> None:
        """A cell that names its own token; every other one also reads one of the
        conversation's files through the cell's tool() bridge."""
        token = self.token("eval")
        code, mine = f'token = "{token}"\ntoken', {token}
        if self.tokens % 2:
            index = self.rng.randrange(FILES)
            code = f'print(tool("read", {{"path": "{self.path(index)}"}}))\n{code}'
            mine |= self.file_tags(index)
        args = {"code": code, "description": EVAL_DESCRIPTION}
        self.check_reply("eval", self.call("eval", args), token, mine)

    def debug(self) -> None:
        """A session to a breakpoint in the conversation's own program, an expression in
        that frame, and its end (always: a session left open holds a debugger)."""
        token = f"tok_{self.name}_debug"
        program = f"{self.folder}/prog.py"
        try:
            args: JSONObject = {"op": "breakpoints", "file": program, "lines": [PROGRAM_LINE]}
            marked = self.call("debug", args)
            if marked.is_error:
                return
            launched = self.call("debug", {"op": "launch", "program": program})
            outcome = (launched.data or {}).get("outcome") if not launched.is_error else None
            if outcome == "exited":  # (its own output, but past the breakpoint)
                self.check_reply("debug", launched, token, {token})
                self.ledger.notice(self.name, "debug", BREAKPOINT_LOST)
                return
            self.check_reply("debug", launched, f"prog.py:{PROGRAM_LINE}", {token})
            if outcome != "stopped":
                return
            value = self.call("debug", {"op": "evaluate", "expression": "TAG"})
            self.check_reply("debug", value, token, {token})
        finally:
            self.call("debug", {"op": "terminate"})

    def vibe(self) -> None:
        token = self.token("vibe")
        spawned = self.call("vibe_spawn", {"brief": token, "label": "chaos", "tier": "fast"})
        self.check_reply("vibe_spawn", spawned, "", {token})
        worker = (spawned.data or {}).get("worker_id") if not spawned.is_error else None
        if worker is None:
            return
        waited = self.call("vibe_wait", {"worker_id": worker, "timeout_seconds": VIBE_WAIT})
        finished = (waited.data or {}).get("status") == "done"
        self.check_reply("vibe_wait", waited, token if finished else "", {token})


EVAL_DESCRIPTION = "Echo this chaos call's own token back"
BREAKPOINT_LOST = (
    "a launch ran to the end past the breakpoint set just before it (the host sets a run's "
    "breakpoints again on a restarted session before a launch: a fault between that and the "
    "launch itself can still take them)"
)
WEIGHTS = {
    "read": 3.0,
    "write": 2.0,
    "edit": 2.0,
    "ast_grep": 2.0,
    "ast_edit": 1.0,
    "lsp": 3.0,
    "eval": 1.5,
    "debug": 0.5,
    "vibe": 1.0,
    "escape": 0.5,
    "search_project": 1.0,
}
PROJECT_SEARCH: JSONObject = {"pattern": "import $M", "language": "python", "max_results": 5}
OPS = tuple(WEIGHTS)
# what the guard conversation tries on a read-only surface: every write and exec tool
BREACHES: dict[str, Callable[[str, int], JSONObject]] = {
    "write": lambda path, _: {"path": path, "content": "breached\n"},
    "edit": lambda path, _: {"path": path, "old_string": "GENERATION", "new_string": "BREACHED"},
    "apply_patch": lambda path, _: {"patch": f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-x\n+y\n"},
    "ast_edit": lambda path, _: {
        "pattern": "GENERATION = $G",
        "rewrite": "BREACHED = $G",
        "path": path,
        "language": "python",
    },
    "resolve": lambda _, __: {"edit_id": "edit_1", "action": "accept"},
    "lsp_rename": lambda path, line: {
        "file": path,
        "line": line,
        "symbol": "tag",
        "new_name": "breached",
    },
    "eval": lambda _, __: {"code": "open('breach', 'w')", "description": EVAL_DESCRIPTION},
    "debug": lambda path, _: {"op": "launch", "program": path},
}


class Guard(Conversation):
    """A conversation on a read-only surface: read tools as usual, and every so often a
    write or exec tool, which must be refused (tier) and leave its file unchanged."""

    def ops_table(self) -> dict[str, Callable[[], None]]:
        return {
            "read": self.read,
            "ast_grep": self.ast_grep,
            "lsp": self.lsp,
            "breach": self.breach,
        }

    def breach(self) -> None:
        visible = {status.name: status.tier.value for status in self.run.tools()}
        problem = inv.visible_breach(self.run.surface.value, visible)
        self.ledger.violate(inv.TIER, self.name, "(tools)", problem)
        tool = self.rng.choice(sorted(BREACHES))
        index = self.rng.randrange(FILES)
        before = self.ws.read(self.name, index)
        args = BREACHES[tool](self.path(index), TAG_LINE)
        result = self.call(tool, args, label=f"{tool} (read-only surface)")
        refused = (result.data or {}).get("refused") == "tier" if result.is_error else False
        after = self.ws.read(self.name, index)
        problem = inv.tier_breach(tool, result.is_error, refused, before, after)
        self.ledger.violate(inv.TIER, self.name, tool, problem)


GUARD_OPS = ("read", "ast_grep", "lsp", "breach")


class TornWatch:
    """Reads every scratch file over and over while the load runs: a reader must only
    ever see a whole version, never a file half written or missing for a moment."""

    def __init__(self, ws: Workspace, runs: Iterable[str], ledger: Ledger, stop: threading.Event):
        self.ws = ws
        self.runs = list(runs)
        self.ledger = ledger
        self.stop = stop
        self.reads = 0
        self.thread = threading.Thread(target=self._loop, name="chaos-torn-watch", daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(0.02):
            for run in self.runs:
                for index in range(FILES):
                    self.ledger.violate(inv.PARTIAL_WRITE, run, "(a reader)", self.look(run, index))

    def look(self, run: str, index: int) -> str:
        self.reads += 1
        try:
            text = self.ws.read(run, index)
        except FileNotFoundError:
            return f"file {index} was missing for a moment (a write is not one rename)"
        if parse(text) is None:
            return f"a reader saw file {index} torn ({len(text)} bytes)"
        return ""


def _error_code(result: ToolResult) -> str:
    data = result.data if isinstance(result.data, dict) else {}
    if data.get("code"):
        return str(data["code"])
    if data.get("refused"):
        return f"refused:{data['refused']}"
    found = _CODE.search(result.text)
    return found.group(1) if found else "tool_error"
