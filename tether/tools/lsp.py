"""The `lsp` tool (read), `lsp_rename` (write) and diagnostics-on-write wrappers.

Host side of the language-server family (SPEC.md "lsp", "lsp_rename", "Diagnostics on
write"). A handler validates and resolves everything it can without a server - the file,
the line + symbol position, which server and which root (the intersection rule: root
marker AND binary, decided now, at call time) - then sends one Call to the
`language_server` actor for (server, root) and renders the reply for a model, with the
same content as records in `ToolResult.data`.

`diagnostics "*"` runs the project's own checker host-side (basedpyright --outputjson,
tsc --noEmit, cc -fsyntax-only, go vet ./..., cargo check, dart analyze) and parses its
output into the same records.

The wrappers fold only NEW diagnostics into the result of write / edit / apply_patch /
resolve, judged by the run's ledger (`ctx.state["lsp"]`): key (severity, code, message),
position excluded, counted per file, forgotten when gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tether.actors.language_server import render
from tether.actors.language_server.ledger import Ledger
from tether.actors.language_server.positions import PositionError, find_symbol, from_character
from tether.actors.language_server.servers import (
    SERVERS,
    Resolution,
    ServerRow,
    parse_checker_output,
    resolve,
    rows_for,
    split_key,
)
from tether.messages.calls import ErrorCode, ResourceError
from tether.tools.results import ToolResult
from tether.tools.spec import Needs, Tier, ToolContext, ToolSpec

FAMILY = "lsp"
KIND = "language_server"
QUERY_TIMEOUT = 30.0
STATUS_TIMEOUT = 5.0
RELOAD_TIMEOUT = 60.0
WRITE_CAP = 2.5  # s: hard cap on waiting for fresh diagnostics after a write
CHECKER_TIMEOUT = 300.0
NAV = ("definition", "type_definition", "implementation", "references", "hover", "code_actions")
ACTIONS = ("diagnostics", *NAV, "symbols", "status", "reload")
SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", "build", "target", ".cache"}


# --- plumbing ---------------------------------------------------------------------------------


def _ask(
    ctx: ToolContext, key: str, op: str, args: Mapping[str, Any], timeout: float, idem: bool = True
) -> Mapping[str, Any]:
    """One call to the actor for `key`. Queries are idempotent: if the server dies under
    them the runtime retries them once on the restarted server."""
    if idem:
        return ctx.call_resource(KIND, key, op, args, timeout, idempotent=True)  # type: ignore[call-arg]
    return ctx.call_resource(KIND, key, op, args, timeout)


def _rel(ctx: ToolContext, path: str | Path) -> str:
    p = Path(path)
    try:
        return p.resolve().relative_to(ctx.workdir.resolve()).as_posix()
    except ValueError:
        return str(p)


def _state(ctx: ToolContext) -> dict[str, Any]:
    st = ctx.state.setdefault(FAMILY, {})
    st.setdefault("ledger", Ledger())
    st.setdefault("lock", threading.Lock())
    return st


_LINE_CACHE: dict[str, tuple[tuple[int, int], list[str]]] = {}  # path -> (stamp, lines)


class _Lines:
    """Code lines for records: one stat per file per call, one read per file change."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.seen: dict[str, list[str]] = {}

    def __call__(self, path: str, line: int) -> str:
        lines = self.seen.get(path)
        if lines is None:
            p = path if os.path.isabs(path) else os.path.join(self.ctx.workdir, path)
            try:
                st = os.stat(p)
                stamp = (st.st_mtime_ns, st.st_size)
                cached = _LINE_CACHE.get(p)
                if cached is not None and cached[0] == stamp:
                    lines = cached[1]
                else:
                    with open(p, "rb") as f:
                        lines = f.read().decode("utf-8", errors="replace").split("\n")
                    if len(_LINE_CACHE) > 512:
                        _LINE_CACHE.clear()
                    _LINE_CACHE[p] = (stamp, lines)
            except OSError:
                lines = []
            self.seen[path] = lines
        return lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else ""


