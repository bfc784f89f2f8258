"""Progress notifications for long calls: what the call is waiting on, each second.

MCP lets a client put a `progressToken` on a request; the server may then send
`notifications/progress` while it works. A call that took a second hears from us then,
and each second after: the elapsed time, and what the call's resources say they are doing
when they can say it without being disturbed.

Where that detail comes from, per tool:
- lsp, lsp_rename and the writes (whose diagnostics come from the language servers): the
  language servers of this conversation's workdir that are indexing (their `$/progress`
  titles, from each server actor's status: `lsp status` asks the same), since a first
  query waits on that; a status can be a restarted server's first answer, so its notes
  are carried to the run's next lsp result (`tether.tools.lsp_tool.notes.carry`);
- eval: the running cell's output so far, its last line (the kernel actor's status
  carries the end of it; a status is what `eval` itself sends to make the actor ahead of
  a first cell, so asking never starts a kernel);
- ast_grep and ast_edit: files searched so far of how many, summed over the parser pool's
  slots (each slot's Stats op counts its share of this run's searches that started since
  the call did, the finished shares included);
- every other tool: the elapsed time only.

A probe runs in a worker thread (it asks actors) with a short deadline, and never fails
the call: a probe that cannot answer leaves the elapsed time alone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tether.json_types import JSONObject
from tether.lsp.servers import split_key
from tether.messages.calls import ResourceError
from tether.messages.language_server_ops import Status, StatusReply
from tether.messages.ops import OpError
from tether.messages.parser_ops import JobProgress, Stats, StatsReply, read_reply
from tether.tools.lsp_tool.notes import carry
from tether.tools.lsp_tool.targets import KIND as LSP_KIND
from tether.tools.lsp_tool.targets import ask

PROBE_TIMEOUT = 1.0  # s: a status that takes longer is left out of this tick
MAX_LINE = 200  # chars of a cell's last output line in a progress message
KERNEL_KIND = "kernel"
LSP_TOOLS = frozenset({"lsp", "lsp_rename", "write", "edit", "apply_patch"})
PARSER_KIND = "parser"
SEARCH_TOOLS = frozenset({"ast_grep", "ast_edit"})

if TYPE_CHECKING:
    from tether.run import Run

Probe = Callable[[], str]


def probe_for(run: Run, tool: str, args: JSONObject | None = None) -> Probe | None:
    """What to say, besides the elapsed time, about a running call of `tool` on `run`."""
    if tool in LSP_TOOLS:
        return lambda: indexing(run)
    if tool in SEARCH_TOOLS:
        since = time.monotonic()  # (before the call fans out: its jobs start after this)
        return lambda: files_searched(run, since)
    if tool == "eval":
        language = str((args or {}).get("language") or "python")
        return lambda: output_so_far(run, language)
    return None


def output_so_far(run: Run, language: str) -> str:
    """'output so far: step 3 of 10' - the last line the running cell printed."""
    status = run.context().call_resource(KERNEL_KIND, language, "status", {}, PROBE_TIMEOUT)
    lines = str(status.get("cell_output") or "").strip().splitlines()
    if not lines:
        return ""
    last = lines[-1].strip()
    return f"output so far: {last[:MAX_LINE]}" + ("..." if len(last) > MAX_LINE else "")


def indexing(run: Run) -> str:
    """'basedpyright indexing: Analyzing files', for the servers of the run's workdir."""
    ctx = run.context()
    workdir = Path(ctx.workdir).resolve()
    said = []
    with contextlib.suppress(Exception):  # (a runtime that cannot list: nothing to say)
        for key in ctx.kind_keys(LSP_KIND):
            name, root = split_key(key)
            if root != workdir and workdir not in root.parents:
                continue
            with contextlib.suppress(Exception):  # one server's silence is not the others'
                status = ask(ctx, key, Status(), StatusReply, PROBE_TIMEOUT)
                carry(ctx, status.notes)  # (a cold start's note: for the call's own result)
                if status.indexing:
                    said.append(f"{name} indexing: {', '.join(status.indexing)}")
                elif status.state not in ("ready", ""):
                    said.append(f"{name} {status.state}")
    return "; ".join(said)


def files_searched(run: Run, since: float) -> str:
    """'files searched: 1200 of 5000' - this run's search jobs in the parser pool that
    started at or after `since` (time.monotonic(), one clock for the machine's processes);
    'of' is left out while a slot lists its share itself (its count is not known)."""
    ctx = run.context()
    keys = ctx.kind_keys(PARSER_KIND)
    replies = ctx.gather([(PARSER_KIND, k, Stats(), None) for k in keys], PROBE_TIMEOUT)
    jobs = [
        job
        for reply in replies
        if not isinstance(reply, ResourceError)  # (a busy or restarting slot: not this tick)
        for job in _searched(reply, ctx.run_id)
        if job.started >= since
    ]
    if not jobs:
        return ""
    done = sum(job.files for job in jobs)
    planned = [job.of for job in jobs if job.of is not None]
    if len(planned) < len(jobs):
        return f"files searched: {done}"
    return f"files searched: {done} of {sum(planned)}"


def _searched(payload: Mapping[str, object], run_id: str) -> list[JobProgress]:
    """This run's jobs in one slot's `StatsReply` (a reply that is not one: none)."""
    try:
        stats = read_reply(StatsReply, payload)
    except OpError:
        return []
    return list(stats.searched.get(run_id) or [])
