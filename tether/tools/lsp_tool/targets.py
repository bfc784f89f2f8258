"""Which server answers for a file, and one call to its actor.

The intersection rule (root marker AND binary) is decided at call time, memoised for a
couple of seconds per (server, directory) so a burst of calls does not re-walk the tree.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from tether import atomic_files, beneath
from tether.json_types import JSONObject
from tether.lsp.limits import LspLimits, too_large
from tether.lsp.positions import PositionError, SymbolSpan, find_symbol
from tether.lsp.servers import SERVERS, Resolution, ServerRow, resolve, rows_for
from tether.messages.language_server_ops import LanguageServerOp, R, read_reply
from tether.places import Place
from tether.places.registry import placed_key
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

KIND = "language_server"


def ask(
    ctx: ToolContext,
    key: str,
    op: LanguageServerOp,
    expect: type[R],
    timeout: float,
) -> R:
    """One call to the actor for `key`, answered with `expect`, the reply `op` declares
    (`op.reply`). Queries are idempotent (their op classes say so): if the server dies
    under them the runtime retries them once on the restarted server."""
    if op.reply is not expect:
        raise TypeError(f"{type(op).__name__} answers {op.reply.__name__}, not {expect.__name__}")
    key = placed_key(key, getattr(ctx, "place", None) or Place.host())  # (shared per place)
    return read_reply(expect, ctx.call_resource(KIND, key, op, None, timeout))


_RESOLVED: dict[tuple[str, str], tuple[float, Resolution]] = {}
RESOLVE_TTL = 2.0  # s: the intersection rule is re-decided at most this long after a change


def resolve_cached(row: ServerRow, path: Path, workdir: Path) -> Resolution:
    """`servers.resolve`, memoised per (server, directory) for RESOLVE_TTL seconds."""
    key = (row.name, str(path.parent if path.suffix else path))
    now = time.monotonic()
    hit = _RESOLVED.get(key)
    if hit is not None and now - hit[0] < RESOLVE_TTL:
        return hit[1]
    res = resolve(row, path, workdir)
    if len(_RESOLVED) > 1024:
        _RESOLVED.clear()
    _RESOLVED[key] = (now, res)
    return res


def server_for(ctx: ToolContext, path: Path, rel: str) -> Resolution | ToolResult:
    rows = rows_for(path)
    if not rows:
        known = sorted({e for r in SERVERS for e in r.extensions})
        return ToolResult.error(
            f"no language server handles '{path.suffix or path.name}' files ({rel}); "
            f"the servers here cover {', '.join(known)}."
        )
    found = [resolve_cached(r, path, ctx.workdir) for r in rows]
    for res in found:
        if res.usable:
            return res
    why = "; ".join(f"{r.row.name}: {r.why_not()}" for r in found)
    return ToolResult.error(
        f"no language server for '{rel}': {why}. Add the marker or install the server; "
        "`lsp status` shows what is found."
    )


def limits(ctx: ToolContext) -> LspLimits:
    """The language servers' limits: the kind's config in the connected runtime (what its
    actors enforce too), else the defaults."""
    kinds = getattr(getattr(ctx, "runtime", None), "kinds", None)
    spec = kinds.get(KIND) if isinstance(kinds, Mapping) else None
    return LspLimits.from_config(spec.config) if spec is not None else LspLimits()


def oversized(ctx: ToolContext, path: Path, rel: str) -> str | None:
    """Why `path` is too large to give a language server (None: it is not)."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    limit = limits(ctx).max_file_bytes
    return too_large(rel, size, limit) if size > limit else None


def file_path(ctx: ToolContext, rel: str) -> Path | ToolResult:
    """The existing file `rel` names, or the error to return."""
    path = ctx.resolve_path(rel)
    if path.is_dir():
        return ToolResult.error(f"'{rel}' is a directory; pass a file.")
    if not path.exists():
        return ToolResult.error(f"'{rel}' does not exist; check the path (workspace-relative).")
    return path


def read_file(ctx: ToolContext, rel: str) -> tuple[Path, str] | ToolResult:
    """The file and its text, if it is small enough to give a language server."""
    path = file_path(ctx, rel)
    if isinstance(path, ToolResult):
        return path
    try:  # checked on the open file: a FIFO swapped in since is refused, not waited on
        with atomic_files.open_regular(path, root=beneath.root_for(path, [ctx.workdir])) as f:
            size, limit = os.fstat(f.fileno()).st_size, limits(ctx).max_file_bytes
            if size > limit:
                return ToolResult.error(too_large(rel, size, limit))
            return path, f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ToolResult.error(f"'{rel}' does not exist; check the path (workspace-relative).")
    except beneath.SymlinkRefused as e:
        return ToolResult.error(f"'{rel}' was not read: {e.strerror}.")
    except OSError as e:  # NotRegularFile, a symlink swapped in (ELOOP), no permission
        return ToolResult.error(
            f"'{rel}' cannot be given to a language server: it is not a regular file now "
            f"({e.strerror or e}); give a regular file."
        )


def file_server(
    ctx: ToolContext, rel: str, sized: bool = True
) -> tuple[Path, Resolution] | ToolResult:
    """The file and the server that answers for it, or the error to return. `sized`: the
    file will be given to the server, so it must be within the size limit."""
    path = file_path(ctx, rel)
    if isinstance(path, ToolResult):
        return path
    big = oversized(ctx, path, rel) if sized else None
    if big is not None:
        return ToolResult.error(big)
    target = server_for(ctx, path, rel)
    if isinstance(target, ToolResult):
        return target
    return path, target


def locate(
    ctx: ToolContext, rel: str, line: int, symbol: str | None
) -> tuple[Path, SymbolSpan, Resolution] | ToolResult:
    """The position `line` + `symbol` names in the file, and the server to ask about it;
    or the error to return (a bad file, then a bad symbol, then no server)."""
    got = read_file(ctx, rel)
    if isinstance(got, ToolResult):
        return got
    path, text = got
    try:
        span = find_symbol(text, line, symbol, rel)
    except PositionError as e:
        return ToolResult.error(str(e))
    target = server_for(ctx, path, rel)
    if isinstance(target, ToolResult):
        return target
    return path, span, target


def text_arg(args: JSONObject, name: str) -> str | None:
    """A string argument (the schema checked its type); None when not given."""
    value = args.get(name)
    return value if isinstance(value, str) else None


def line_arg(args: JSONObject) -> int | None:
    """The `line` argument (the schema checked it is an integer); None when not given."""
    value = args.get("line")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
