"""Progress notifications for long calls: what the call is waiting on, each second.

MCP lets a client put a `progressToken` on a request; the server may then send
`notifications/progress` while it works. A call that took a second hears from us then,
and each second after: the elapsed time, and what the call's resources say they are doing
when they can say it without being disturbed.

Where that detail comes from, per tool:
- lsp, lsp_rename and the writes (whose diagnostics come from the language servers): the
  language servers of this conversation's workdir that are indexing (their `$/progress`
  titles, from each server actor's status: `lsp status` asks the same), since a first
  query waits on that;
- every other tool: the elapsed time only. A structural search counts its files inside
  the parser actors, which scan in their message handler and so cannot be asked while
  they do; a kernel's output so far is kept by its actor, whose status does not carry it
  yet (the hook: the running cell's `CellOutput.render()` in that status).

A probe runs in a worker thread (it asks actors) with a short deadline, and never fails
the call: a probe that cannot answer leaves the elapsed time alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tether.lsp.servers import split_key
from tether.messages.language_server_ops import Status, StatusReply
from tether.tools.lsp.targets import KIND as LSP_KIND
from tether.tools.lsp.targets import ask

PROBE_TIMEOUT = 1.0  # s: a status that takes longer is left out of this tick
LSP_TOOLS = frozenset({"lsp", "lsp_rename", "write", "edit", "apply_patch"})

Probe = Callable[[], str]


def probe_for(run: Any, tool: str) -> Probe | None:
    """What to say, besides the elapsed time, about a running call of `tool` on `run`."""
    if tool in LSP_TOOLS:
        return lambda: indexing(run)
    return None


def indexing(run: Any) -> str:
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
                status = ask(ctx, key, Status(), StatusReply, PROBE_TIMEOUT, idem=False)
                if status.indexing:
                    said.append(f"{name} indexing: {', '.join(status.indexing)}")
                elif status.state not in ("ready", ""):
                    said.append(f"{name} {status.state}")
    return "; ".join(said)
