"""`tether demo`: the main job — a real run of the tools on the bundled example project.

It copies examples/sample_project to a temporary directory (the demo writes files), boots a
runtime, opens a conversation on the copy and drives each tool family the way an agent
would: structural search, language-server queries in four languages, a debug session to a
breakpoint, diagnostics folded into a write, a staged rewrite accepted through resolve, a
fault injected into a live language server and the supervisor's restart, a question card
on the terminal port (answered by the demo with --yes), a background vibe worker, then the
health tree and a check that no process outlives the runtime. Every step prints the
model-facing text, with a step counter and the time since the start. Where bubblewrap
works, the steps that run the conversation's code (eval's Python and JavaScript cells, the
debuggee, the worker) run in a twin conversation in a sandbox place, and the demo says so.
A language server that is not installed skips its steps and is named at the end, with how
to install it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tether import Runtime, ToolResult
from tether.health_node import HealthNode
from tether.json_types import JSONObject
from tether.places import Place, PlaceError, check
from tether.question_ports import TerminalPort
from tether.run import Run
from tether.tools.eval import configure as configure_eval
from tether.tools.eval import prepare as prepare_eval
from tether.tools.eval import warm_spares
from tether.tools.vibe_workers import CallableBackend, VibeConfig

if TYPE_CHECKING:
    from tether.vibe_runner import WorkerIO

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample_project"


def _show(title: str, tool: str, args: JSONObject, result: ToolResult) -> None:
    mark = "error" if result.is_error else "ok"
    print(f"\n=== {title}\n--> {tool} {args}\n<-- [{mark}]")
    text = result.text if len(result.text) < 2400 else result.text[:2400] + "\n… (cut for the demo)"
    print(textwrap.indent(text, "    "))


class Progress:
    """The step counter and the time since the demo began, shown before every step."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.steps = 0

    def next(self) -> str:
        self.steps += 1
        return f"[step {self.steps}, {time.monotonic() - self.started:.1f} s]"


PROGRESS = Progress()


def _step(run: Run, title: str, tool: str, args: JSONObject) -> ToolResult:
    where = PROGRESS.next()
    started = time.monotonic()
    result = run.call(tool, args)
    _show(f"{where} {title} ({(time.monotonic() - started) * 1000:.0f} ms)", tool, args, result)
    return result


def _expect(result: ToolResult, *parts: str, error: bool = False) -> int:
    """1 (a surprise) unless the result is (not) an error and shows every part."""
    missing = [p for p in parts if p not in result.text]
    if result.is_error != error or missing:
        print(f"    !! not as expected{': missing ' + repr(missing) if missing else ''}")
        return 1
    return 0


def _tree(node: HealthNode, depth: int = 0) -> None:
    name = node.get("name") or f"{node.get('kind', '?')}:{node.get('key', '')}"
    pids = ",".join(str(p.get("pid")) for p in node.get("pids", []))
    extra = f" pids={pids}" if pids else ""
    print(
        f"    {'  ' * depth}{name} [{node.get('state', '?')}] restarts={node.get('restarts', 0)}{extra}"
    )
    for child in node.get("children", []):
        _tree(child, depth + 1)


class Step(NamedTuple):
    title: str
    tool: str
    args: JSONObject
    expect_error: bool  # an error result is what the step shows
    needs: str = ""  # a language server the step cannot run without


# how to get each optional server (what `tether demo` says when one is missing)
INSTALL_HINT = {
    "basedpyright-langserver": "pip install basedpyright (bash scripts/install.sh does)",
    "typescript-language-server": "npm install -g typescript-language-server@5 typescript@5",
    "clangd": "apt-get install clangd",
    "gopls": "apt-get install gopls golang-go",
}

