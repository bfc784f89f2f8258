"""A multi-conversation agent server embedding tether, in asyncio.

    python examples/agent_server.py [project_dir]

One runtime serves every conversation. Each conversation is a `Run` opened on the same
checkout, and its tool calls are awaited with `run.acall` (each on a worker thread, so the
event loop never blocks on a language server or on a human). Here, three conversations
work at once, the way model turns would drive them:

- "builder" (DEFAULT surface) searches structurally, asks the language server, and writes;
- "planner" (PLAN surface) sees only read tools: its write is refused, nothing is written;
- "asker" asks its human a question through an `AsyncioPort`: the card reaches an async
  handler on the server's loop (a scripted human that picks the first option).

The model is not here: each conversation's calls are scripted. Prints what each got.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tether import Runtime, Surface  # noqa: E402
from tether.question_ports import AsyncioPort  # noqa: E402
from tether.questions import Answer, Card  # noqa: E402

SAMPLE = Path(__file__).resolve().parent / "sample_project"


async def builder(run) -> list[str]:
    search, hover = await asyncio.gather(
        run.acall("ast_grep", {"pattern": "$S.counts.get($K, 0)", "language": "python"}),
        run.acall(
            "lsp",
            {"action": "hover", "file": "inventory/models.py", "line": 7, "symbol": "Item"},
        ),
    )
    note = await run.acall("write", {"path": "NOTES.md", "content": "built by the builder\n"})
    return [search.text.splitlines()[0], hover.text.splitlines()[0], note.text.splitlines()[0]]


async def planner(run) -> list[str]:
    read = await run.acall("read", {"path": "inventory/main.py", "end_line": 3})
    write = await run.acall("write", {"path": "PLAN.md", "content": "x"})
    return [f"read ok: {not read.is_error}", f"write refused: {write.is_error}"]


async def asker(run) -> list[str]:
    answer = await run.acall(
        "ask_user",
        {
            "question": "Ship the inventory report today?",
            "header": "Ship",
            "options": [
                {"label": "yes", "description": "ship it"},
                {"label": "no", "description": "wait for review"},
            ],
        },
    )
    return [answer.text]


async def scripted_human(card: Card) -> Answer:
    print(f"[human] card #{card.number}: {card.question}")
    await asyncio.sleep(0.05)  # (a human takes a moment)
    return Answer.answered([card.options[0].label])


async def serve(project: Path) -> int:
    loop = asyncio.get_running_loop()
    with Runtime.start() as rt:
        runs = {
            "builder": rt.open_run("builder", workdir=str(project)),
            "planner": rt.open_run("planner", workdir=str(project), surface=Surface.PLAN),
            "asker": rt.open_run(
                "asker", workdir=str(project), question_port=AsyncioPort(loop, scripted_human)
            ),
        }
        results = await asyncio.gather(
            builder(runs["builder"]), planner(runs["planner"]), asker(runs["asker"])
        )
        for name, lines in zip(runs, results, strict=True):
            for line in lines:
                print(f"[{name}] {line}")
        for run in runs.values():
            run.close()
    planned = (project / "PLAN.md").exists()
    print(f"PLAN.md written: {planned}; NOTES.md written: {(project / 'NOTES.md').exists()}")
    return 1 if planned else 0


def main() -> int:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLE
    work = Path(tempfile.mkdtemp(prefix="tether-agent-server-"))
    try:
        project = work / "project"
        shutil.copytree(source, project)
        return asyncio.run(serve(project))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
