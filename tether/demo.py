"""`tether demo`: the main job — a real run of the tools on the bundled example project.

It copies examples/sample_project to a temporary directory (the demo writes files), boots a
runtime, opens a conversation on the copy and drives each tool family the way an agent
would: structural search, a staged rewrite accepted through resolve, language-server
queries, diagnostics folded into a write, a fault injected into a live language server and
the supervisor's restart, then the health tree. Every step prints the model-facing text.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, NamedTuple

import psutil

from tether import Runtime, ToolResult

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample_project"


def _show(title: str, tool: str, args: dict[str, Any], result: ToolResult) -> None:
    mark = "error" if result.is_error else "ok"
    print(f"\n=== {title}\n--> {tool} {args}\n<-- [{mark}]")
    text = result.text if len(result.text) < 2400 else result.text[:2400] + "\n… (cut for the demo)"
    print(textwrap.indent(text, "    "))


def _step(run: Any, title: str, tool: str, args: dict[str, Any]) -> ToolResult:
    started = time.monotonic()
    result = run.call(tool, args)
    _show(f"{title} ({(time.monotonic() - started) * 1000:.0f} ms)", tool, args, result)
    return result


def _tree(node: dict[str, Any], depth: int = 0) -> None:
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
    args: dict[str, Any]
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


def run_demo(project: Path) -> int:
    work = Path(tempfile.mkdtemp(prefix="tether-demo-"))
    shutil.copytree(project, work / "project")
    workdir = work / "project"
    print(f"tether demo on a copy of {project} at {workdir}")
    surprises = 0
    missing = [name for name in INSTALL_HINT if shutil.which(name) is None]
    try:
        with Runtime.start() as rt:
            run = rt.open_run("demo-conversation", workdir=str(workdir), prewarm=True)
            print("\ntools on the DEFAULT surface:", ", ".join(t.name for t in run.tools()))
            plan = rt.open_run("demo-plan", workdir=str(workdir), surface="plan")
            print("tools on the PLAN surface:   ", ", ".join(t.name for t in plan.tools()))
            for step in STEPS:
                if step.needs in missing:
                    print(f"\n=== {step.title}\n    skipped: {step.needs} is not installed")
                    continue
                result = _step(run, step.title, step.tool, step.args)
                surprises += result.is_error != step.expect_error
            surprises += _staged_rewrite(run)
            if "basedpyright-langserver" not in missing:
                surprises += _fault(rt, run)
            print("\n=== the actor tree (Runtime.health())")
            health = rt.health()
            _tree(health)
            pids = {p["pid"] for node in _walk(health) for p in node.get("pids", [])}
            plan.close()
            run.close()
        alive = [pid for pid in pids if _running(pid)]
        print(f"\nafter shutdown: {len(alive)} of the tree's {len(pids)} processes alive")
        surprises += bool(alive)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name in missing:
        print(f"missing optional component: {name} (its steps were skipped); {INSTALL_HINT[name]}")
    print(f"\ndemo finished: {surprises} step(s) did not go as expected")
    return 1 if surprises else 0


def _staged_rewrite(run: Any) -> int:
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


def _fault(rt: Runtime, run: Any) -> int:
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


def _running(pid: int) -> bool:
    """Alive and not a zombie (an exited child waiting for init to reap it is not running)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _walk(node: dict[str, Any]):
    yield node
    for child in node.get("children", []):
        yield from _walk(child)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tether demo", description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=SAMPLE, help="project to copy and work on")
    args = parser.parse_args(argv)
    if not args.project.is_dir():
        parser.error(f"no project at {args.project}: pass --project DIR")
    return run_demo(args.project)


if __name__ == "__main__":
    raise SystemExit(main())