STEPS: list[Step] = [
    Step("structural search: a guard that frees what it tests ($P repeated)", "ast_grep",
     {"pattern": "if ($P != NULL) free($P);", "language": "c"}, False),
    Step("the same shape as a regex habit gets a specific error", "ast_grep",
     {"pattern": "free(.*)", "language": "c"}, True),
    Step("structural search in Python, scoped to a folder", "ast_grep",
     {"pattern": "if $A.get($B) is not None: $$$", "path": "inventory", "language": "python"},
     False),
    Step("language server: which servers can run here, and why not", "lsp",
     {"action": "status"}, False),
    Step("hover by line and symbol (basedpyright)", "lsp",
     {"action": "hover", "file": "inventory/report.py", "line": 6, "symbol": "Stock"}, False, "basedpyright-langserver"),
    Step("definition", "lsp",
     {"action": "definition", "file": "inventory/main.py", "line": 13, "symbol": "add"}, False, "basedpyright-langserver"),
    Step("references, grouped by file", "lsp",
     {"action": "references", "file": "inventory/models.py", "line": 7, "symbol": "Item"}, False, "basedpyright-langserver"),
    Step("a column-free position: a symbol that is not on the line is an error", "lsp",
     {"action": "hover", "file": "inventory/main.py", "line": 13, "symbol": "remove"}, True, "basedpyright-langserver"),
    Step("hover in TypeScript (typescript-language-server)", "lsp",
     {"action": "hover", "file": "web/checkout.ts", "line": 5, "symbol": "totalCents"}, False, "typescript-language-server"),
    Step("hover in C (clangd)", "lsp",
     {"action": "hover", "file": "native/checksum.c", "line": 4, "symbol": "checksum"}, False, "clangd"),
    Step("definition in Go (gopls)", "lsp",
     {"action": "definition", "file": "service/health.go", "line": 13, "symbol": "Status"},
     False, "gopls"),
    Step("a write that breaks the build: the new diagnostic is folded into the edit's result",
     "edit", {"path": "inventory/main.py", "old_string": 'stock.add(catalog["A1"], 2)',
              "new_string": 'stock.add(catalog["A1"], "two")'}, False),
    Step("an unrelated edit: the same error is not reported again", "edit",
     {"path": "inventory/main.py", "old_string": "Build a small stock",
      "new_string": "Build a tiny stock"}, False),
    Step("a write outside the workspace is refused", "write",
     {"path": "../escape.txt", "content": "x"}, True),
]  # fmt: skip
FIRST_EDIT = next(i for i, step in enumerate(STEPS) if step.tool == "edit")


def run_demo(project: Path, auto_answer: bool = True, saved_plot: Path | None = None) -> int:
    global PROGRESS
    PROGRESS = Progress()
    work = Path(tempfile.mkdtemp(prefix="tether-demo-"))
    shutil.copytree(project, work / "project")
    workdir = work / "project"
    print(f"tether demo on a copy of {project} at {workdir}")
    surprises = 0
    missing = [name for name in INSTALL_HINT if shutil.which(name) is None]
    port, answers = _terminal_port(auto_answer)
    saved_plot = saved_plot or Path(tempfile.gettempdir()) / "tether-demo-plot.png"
    try:
        with Runtime.start() as rt:
            run = rt.open_run(
                "demo-conversation",
                workdir=str(workdir),
                prewarm=True,
                question_port=port,
                vibe=True,
                vibe_config=VibeConfig({"fast": CallableBackend(census)}),
            )
            configure_eval(run, inactivity=60.0, wall=120.0)  # (a demo never waits minutes)
            languages = ["python", *(["javascript"] if shutil.which("deno") else [])]
            boxed, ahead = _sandboxed_run(rt, workdir, languages)  # eval, debug, the worker
            if boxed is None:  # (the host run evaluates: spare kernels start now, in the
                warm_spares(rt, languages)  # background, and its first cells find them)
            boxed = boxed or run
            print("\ntools on the DEFAULT surface:", ", ".join(t.name for t in run.tools()))
            plan = rt.open_run("demo-plan", workdir=str(workdir), surface="plan")
            print("tools on the PLAN surface:   ", ", ".join(t.name for t in plan.tools()))
            for i, step in enumerate(STEPS):
                if i == FIRST_EDIT:
                    surprises += _debug(boxed)  # (before the edits break the program)
                if step.needs in missing:
                    print(f"\n=== {step.title}\n    skipped: {step.needs} is not installed")
                    continue
                result = _step(run, step.title, step.tool, step.args)
                surprises += result.is_error != step.expect_error
            surprises += _staged_rewrite(run)
            if "basedpyright-langserver" not in missing:
                surprises += _fault(rt, run)
            if ahead is not None:
                ahead.join(120.0)  # (started at open, long done by now)
            surprises += _eval(boxed, saved_plot)
            surprises += _ask_user(run, auto_answer)
            surprises += _vibe(boxed)
            print(f"\n=== {PROGRESS.next()} the actor tree (Runtime.health())")
            health = rt.health()
            _tree(health)
            seen = rt.processes()  # (what must be gone after shutdown: Runtime.left_behind)
            plan.close()
            if boxed is not run:
                boxed.close()
            run.close()
        alive = rt.left_behind(seen)
        print(f"\nafter shutdown: {len(alive)} of the tree's {len(seen)} processes alive")
        surprises += bool(alive)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if answers is not None:
            os.close(answers)
    for name in missing:
        print(f"missing optional component: {name} (its steps were skipped); {INSTALL_HINT[name]}")
    print(
        f"\ndemo finished: {surprises} step(s) did not go as expected "
        f"({PROGRESS.steps} steps, {time.monotonic() - PROGRESS.started:.1f} s)"
    )
    return 1 if surprises else 0