def _records(
    ctx: ToolContext, raw: list[Mapping[str, Any]], lines: _Lines, encoding: str = ""
) -> list[dict]:
    """Actor records -> model records: workspace-relative path, 1-based code-point columns
    (converted from the server's encoding when given as `character`), and the code line."""
    out = []
    for r in raw:
        path = _rel(ctx, r["path"])
        text = lines(path, int(r["line"]))
        rec: dict[str, Any] = {"path": path, "line": r["line"]}
        if "character" in r:
            enc = encoding or "utf-16"
            end_text = text if r["end_line"] == r["line"] else lines(path, int(r["end_line"]))
            rec["column"] = from_character(text, int(r["character"]), enc) + 1
            rec["end_line"] = r["end_line"]
            rec["end_column"] = from_character(end_text, int(r["end_character"]), enc) + 1
        rec.update((k, v) for k, v in r.items() if k not in rec and "character" not in k)
        rec["text"] = text
        out.append(rec)
    return out


_RESOLVED: dict[tuple[str, str], tuple[float, Resolution]] = {}
RESOLVE_TTL = 2.0  # s: the intersection rule is re-decided at most this long after a change


def _resolve(row: ServerRow, path: Path, workdir: Path) -> Resolution:
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


def _server_for(ctx: ToolContext, path: Path, rel: str) -> Resolution | ToolResult:
    rows = rows_for(path)
    if not rows:
        known = sorted({e for r in SERVERS for e in r.extensions})
        return ToolResult.error(
            f"no language server handles '{path.suffix or path.name}' files ({rel}); "
            f"the servers here cover {', '.join(known)}."
        )
    found = [_resolve(r, path, ctx.workdir) for r in rows]
    for res in found:
        if res.usable:
            return res
    why = "; ".join(f"{r.row.name}: {r.why_not()}" for r in found)
    return ToolResult.error(
        f"no language server for '{rel}': {why}. Add the marker or install the server; "
        "`lsp status` shows what is found."
    )


def _read_file(ctx: ToolContext, rel: str) -> tuple[Path, str] | ToolResult:
    path = ctx.resolve_path(rel)
    if path.is_dir():
        return ToolResult.error(f"'{rel}' is a directory; pass a file.")
    try:
        return path, path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ToolResult.error(f"'{rel}' does not exist; check the path (workspace-relative).")


# --- lsp --------------------------------------------------------------------------------------


