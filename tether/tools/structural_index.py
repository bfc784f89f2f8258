"""The parser pool's view of a workspace: its file listing, and warming it in the background.

A part of the structural tool family (`tether.tools.structural`): a search or an index is
split across the pool's slots by the workspace's files, listed by the runtime's git actor
(so git runs under the tree, never on the host) or walked; after a run's first search in a
language, or when a run opens with `prewarm`, the slots parse the rest in the background,
and stop when the run closes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, TypedDict

from tether.messages.calls import ResourceError
from tether.messages.git_ops import ListFiles, read_files_reply
from tether.messages.parser_ops import Index, IndexReply, Sharded, Unindex, read_reply
from tether.structural import ops
from tether.structural.languages import LanguageError, infer
from tether.structural.scan import GIT_TIMEOUT, walk_files
from tether.tools.spec import RunState, ToolContext

if TYPE_CHECKING:
    from tether.structural.staging import Staging

FAMILY: Final = "structural"  # the run state's key of the family (tether.tools.spec.RunState)
KIND = "parser"
GIT_KIND = "git"
LIST_TIMEOUT = GIT_TIMEOUT + 5.0  # the git actor answers "walk instead" at GIT_TIMEOUT


# one call of a gather: (kind, key, op, args)
PoolCall = tuple[str, str, Sharded | ListFiles | Unindex, None]
Answers = Sequence[Mapping[str, object] | ResourceError]  # (read back checked)
# a tool context's gather, or a runtime's bound to a run: (calls, timeout) -> answers in order
Gather = Callable[[Sequence[PoolCall], float], Answers]


class StructuralState(TypedDict, total=False):
    """The family's per-run state, `ctx.state["structural"]`."""

    staging: Staging  # the run's staged edits (ast_edit, vibe workers' changes)
    lock: threading.Lock  # held while the staging is read or changed
    warmed: set[str]  # the languages the pool was asked to index for this run
    listed: tuple[str, list[list[str] | None]]  # a search's language and its shares' files
    closed: bool  # the run is closing: warm no more


class PoolHost(Protocol):
    """What warming needs of a runtime (tether.runtime_port.RuntimePort has it; the tools
    may not import that module: it names them)."""

    def kind_keys(self, kind: str) -> list[str]: ...

    def gather(self, run_id: str, calls: Sequence[PoolCall], timeout: float) -> Answers: ...


def workspace_files(gather: Gather, op: Sharded) -> list[str] | None:
    """The files under `op.root` for `split_work` (absolute paths): git's listing, made by
    the runtime's git actor (so git runs under the tree, never here), or a walk when the
    root is not in a work tree or there is no git actor. None when the root is a file."""
    if not os.path.isdir(op.root):
        return None
    exts = ops.op_extensions(op)
    ask = ListFiles(extensions=sorted(exts), exclude=list(op.exclude))
    reply = gather([(GIT_KIND, op.root, ask, None)], LIST_TIMEOUT)[0]
    names = None if isinstance(reply, ResourceError) else read_files_reply(reply).files
    if names is None:
        return walk_files(op.root, exts, frozenset(op.exclude))
    return [os.path.join(op.root, name) for name in names]


def warm_after_first_search(ctx: ToolContext, language: str, path: object) -> None:
    """After a run's first search in a language, have the pool parse the rest of the
    workspace's files of that language in the background (a chunk per timer tick, after
    any search; up to the cache's bound), so the model's next pattern, seconds later, finds
    parsed trees. Once per run and language; the listing is made off the caller's thread;
    `stop_warming` drops what is left when the run closes."""
    try:
        lang = infer(language or None, path if isinstance(path, str) else None)
        keys = list(ctx.kind_keys(KIND))
    except (LanguageError, ResourceError):
        return
    fam = ctx.state.setdefault(FAMILY, StructuralState())
    warmed: set[str] = fam.setdefault("warmed", set())
    if not keys or lang in warmed or fam.get("closed") or ctx.workdir is None:
        return
    warmed.add(lang)
    root = str(ctx.workdir)
    listed_lang, listed = fam.pop("listed", ("", None))

    def work() -> None:
        with contextlib.suppress(Exception):  # best effort: the run or runtime may be gone
            if listed_lang == lang and listed is not None and len(listed) == len(keys):
                shares = [
                    Index(root=root, files=files, languages=[lang]) for files in listed
                ]  # the search's own listing of the workspace: no second `git ls-files`
            else:
                index = Index(root=root, languages=[lang])
                shares = ops.split_work(index, len(keys), workspace_files(ctx.gather, index))
            calls = [(KIND, key, s, None) for key, s in zip(keys, shares, strict=True)]
            ctx.gather(calls, 30.0)

    threading.Thread(target=work, name=f"tether-warm-{lang}", daemon=True).start()


def stop_warming(runtime: PoolHost, run_id: str, state: RunState) -> None:
    """The run is closing: every slot drops the files still queued for it."""
    fam = state.get(FAMILY) or {}
    fam["closed"] = True
    if not fam.get("warmed"):
        return
    keys = list(runtime.kind_keys(KIND))
    calls = [(KIND, key, Unindex(run=run_id), None) for key in keys]
    runtime.gather(run_id, calls, 5.0)


def warm_index(
    runtime: PoolHost | None,
    run_id: str,
    workdir: str | Path,
    languages: list[str] | None = None,
) -> int:
    """Ask every parser slot to parse its shard of `workdir` in the background (returns
    the number of files queued). Call it when a run opens: the run's first ast_grep then
    finds warm trees. Returns at once; the slots keep serving searches meanwhile."""
    if runtime is None:  # (a bare run: no pool to warm)
        return 0
    keys = list(runtime.kind_keys(KIND))
    op = Index(root=str(workdir), languages=list(languages or []))
    gather = functools.partial(runtime.gather, run_id)
    shares = (
        ops.split_work(op, len(keys), workspace_files(gather, op)) if keys else []
    )  # one listing
    calls = [(KIND, key, share, None) for key, share in zip(keys, shares, strict=True)]
    replies = runtime.gather(run_id, calls, 30.0)
    return sum(
        read_reply(IndexReply, r).queued for r in replies if not isinstance(r, ResourceError)
    )