def _sandboxed_run(
    rt: Runtime, workdir: Path, languages: list[str]
) -> tuple[Run | None, threading.Thread | None]:
    """The conversation's twin in a sandbox place (bubblewrap), for the steps that run the
    conversation's code: eval (Python and JavaScript), debug and the worker; None (the host
    run does them) where the sandbox cannot start here, saying why. Its kernels start now,
    in the background (the place opened ahead: its first cells find them started, as
    spares on the host)."""
    try:
        check(Place.sandbox())
    except PlaceError as exc:
        print(f"\neval, debug and the worker run on the host: {exc}")
        return None, None
    boxed = rt.open_run(
        "demo-sandboxed",
        workdir=str(workdir),
        place="sandbox",
        vibe=True,
        vibe_config=VibeConfig({"fast": CallableBackend(census)}),
    )
    configure_eval(boxed, inactivity=60.0, wall=120.0)
    ahead = threading.Thread(
        target=prepare_eval,
        args=(boxed, languages),
        kwargs={"start_kernels": True},
        daemon=True,
    )
    ahead.start()
    js = "javascript" in languages
    relayed = "; Deno's kernel, which listens on loopback TCP, through a relay" if js else ""
    print(
        f"\neval ({'Python and JavaScript' if js else 'Python'}), debug and the worker run in "
        "a sandbox place (bubblewrap: its own user, pid and network namespaces, only the "
        f"workspace writable{relayed})"
    )
    return boxed, ahead


def _terminal_port(auto_answer: bool) -> tuple[TerminalPort, int | None]:
    """The terminal question port on this process's stdout; with `auto_answer`, its input
    is a pipe holding the demo's one answer (the fd to close after)."""
    if not auto_answer:
        return TerminalPort(output=sys.stdout), None
    answers, feed = os.pipe()
    os.write(feed, b"1\n")
    os.close(feed)  # (after that one answer: end of input, nobody there)
    return TerminalPort(input=answers, output=sys.stdout), answers


def _staged_rewrite(run: Run) -> int:
    """ast_edit stages, resolve accepts; the language server then reports what the rewrite
    broke, folded into resolve's result."""
    staged = _step(run, "stage a structural rewrite (nothing is written yet)", "ast_edit",
                   {"pattern": "$S.counts.get($K, 0)", "rewrite": "$S.count_of($K)",
                    "path": "inventory", "language": "python"})  # fmt: skip
    if staged.is_error:
        return 1
    accepted = _step(run, "accept it: every file lands, then diagnostics", "resolve",
                     {"edit_id": staged.data["edit_id"], "action": "accept"})  # fmt: skip
    return int(accepted.is_error)


def _fault(rt: Runtime, run: Run) -> int:
    """SIGKILL the Python language server; the supervisor restarts it and the next call works."""
    servers = [n for n in _walk(rt.health()) if "basedpyright" in str(n.get("key", ""))]
    if not servers:
        print("\n=== fault injection skipped: no basedpyright server in the tree")
        return 1
    target = servers[0]["name"]
    print(f"\n=== fault injection: SIGKILL the process of {target}")
    rt.inject("kill_process", target=target)
    after = _step(run, "the next call after the kill", "lsp",
                  {"action": "hover", "file": "inventory/models.py", "line": 7, "symbol": "Item"})  # fmt: skip
    return int(after.is_error)


def _debug(run: Run) -> int:
    """A debug session to a breakpoint: the stop with its source line and locals, an
    expression in that frame, one step, then the program to its end (exit code, output)."""
    surprises = _expect(
        _step(run, "debug: set a breakpoint before launch", "debug",
              {"op": "breakpoints", "file": "inventory/main.py", "lines": [15]}),
        "line 15: set",
    )  # fmt: skip
    stopped = _step(run, "debug: launch; it stops at the breakpoint", "debug",
                    {"op": "launch", "program": "run_inventory.py"})  # fmt: skip
    surprises += _expect(stopped, "main.py:15", "stock.remove")
    if stopped.is_error:
        return surprises + 1
    surprises += _expect(
        _step(run, "debug: evaluate in the stopped frame", "debug",
              {"op": "evaluate", "expression": "stock.counts"}),
        "'A1': 2",
    )  # fmt: skip
    surprises += _expect(_step(run, "debug: step over", "debug", {"op": "step_over"}), "main.py:16")
    surprises += _expect(
        _step(run, "debug: continue to the end", "debug", {"op": "continue"}), "total:"
    )
    _step(run, "debug: end the session (no process is left)", "debug", {"op": "terminate"})
    return surprises