def _lsp(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    action = args["action"]
    if action in NAV:
        return _nav(ctx, action, args)
    if action == "diagnostics":
        file = args.get("file")
        if not file:
            return ToolResult.error(
                'diagnostics needs file: a workspace-relative path, or "*" for the whole '
                "project (runs the project's own checker)."
            )
        return _project_check(ctx) if file == "*" else _file_diagnostics(ctx, file)
    if action == "symbols":
        return _symbols(ctx, args)
    if action == "status":
        return _status(ctx, args.get("file"))
    return _reload(ctx, args.get("file"))


def _unexpected(action: str, args: dict[str, Any], allowed: set[str]) -> ToolResult | None:
    extra = sorted(k for k in args if k not in allowed and k != "action")
    if extra:
        return ToolResult.error(
            f"{action} does not take {', '.join(extra)}; it takes {', '.join(sorted(allowed)) or 'nothing'}."
        )
    return None


def _nav(ctx: ToolContext, action: str, args: dict[str, Any]) -> ToolResult:
    bad = _unexpected(action, args, {"file", "line", "symbol"})
    if bad:
        return bad
    file, line, symbol = args.get("file"), args.get("line"), args.get("symbol")
    if not file or line is None:
        return ToolResult.error(
            f'{action} needs file, line and symbol, e.g. {{"action": "{action}", '
            '"file": "src/app.py", "line": 12, "symbol": "load_config"}.'
        )
    got = _read_file(ctx, file)
    if isinstance(got, ToolResult):
        return got
    path, text = got
    try:
        span = find_symbol(text, line, symbol, file)
    except PositionError as e:
        return ToolResult.error(str(e))
    target = _server_for(ctx, path, file)
    if isinstance(target, ToolResult):
        return target
    payload = _ask(
        ctx,
        target.key,
        action,
        {"path": str(path), "line0": span.line, "char": span.start, "end_char": span.end},
        QUERY_TIMEOUT,
    )
    name = symbol if symbol is not None else ""
    where = f"{file}:{line}"
    lines = _Lines(ctx)
    if action == "hover":
        hover = str(payload.get("hover") or "")
        return ToolResult.ok(
            render.hover(name, where, hover),
            data={"file": file, "line": line, "symbol": name, "hover": hover},
        )
    if action == "code_actions":
        acts = list(payload.get("actions") or [])[: render.CAPS["code_actions"]]
        return ToolResult.ok(render.code_actions(acts, where), data={"actions": acts})
    locs = _records(ctx, list(payload.get("locations") or []), lines, payload.get("encoding", ""))
    locs = _dedupe(locs)
    total = len(locs)
    shown = locs[: render.CAPS[action]]
    return ToolResult.ok(
        render.locations(action, name, shown, total, where),
        data={"locations": shown, "total": total, "capped": total > len(shown)},
    )


def _dedupe(recs: list[dict]) -> list[dict]:
    seen, out = set(), []
    for r in recs:
        k = (r["path"], r["line"], r["column"])
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def _severe(recs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """SPEC: diagnostics are errors and warnings (hints and infos are left out)."""
    return [d for d in recs if int(d.get("severity") or 1) <= 2]


def _file_diagnostics(ctx: ToolContext, file: str) -> ToolResult:
    got = _read_file(ctx, file)
    if isinstance(got, ToolResult):
        return got
    path, _ = got
    target = _server_for(ctx, path, file)
    if isinstance(target, ToolResult):
        return target
    payload = _ask(ctx, target.key, "diagnostics", {"path": str(path), "cap": 10.0}, QUERY_TIMEOUT)
    if payload.get("pending"):
        return ToolResult.error(
            f"diagnostics pending for {file}: {target.row.name} did not finish checking it in "
            "10 s (it may still be indexing - see lsp status). Try again shortly.",
            data={"pending": [file]},
        )
    raw = _severe(next(iter((payload.get("files") or {}).values()), []))
    recs = _records(ctx, raw, _Lines(ctx))
    shown = recs[: render.CAPS["diagnostics"]]
    return ToolResult.ok(
        render.diagnostics(shown, len(recs), f"{file} ({target.row.name})"),
        data={"diagnostics": shown, "total": len(recs), "server": target.row.name},
    )


# --- symbols ----------------------------------------------------------------------------------


def _symbols(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    bad = _unexpected("symbols", args, {"file", "query"})
    if bad:
        return bad
    file, query = args.get("file"), args.get("query")
    if not file and not query:
        return ToolResult.error(
            'symbols needs query (workspace search, e.g. {"action": "symbols", "query": '
            '"Config"}) or file (the symbols of one file).'
        )
    lines = _Lines(ctx)
    if file and not query:
        got = _read_file(ctx, file)
        if isinstance(got, ToolResult):
            return got
        path, _ = got
        target = _server_for(ctx, path, file)
        if isinstance(target, ToolResult):
            return target
        payload = _ask(ctx, target.key, "document_symbols", {"path": str(path)}, QUERY_TIMEOUT)
        recs = _records(ctx, list(payload.get("symbols") or []), lines, payload.get("encoding", ""))
        recs.sort(key=lambda r: (r["line"], r["column"]))
        cap = render.CAPS["document_symbols"]
        return ToolResult.ok(
            render.symbols(recs[:cap], len(recs), f"symbols in {file}"),
            data={"symbols": recs[:cap], "total": len(recs)},
        )
    if file:
        got = _read_file(ctx, file)
        if isinstance(got, ToolResult):
            return got
        t = _server_for(ctx, got[0], file)
        if isinstance(t, ToolResult):
            return t
        targets = [t]
    else:
        targets = [
            r for r in (resolve(row, ctx.workdir, ctx.workdir) for row in SERVERS) if r.usable
        ]
        if not targets:
            return ToolResult.error(
                "no language server can start at the workspace root (no root marker with an "
                "installed server); pass file to search through that file's server, or call "
                "lsp status."
            )
    recs, errors = [], []
    for t in targets:
        try:
            payload = _ask(ctx, t.key, "workspace_symbols", {"query": query}, QUERY_TIMEOUT)
        except ResourceError as e:
            errors.append(f"{t.row.name}: {e.message}")
            continue
        recs += _records(
            ctx, list(payload.get("symbols") or []), lines, payload.get("encoding", "")
        )
    recs.sort(key=lambda r: _symbol_rank(r, str(query)))
    cap = render.CAPS["workspace_symbols"]
    text = render.symbols(recs[:cap], len(recs), f"symbols matching {query!r}")
    if errors:
        text += "\n(" + "; ".join(errors) + ")"
    return ToolResult.ok(text, data={"symbols": recs[:cap], "total": len(recs)})


def _symbol_rank(rec: Mapping[str, Any], query: str) -> tuple:
    """Exact name, then case-insensitive, prefix, substring, then the servers' fuzzy
    matches (gopls matches "Item" to "IFA_F_TEMPORARY"); inside the workspace first."""
    name, q = str(rec.get("name", "")).rsplit(".", 1)[-1], query
    low, ql = name.lower(), q.lower()
    return (
        name != q,
        low != ql,
        not low.startswith(ql),
        ql not in low,
        os.path.isabs(str(rec.get("path", ""))),
    )


# --- status / reload --------------------------------------------------------------------------


def _running_keys(ctx: ToolContext) -> list[str]:
    kind_keys = getattr(ctx, "kind_keys", None)
    try:
        keys = list(kind_keys(KIND)) if callable(kind_keys) else []
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


def _status(ctx: ToolContext, file: str | None) -> ToolResult:
    lines: list[str] = []
    servers: list[dict[str, Any]] = []
    running = _running_keys(ctx)
    for key in running:
        name, root = split_key(key)
        rec: dict[str, Any] = {"server": name, "root": _rel(ctx, root) or "."}
        try:
            st = dict(_ask(ctx, key, "status", {}, STATUS_TIMEOUT, idem=False))
            rec.update(
                state=st.get("state"),
                indexing=st.get("indexing", []),
                uptime=st.get("uptime"),
                pid=st.get("pid"),
                restarts=max(0, int(st.get("incarnation") or 0) - 1) + int(st.get("reloads") or 0),
                stderr_tail=st.get("stderr_tail", ""),
                error=st.get("error", ""),
            )
            idx = f" ({', '.join(rec['indexing'])})" if rec["indexing"] else ""
            tail = (rec["stderr_tail"] or "").strip().splitlines()[-3:]
            lines.append(
                f"{name} for {rec['root'] or '.'}: {rec['state']}{idx}, pid {rec['pid']}, "
                f"up {rec['uptime']:.0f} s, {rec['restarts']} restart(s)"
                + (f", error: {rec['error']}" if rec["error"] else "")
                + (f"\n  stderr: {' | '.join(tail)}" if tail else "")
            )
        except ResourceError as e:
            state = "failed" if e.code == ErrorCode.GAVE_UP else (
                "restarting" if e.code == ErrorCode.RESTARTING else "unavailable"
                if e.code == ErrorCode.UNAVAILABLE else "failed")  # fmt: skip
            rec.update(state=state, error=e.message)
            lines.append(f"{name} for {rec['root'] or '.'}: {state} - {e.message}")
        servers.append(rec)
    at = ctx.workdir
    label = "the workspace root"
    if file:
        got = _read_file(ctx, file)
        if isinstance(got, ToolResult):
            return got
        at, label = got[0], file
    rows = rows_for(at) if file else list(SERVERS)
    avail = []
    for row in rows:
        r = resolve(row, at, ctx.workdir)
        item = {
            "server": row.name,
            "languages": list(row.languages),
            "usable": r.usable,
            "root": _rel(ctx, r.root) if r.root else None,
            "marker": r.marker,
            "binary": r.binary,
            "missing": r.why_not(),
        }
        avail.append(item)
        if r.usable:
            key_running = any(s["server"] == row.name for s in servers)
            avail_line = (
                f"{row.name}: usable (marker {r.marker} at {_rel(ctx, r.root or ctx.workdir) or '.'}, "
                f"binary {r.binary})" + ("" if key_running else " - starts on first use")
            )
        else:
            avail_line = f"{row.name}: not usable for {label} - {r.why_not()}"
        lines.append(avail_line)
    head = "language servers running for this workspace:" if running else (
        "no language server is running for this workspace yet.")  # fmt: skip
    text = head + "\n" + "\n".join(lines)
    return ToolResult.ok(text, data={"running": servers, "servers": avail})


def _reload(ctx: ToolContext, file: str | None) -> ToolResult:
    if file:
        got = _read_file(ctx, file)
        if isinstance(got, ToolResult):
            return got
        t = _server_for(ctx, got[0], file)
        if isinstance(t, ToolResult):
            return t
        keys = [t.key]
    else:
        keys = _running_keys(ctx)
        if not keys:
            return ToolResult.ok(
                "no language server is running for this workspace; nothing to reload "
                "(the next query starts one).",
                data={"reloaded": []},
            )
    out, data = [], []
    for key in keys:
        name, root = split_key(key)
        try:
            st = _ask(ctx, key, "reload", {}, RELOAD_TIMEOUT, idem=False)
            out.append(f"restarted {name} for {_rel(ctx, root) or '.'} (pid {st.get('pid')})")
            data.append({"server": name, "root": _rel(ctx, root), "pid": st.get("pid")})
        except ResourceError as e:
            out.append(f"{name} for {_rel(ctx, root) or '.'}: reload failed - {e.message}")
            data.append({"server": name, "root": _rel(ctx, root), "error": e.message})
    return ToolResult.ok("\n".join(out), data={"reloaded": data})


# --- diagnostics "*": the project's own checker --------------------------------------------


def _which(row: ServerRow, name: str, root: Path) -> str | None:
    import shutil

    for d in row.local_bin_dirs:
        c = root / d / name
        if os.access(c, os.X_OK):
            return str(c)
    return shutil.which(name)


def _project_files(root: Path, exts: tuple[str, ...]) -> list[str]:
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
        out += [
            os.path.relpath(os.path.join(d, f), root) for f in sorted(files) if f.endswith(exts)
        ]
    return out


def run_checker(row: ServerRow, root: Path, timeout: float = CHECKER_TIMEOUT) -> list[dict]:
    """Run `row`'s project checker in `root`; findings with paths made absolute."""
    ck = row.checker
    assert ck is not None
    exe = _which(row, ck.argv[0], root)
    if exe is None:
        raise ResourceError(
            ErrorCode.UNAVAILABLE,
            f"the {row.name} project checker needs {ck.argv[0]}, which is not on PATH",
        )
    argv = [exe, *ck.argv[1:]]
    if ck.files:
        flags = root / "compile_flags.txt"
        if flags.exists():
            argv += [ln.strip() for ln in flags.read_text().splitlines() if ln.strip()]
        files = _project_files(root, ck.files)
        if not files:
            return []
        argv += files
    proc = subprocess.Popen(
        argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise ResourceError(
            ErrorCode.DEADLINE, f"{' '.join(ck.argv)} did not finish within {timeout:.0f} s"
        ) from None
    text = {
        "stdout": out.decode("utf-8", "replace"),
        "stderr": err.decode("utf-8", "replace"),
        "both": out.decode("utf-8", "replace") + "\n" + err.decode("utf-8", "replace"),
    }[ck.stream]
    recs = parse_checker_output(ck.parser, text, root)
    for r in recs:
        p = Path(r["path"])
        r["path"] = str(p if p.is_absolute() else (root / p).resolve())
    return recs


def _project_check(ctx: ToolContext) -> ToolResult:
    targets = [r for r in (resolve(row, ctx.workdir, ctx.workdir) for row in SERVERS) if r.root]
    if not targets:
        markers = sorted({m for row in SERVERS for m in row.root_markers})
        return ToolResult.error(
            'diagnostics "*" runs the project\'s own checker, found by a root marker at the '
            f"workspace root; none is there (looked for {', '.join(markers)}). Pass a file "
            "instead."
        )
    parts, recs, ran = [], [], []
    for t in targets:
        row = t.row
        if row.checker is None:
            continue
        try:
            found = run_checker(row, t.root or ctx.workdir)
        except ResourceError as e:
            parts.append(f"{row.checker_name}: not run - {e.message}")
            continue
        ran.append(row.checker_name)
        found = _records(ctx, _severe(found), _Lines(ctx))
        recs += found
        parts.append(f"{row.checker_name}: {len(found)} finding(s)")
    shown = recs[: render.CAPS["diagnostics"]]
    text = render.diagnostics(shown, len(recs), "project check (" + "; ".join(parts) + ")")
    return ToolResult.ok(text, data={"diagnostics": shown, "total": len(recs), "checkers": ran})


# --- lsp_rename ---------------------------------------------------------------------------------


def _rename(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    file, line, symbol, new_name = args["file"], args["line"], args["symbol"], args["new_name"]
    if not str(new_name).strip():
        return ToolResult.error("new_name is empty; pass the new identifier.")
    got = _read_file(ctx, file)
    if isinstance(got, ToolResult):
        return got
    path, text = got
    try:
        span = find_symbol(text, line, symbol, file)
    except PositionError as e:
        return ToolResult.error(str(e))
    target = _server_for(ctx, path, file)
    if isinstance(target, ToolResult):
        return target
    try:
        payload = _ask(
            ctx,
            target.key,
            "rename",
            {
                "path": str(path),
                "line0": span.line,
                "char": span.start,
                "new_name": new_name,
                "confine": [str(ctx.workdir)],
            },
            QUERY_TIMEOUT,
            idem=False,
        )
    except ResourceError as e:
        return ToolResult.error(f"lsp_rename: {e.message}", data={"code": e.code})
    files = [{"path": _rel(ctx, f["path"]), "edits": f["edits"]} for f in payload.get("files", [])]
    extra: dict[str, list[Any]] = {
        "created": [_rel(ctx, p) for p in payload.get("created", [])],
        "renamed": [[_rel(ctx, a), _rel(ctx, b)] for a, b in payload.get("renamed", [])],
        "deleted": [_rel(ctx, p) for p in payload.get("deleted", [])],
    }
    written = sorted({f["path"] for f in files} | set(extra["created"]))
    return ToolResult.ok(
        render.rename(symbol, new_name, files, extra),
        data={"files": files, **extra, "written": written},
    )


# --- diagnostics on write -----------------------------------------------------------------------


def _patch_targets(patch: str) -> list[str]:
    try:
        from tether.tools.harness import parse_patch

        return [fp.target for fp in parse_patch(patch) if getattr(fp, "target", None)]
    except Exception:  # noqa: BLE001 - a baseline is best effort; the write reports its own errors
        return []


def _candidates(tool: str, args: Mapping[str, Any]) -> list[str]:
    if tool in ("write", "edit") and isinstance(args.get("path"), str):
        return [args["path"]]
    if tool == "apply_patch" and isinstance(args.get("patch"), str):
        return _patch_targets(args["patch"])
    return []


def _staged_targets(ctx: ToolContext, args: Mapping[str, Any]) -> list[str]:
    """The files a `resolve accept` will write (the structural family's staged edit)."""
    if args.get("action") != "accept":
        return []
    try:
        staging = ctx.state.get("structural", {}).get("staging")
        edit = staging.edits.get(args.get("edit_id")) if staging is not None else None
        return [f.rel for f in edit.files] if edit is not None else []
    except Exception:  # noqa: BLE001 - a baseline is best effort
        return []


def _group(ctx: ToolContext, rels: list[str]) -> dict[str, tuple[Resolution, list[Path]]]:
    groups: dict[str, tuple[Resolution, list[Path]]] = {}
    for rel in rels:
        try:
            path = ctx.resolve_path(rel)
        except Exception:  # noqa: BLE001 - not ours to judge here
            continue
        for row in rows_for(path):
            r = _resolve(row, path, ctx.workdir)
            if r.usable:
                groups.setdefault(r.key, (r, []))[1].append(path)
                break
    return groups


def _baseline(ctx: ToolContext, rels: list[str]) -> None:
    """Before a file's first wrapped write: record what it already had, reporting nothing."""
    st = _state(ctx)
    ledger: Ledger = st["ledger"]
    fresh = [r for r in rels if not ledger.known(r) and (ctx.workdir / r).is_file()]
    for key, (_res, paths) in _group(ctx, fresh).items():
        for p in paths:
            try:
                payload = _ask(ctx, key, "diagnostics", {"path": str(p), "cap": WRITE_CAP},
                               WRITE_CAP + 20.0)  # fmt: skip
            except ResourceError:
                continue
            if payload.get("pending"):
                continue
            raw: list[Mapping[str, Any]] = next(iter((payload.get("files") or {}).values()), [])
            with st["lock"]:
                ledger.baseline(_rel(ctx, p), _severe(raw))


def _diagnose_written(
    ctx: ToolContext, written: list[str], created: Sequence[str] = ()
) -> tuple[list[dict], list[str], str]:
    """Sync + save the written files through their servers; (new diagnostics, pending, note)."""
    st = _state(ctx)
    ledger: Ledger = st["ledger"]
    new: list[dict] = []
    pending: list[str] = []
    notes: list[str] = []
    lines = _Lines(ctx)
    for key, (res, paths) in _group(ctx, written).items():
        try:
            payload = _ask(
                ctx,
                key,
                "sync",
                {
                    "paths": [str(p) for p in paths],
                    "created": [str(p) for p in paths if _rel(ctx, p) in created],
                    "cap": WRITE_CAP,
                },
                WRITE_CAP + res.row.startup_timeout + 2.0,
                idem=False,
            )
        except ResourceError as e:
            if e.code == ErrorCode.DEADLINE:
                pending += [_rel(ctx, p) for p in paths]
            else:
                notes.append(f"diagnostics unavailable ({res.row.name}): {e.message}")
            continue
        pending += [_rel(ctx, p) for p in payload.get("pending") or []]
        with st["lock"]:
            for p in payload.get("deleted") or []:
                ledger.forget(_rel(ctx, p))
            for p, raw in (payload.get("files") or {}).items():
                new += ledger.fold(_rel(ctx, p), _severe(raw))
            for p, ba in (payload.get("others") or {}).items():
                rel = _rel(ctx, p)
                if os.path.isabs(rel):
                    continue  # outside the workspace: not the agent's to fix
                before, after = ba.get("before"), _severe(ba.get("after") or [])
                if not ledger.known(rel):
                    if before is None:  # never seen before this write: no way to say "new"
                        ledger.baseline(rel, after)
                        continue
                    ledger.baseline(rel, _severe(before))
                new += ledger.fold(rel, after)
    for d in new:
        d["path"] = _rel(ctx, d["path"]) if os.path.isabs(d["path"]) else d["path"]
        d["text"] = lines(d["path"], int(d["line"]))
    order = {rel: i for i, rel in enumerate(written)}
    new.sort(key=lambda d: (order.get(d["path"], len(order)), d["path"], d["line"]))
    return new, pending, "; ".join(notes)


def _wrapper(
    tool: str,
) -> Callable[[ToolContext, dict[str, Any], Callable[[], ToolResult]], ToolResult]:
    def wrap(ctx: ToolContext, args: dict[str, Any], run: Callable[[], ToolResult]) -> ToolResult:
        cands = _candidates(tool, args) or (_staged_targets(ctx, args) if tool == "resolve" else [])
        if cands:
            _baseline(ctx, cands)
        res = run()
        if res.is_error or not isinstance(res.data, dict):
            return res
        written = [w for w in res.data.get("written") or [] if isinstance(w, str)]
        if not written:
            return res
        made = res.data.get("created")
        created = written if made is True else [c for c in made or [] if isinstance(c, str)]
        new, pending, note = _diagnose_written(ctx, written, created)
        if not new and not pending and not note:
            return res
        block = render.folded(new, pending)
        if note:
            block = (block + "\n" if block else "") + f"({note})"
        data = dict(res.data)
        data["diagnostics"] = {"new": new[: render.CAPS["folded"]], "total_new": len(new),
                               "pending": pending}  # fmt: skip
        return ToolResult(
            text=f"{res.text}\n\n{block}", is_error=False, data=data, images=res.images
        )

    wrap.__name__ = f"lsp_diagnostics_on_{tool}"
    return wrap


def wrappers() -> dict[str, Callable[..., ToolResult]]:
    return {t: _wrapper(t) for t in ("write", "edit", "apply_patch", "resolve")}


# --- specs ------------------------------------------------------------------------------------

_LSP_DESCRIPTION = """Ask the project's language server (Python: basedpyright, TypeScript/JavaScript: \
typescript-language-server, C/C++: clangd, Go: gopls, Rust: rust-analyzer, Dart: dart).
Positions are a 1-indexed `line` plus a `symbol` substring on that line (never a column); \
use "name#2" for its second occurrence on the line.
Actions:
- definition / type_definition / implementation / references / hover / code_actions: file, line, symbol
- diagnostics: file (errors and warnings of one file), or file "*" (runs the project's own checker)
- symbols: query (workspace search, cap 100) or file (that file's symbols, cap 200)
- status: which servers run for which root, or why one cannot (marker or binary missing)
- reload: restart the server for this workspace (or for file's server)
References are capped at 50. Example: {"action": "references", "file": "src/app.py", \
"line": 12, "symbol": "load_config"}"""


def specs() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="lsp",
            tier=Tier.READ,
            description=_LSP_DESCRIPTION,
            schema={
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": list(ACTIONS)},
                    "file": {
                        "type": "string",
                        "description": 'workspace-relative file; "*" with diagnostics',
                    },
                    "line": {"type": "integer", "minimum": 1, "description": "1-indexed line"},
                    "symbol": {
                        "type": "string",
                        "minLength": 1,
                        "description": "substring of that line naming the symbol (name#2 = 2nd)",
                    },
                    "query": {"type": "string", "description": "workspace symbol search"},
                },
                "required": ["action"],
                "additionalProperties": False,
            },
            handler=_lsp,
            needs=frozenset({Needs.WORKDIR, Needs.LANGUAGE_SERVERS}),
            path_args=("file",),
        ),
        ToolSpec(
            name="lsp_rename",
            tier=Tier.WRITE,
            description=(
                "Rename a symbol across the project through its language server, all files or "
                "none. Point at it with file + 1-indexed line + a substring of that line. "
                'Example: {"file": "src/app.py", "line": 12, "symbol": "load_config", '
                '"new_name": "read_config"}'
            ),
            schema={
                "type": "object",
                "properties": {
                    "file": {"type": "string", "description": "workspace-relative file"},
                    "line": {"type": "integer", "minimum": 1},
                    "symbol": {"type": "string", "minLength": 1},
                    "new_name": {"type": "string", "minLength": 1},
                },
                "required": ["file", "line", "symbol", "new_name"],
                "additionalProperties": False,
            },
            handler=_rename,
            needs=frozenset({Needs.WORKDIR, Needs.LANGUAGE_SERVERS}),
            path_args=("file",),
        ),
    ]
