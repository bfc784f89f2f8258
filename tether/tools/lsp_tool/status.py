"""`lsp status` (which servers run for this workspace, which could, and why not) and
`lsp reload` (restart them)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from tether.lsp.cancellation import MESSAGE_ONLY
from tether.lsp.servers import BY_NAME, SERVERS, ServerRow, resolve, rows_for, split_key
from tether.messages.calls import ErrorCode, ResourceError
from tether.messages.language_server_ops import Reload, Status, StatusReply
from tether.places import Place
from tether.places.registry import split_place
from tether.tools.lsp_tool.model_records import relative
from tether.tools.lsp_tool.notes import noted
from tether.tools.lsp_tool.targets import KIND, ask, file_path, file_server
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

STATUS_TIMEOUT = 5.0
RELOAD_TIMEOUT = 60.0


def _running_keys(ctx: ToolContext) -> list[str]:
    try:
        keys = list(ctx.kind_keys(KIND))
    except Exception:  # noqa: BLE001 - status must answer even when the runtime cannot list
        keys = []
    out = []
    wd = ctx.workdir.resolve()
    for k in keys:
        try:
            _, root = split_key(k)
        except ValueError:
            continue
        if root == wd or wd in root.parents:
            out.append(k)
    return out


# a server that died under the status query is being restarted (if its supervisor gave up,
# the next status says GAVE_UP)
STATE_OF_ERROR: dict[str, str] = {
    ErrorCode.GAVE_UP: "failed",
    ErrorCode.RESTARTING: "restarting",
    ErrorCode.RESOURCE_DIED: "restarting",
    ErrorCode.UNAVAILABLE: "unavailable",
}


class ServerStatus(TypedDict):
    """One running server as `lsp status` reports it in its data (what its actor said, or
    the state and error of a call that found none)."""

    server: str
    root: str
    place: str
    state: NotRequired[str]
    error: NotRequired[str]
    indexing: NotRequired[list[str]]
    uptime: NotRequired[float]
    pid: NotRequired[int | None]
    restarts: NotRequired[int]
    stderr_tail: NotRequired[str]
    open_documents: NotRequired[int]
    cancelled_requests: NotRequired[int]
    cancellation: NotRequired[str]  # how a request past its budget is cancelled


def status(ctx: ToolContext, file: str | None) -> ToolResult:
    lines: list[str] = []
    servers: list[ServerStatus] = []
    heard: list[StatusReply] = []  # (their notes: a status can be a server's first answer)
    running = _running_keys(ctx)
    for key in running:
        name, root = split_key(key)
        place = _place_of(ctx, key)
        rec: ServerStatus = {"server": name, "root": relative(ctx, root) or ".", "place": place}
        try:
            st = ask(ctx, key, Status(), StatusReply, STATUS_TIMEOUT)
            heard.append(st)
            restarts = st.restarts + st.reloads
            rec.update(
                {
                    "state": st.state,
                    "indexing": st.indexing,
                    "uptime": st.uptime,
                    "pid": st.pid,
                    "restarts": restarts,
                    "stderr_tail": st.stderr_tail,
                    "error": st.error,
                    "open_documents": st.open_documents,
                    "cancelled_requests": st.cancelled_requests,
                    "cancellation": st.cancellation,
                }
            )
            idx = f" ({', '.join(st.indexing)})" if st.indexing else ""
            tail = (st.stderr_tail or "").strip().splitlines()[-3:]
            lines.append(
                f"{name} for {rec['root'] or '.'}: {st.state}{idx}, pid {st.pid}, "
                f"up {st.uptime:.0f} s, {restarts} restart(s), in {place}"
                + (
                    f", {st.cancelled_requests} request(s) cancelled past their budget"
                    if st.cancelled_requests
                    else ""
                )
                + (
                    f", cancellation: {st.cancellation} (file cancellation off: the server "
                    "finishes a request past its budget before the next)"
                    if BY_NAME[name].file_cancellation and st.cancellation == MESSAGE_ONLY
                    else ""
                )
                + (f", error: {st.error}" if st.error else "")
                + (f"\n  stderr: {' | '.join(tail)}" if tail else "")
            )
        except ResourceError as e:
            state = STATE_OF_ERROR.get(e.code, "failed")
            rec.update({"state": state, "error": e.message})
            lines.append(f"{name} for {rec['root'] or '.'} in {place}: {state} - {e.message}")
        servers.append(rec)
    at = ctx.workdir
    label = "the workspace root"
    if file:
        got = file_path(ctx, file)
        if isinstance(got, ToolResult):
            return got
        at, label = got, file
    rows = rows_for(at) if file else list(SERVERS)
    avail = []
    for row in rows:
        r = resolve(row, at, ctx.workdir)
        item = {
            "server": row.name,
            "languages": list(row.languages),
            "usable": r.usable,
            "root": relative(ctx, r.root) if r.root else None,
            "marker": r.marker,
            "binary": r.binary,
            "missing": r.why_not(),
        }
        avail.append(item)
        if r.usable:
            key_running = any(s["server"] == row.name for s in servers)
            avail_line = (
                f"{row.name}: usable (marker {r.marker} at {relative(ctx, r.root or ctx.workdir) or '.'}, "
                f"binary {r.binary})" + ("" if key_running else _first_use(row))
            )
        else:
            avail_line = f"{row.name}: not usable for {label} - {r.why_not()}"
        lines.append(avail_line)
    head = "language servers running for this workspace:" if running else (
        "no language server is running for this workspace yet.")  # fmt: skip
    mine = _run_place(ctx)
    text = (
        f"{head}\n" + "\n".join(lines) + f"\nthis run's servers run in its place: {mine.describe()}"
    )
    data = {"running": servers, "servers": avail, "place": mine.describe()}
    return noted(ctx, ToolResult.ok(text, data=data), *heard)


def _run_place(ctx: ToolContext) -> Place:
    return getattr(ctx, "place", None) or Place.host()


def _place_of(ctx: ToolContext, key: str) -> str:
    """Where the server of `key` runs: its key's place policy (`tether.places.registry`),
    described in full when it is this run's, else by its policy key (another run's)."""
    policy = split_place(key)[1]
    if not policy:
        return "host"
    mine = _run_place(ctx)
    return mine.describe() if mine.policy_key == policy else f"another run's place ({policy})"


def reload(ctx: ToolContext, file: str | None) -> ToolResult:
    if file:
        found = file_server(ctx, file, sized=False)
        if isinstance(found, ToolResult):
            return found
        keys = [found[1].key]
    else:
        keys = _running_keys(ctx)
        if not keys:
            return ToolResult.ok(
                "no language server is running for this workspace; nothing to reload "
                "(the next query starts one).",
                data={"reloaded": []},
            )
    out, data = [], []
    heard: list[StatusReply] = []
    for key in keys:
        name, root = split_key(key)
        try:
            st = ask(ctx, key, Reload(), StatusReply, RELOAD_TIMEOUT)
            heard.append(st)
            out.append(f"restarted {name} for {relative(ctx, root) or '.'} (pid {st.pid})")
            data.append({"server": name, "root": relative(ctx, root), "pid": st.pid})
        except ResourceError as e:
            out.append(f"{name} for {relative(ctx, root) or '.'}: reload failed - {e.message}")
            data.append({"server": name, "root": relative(ctx, root), "error": e.message})
    return noted(ctx, ToolResult.ok("\n".join(out), data={"reloaded": data}), *heard)


def _first_use(row: ServerRow) -> str:
    """What happens on first use: the server starts, after its probe where it has one (run
    by its actor, under the tree: the host runs no process to answer status)."""
    if not row.probe_argv:
        return " - starts on first use"
    probe = " ".join([row.binaries[0], *row.probe_argv])
    return f" - starts on first use, if `{probe}` runs (checked then, not here)"