def _ask_user(run: Run, auto: bool) -> int:
    """A question card on the terminal port (answered by the demo itself with --yes)."""
    if auto:
        print("\n(--yes: the demo answers the card below with option 1)")
    result = _step(run, "ask_user: a card through the terminal port", "ask_user", {
        "question": "Which report should the inventory print first?",
        "header": "Report",
        "options": [
            {"label": "value", "description": "total value of the stock"},
            {"label": "counts", "description": "items per code"},
        ],
    })  # fmt: skip
    return _expect(result, "value") if auto else int(result.is_error)


EVAL_READ = """\
source = tool("read", {"path": "inventory/main.py", "end_line": 3})
print(source)
len(source.splitlines())"""

EVAL_PLOT = """\
import matplotlib.pyplot as plt
import pandas as pd
from inventory.models import Item
items = [Item("A1", "anvil", 4999), Item("B2", "bucket", 350), Item("C3", "crate", 1200)]
prices = pd.DataFrame({"name": [i.name for i in items], "euros": [i.price_cents / 100 for i in items]})
display(prices)
prices.plot.bar(x="name", y="euros", legend=False, title="price per item")
plt.show()"""

EVAL_JS = """\
const text = await tool("read", {path: "web/checkout.ts", end_line: 2});
text.split("\\n").length"""


def _eval(run: Run, saved: Path) -> int:
    """Persistent interpreter cells: one calling the run's own read tool, one drawing a
    table and a plot (the figure saved beside the demo's output), one in JavaScript."""
    read = _step(run, "eval: a Python cell calls the run's own read tool", "eval",
                 {"code": EVAL_READ, "description": "Read the inventory entry point through tools"})  # fmt: skip
    surprises = _expect(read, "Build a tiny stock")  # (the edit step renamed it)
    plot = _step(run, "eval: a table and a plot (the figure comes back as an image)", "eval",
                 {"code": EVAL_PLOT, "description": "Tabulate and plot the catalogue prices"})  # fmt: skip
    surprises += _expect(plot, "anvil")
    if plot.images:
        saved.write_bytes(plot.images[0].data)
        print(f"    (the figure, {len(plot.images[0].data)} bytes of PNG, is saved as {saved})")
    else:
        surprises += 1
        print("    !! no image came back")
    if shutil.which("deno") is not None:
        surprises += _expect(
            _step(run, "eval: JavaScript on Deno calls a tool too", "eval",
                  {"code": EVAL_JS, "language": "javascript",
                   "description": "Count the checkout module's first lines"}),
            "2",
        )  # fmt: skip
    return surprises


def census(brief: str, worker: WorkerIO) -> str:
    """The demo's vibe worker (a Python-callable backend, run in its own process): counts
    the project's source files per language, reporting progress as it goes."""
    counts: dict[str, int] = {}
    for suffix, language in ((".py", "Python"), (".ts", "TypeScript"), (".c", "C"), (".go", "Go")):
        counts[language] = sum(1 for _ in Path.cwd().rglob(f"*{suffix}"))
        worker.progress(f"counted {language}: {counts[language]}")
    return f"{brief}: " + ", ".join(f"{n} {lang}" for lang, n in counts.items())


def _vibe(run: Run) -> int:
    """A background worker: spawned at once, listed while it runs, waited for."""
    spawned = _step(run, "vibe_spawn: a background worker", "vibe_spawn",
                    {"brief": "source files per language", "label": "census", "tier": "fast"})  # fmt: skip
    if spawned.is_error:
        return 1
    worker_id = (spawned.data or {}).get("worker_id", "w1")
    _step(run, "vibe_list: the run's workers", "vibe_list", {})
    waited = _step(run, "vibe_wait: its result", "vibe_wait",
                   {"worker_id": worker_id, "timeout_seconds": 60})  # fmt: skip
    return _expect(waited, "Python")


def _walk(node: HealthNode) -> Iterator[HealthNode]:
    yield node
    for child in node.get("children", []):
        yield from _walk(child)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tether demo", description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=SAMPLE, help="project to copy and work on")
    parser.add_argument(
        "--yes", action="store_true", help="answer the demo's question card automatically"
    )
    args = parser.parse_args(argv)
    if not args.project.is_dir():
        parser.error(f"no project at {args.project}: pass --project DIR")
    auto = args.yes or not sys.stdin.isatty()
    if auto and not args.yes:
        print("(stdin is not a terminal: the question card is answered automatically, as --yes)")
    return run_demo(args.project, auto_answer=auto)


if __name__ == "__main__":
    raise SystemExit(main())
