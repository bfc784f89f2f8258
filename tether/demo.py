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
from typing import Any

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


def run_demo(project: Path) -> int:
    work = Path(tempfile.mkdtemp(prefix="tether-demo-"))
    shutil.copytree(project, work / "project")
    workdir = work / "project"
    print(f"tether demo on a copy of {project} at {workdir}")
    failures = 0
    try:
        with Runtime.start() as rt:
            run = rt.open_run("demo-conversation", workdir=str(workdir), prewarm=True)
            print("\ntools on the DEFAULT surface:", ", ".join(t.name for t in run.tools()))
            steps = [
                (
                    "structural search: a guard that tests what it uses",
                    "ast_grep",
                    {"pattern": "if ($X != null) $$$BODY", "language": "typescript"},
                ),
                (
                    "structural search: a repeated metavariable",
                    "ast_grep",
                    {"pattern": "if $A.get($B) is not None: $$$", "path": "inventory"},
                ),
                (
                    "stage a structural rewrite",
                    "ast_edit",
                    {
                        "pattern": "$S.counts.get($K, 0)",
                        "rewrite": "$S.counts.setdefault($K, 0)",
                        "path": "inventory",
                        "language": "python",
                    },
                ),
            ]
            for title, tool, args in steps:
                failures += _step(run, title, tool, args).is_error
            staged = run.call("ast_edit", steps[-1][2])
            edit_id = (staged.data or {}).get("edit_id", "edit_1")
            failures += _step(
                run, "discard it", "resolve", {"edit_id": edit_id, "action": "discard"}
            ).is_error
            for title, args in [
                ("language server: status", {"action": "status"}),
                (
                    "hover by line and symbol",
                    {
                        "action": "hover",
                        "file": "inventory/report.py",
                        "line": 6,
                        "symbol": "Stock",
                    },
                ),
                (
                    "definition",
                    {
                        "action": "definition",
                        "file": "inventory/main.py",
                        "line": 13,
                        "symbol": "add",
                    },
                ),
                (
                    "references",
                    {
                        "action": "references",
                        "file": "inventory/models.py",
                        "line": 7,
                        "symbol": "Item",
                    },
                ),
                ("document symbols", {"action": "symbols", "file": "inventory/models.py"}),
            ]:
                failures += _step(run, title, "lsp", args).is_error
            _step(
                run,
                "a write that breaks the build: diagnostics folded in",
                "edit",
                {
                    "path": "inventory/main.py",
                    "old_string": 'stock.add(catalog["A1"], 2)',
                    "new_string": 'stock.add(catalog["A1"], "two")',
                },
            )
            health = rt.health()
            servers = [n for n in _walk(health) if n.get("kind") == "language_server"]
            if servers:
                target = servers[0].get("name") or servers[0].get("key")
                print(f"\n=== fault injection: SIGKILL the language server {target}")
                rt.inject("kill_process", target=target)
                failures += _step(
                    run,
                    "the next call after the kill",
                    "lsp",
                    {"action": "hover", "file": "inventory/models.py", "line": 7, "symbol": "Item"},
                ).is_error
            print("\n=== the actor tree (Runtime.health())")
            _tree(rt.health())
            run.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\ndemo finished: {failures} step(s) returned an error")
    return 1 if failures else 0


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
