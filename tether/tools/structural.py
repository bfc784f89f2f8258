"""ast_grep, ast_edit and resolve: structural search and staged rewrite (SPEC.md).

The handlers compile the pattern on the host (a bad pattern is an immediate, specific
error), then fan the work out to every slot of the parser pool ("parser" resource kind,
one actor process per slot) with a shard index; each slot searches the files whose path
hashes to it, with its own parse cache. Without a runtime (a bare `Run(workdir=...)`, or
tests) the same functions run in-process on a module-level cache.

Staged edits live per run in `ctx.state["structural"]`, so an edit id belongs to the run
that staged it. `resolve accept` writes all files or none (see `staging.py`) and puts
`data["written"]` in its result for the diagnostics-on-write wrappers.
"""

from __future__ import annotations

import dataclasses
import difflib
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from tether.json_types import JSONObject
from tether.messages.calls import ErrorCode, ResourceError
from tether.messages.nested import plain
from tether.messages.parser_ops import (
    Edit,
    EditReply,
    R,
    Search,
    SearchReply,
    read_reply,
)
from tether.structural import ops
from tether.structural.cache import ParseCache
from tether.structural.languages import LanguageError, infer
from tether.structural.pattern import Pattern, PatternError, compile_pattern, shown
from tether.structural.rewrite import RewriteError, check_template
from tether.structural.staging import ResolveError, StagedFile, Staging, commit, digest
from tether.tools.results import ToolResult
from tether.tools.spec import Needs, RunState, Tier, ToolContext, ToolSpec
from tether.tools.structural_index import (
    FAMILY,
    KIND,
    StructuralState,
    stop_warming,
    warm_after_first_search,
    warm_index,
    workspace_files,
)

SEARCH_TIMEOUT = 120.0
DEFAULT_MAX_RESULTS = 50
MAX_MAX_RESULTS = 1000
DIFF_PREVIEW_LINES = 120
CODE_CHARS = 160

_LOCAL_CACHE = ParseCache()  # in-process fallback (no runtime / no pool)
_LOCAL_LOCK = threading.Lock()


# --- helpers -----------------------------------------------------------------------------


def _target(ctx: ToolContext, args: JSONObject) -> tuple[Path, str | None]:
    rel = args.get("path")
    if not isinstance(rel, str) or rel in ("", "*", "."):
        return Path(ctx.workdir), None
    path = ctx.resolve_path(rel)
    if not path.exists():
        raise ValueError(
            f"path {rel!r} does not exist in the workspace; pass an existing file or "
            f"directory (workspace-relative), or omit `path` to search everything."
        )
    return path, rel if path.is_file() else None


def _search_shards(ctx: ToolContext, op: Search) -> list[SearchReply]:
    return _fan_out(ctx, op, SearchReply, lambda: ops.op_search(_LOCAL_CACHE, op))


def _edit_shards(ctx: ToolContext, op: Edit) -> list[EditReply]:
    return _fan_out(ctx, op, EditReply, lambda: ops.op_edit(_LOCAL_CACHE, op))


def _fan_out(
    ctx: ToolContext, op: Search | Edit, expect: type[R], local: Callable[[], R]
) -> list[R]:
    """Run `op` on every pool slot with a share of the files (one shard each), each
    slot's reply read back as `expect`; in-process (`local`) when there is no pool."""
    try:
        keys = list(ctx.kind_keys(KIND))
    except ResourceError:
        keys = []
    if not keys:
        with _LOCAL_LOCK:
            return [local()]
    shares = ops.split_work(
        op, len(keys), workspace_files(ctx.gather, op)
    )  # one listing, not one per slot
    fam = ctx.state.setdefault(FAMILY, StructuralState())
    if isinstance(op, Search) and op.root == str(ctx.workdir):
        if op.lang not in fam.get("warmed", ()):
            # the workspace's files of this language: what warming indexes (no relisting)
            fam["listed"] = (op.lang, [s.files for s in shares])
    work = [(key, s) for key, s in zip(keys, shares, strict=True) if ops.has_work(s)]
    calls = [(KIND, key, share, None) for key, share in work]
    replies = ctx.gather(calls, SEARCH_TIMEOUT) if calls else []
    out: list[R] = []
    for (key, _), reply in zip(work, replies, strict=True):
        if isinstance(reply, ResourceError):
            if reply.code == ErrorCode.BAD_REQUEST:
                raise ValueError(reply.message)
            raise RuntimeError(
                f"parser pool slot {key} failed ({reply.code}): {reply.message}. The search "
                f"was not completed; call again (the pool restarts failed slots)."
            )
        out.append(read_reply(expect, reply))
    return out


def _code_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines()]
    head = lines[0] if lines else ""
    if len(lines) > 1:
        head += f" … (+{len(lines) - 1} lines)"
    return head if len(head) <= CODE_CHARS else head[: CODE_CHARS - 1] + "…"


def _captures_text(caps: Mapping[str, str]) -> str:
    parts = []
    for k, v in caps.items():
        v1 = " ".join(v.split())
        parts.append(f"${k} = {v1 if len(v1) <= 60 else v1[:59] + '…'}")
    return ", ".join(parts)


def _prepare(ctx: ToolContext, args: JSONObject) -> tuple[Path, str, Pattern]:
    path, file_rel = _target(ctx, args)
    language = args.get("language")
    lang = infer(language if isinstance(language, str) else None, file_rel)
    pattern = compile_pattern(str(args["pattern"]), lang)
    return path, lang, pattern


def _error(exc: Exception) -> ToolResult:
    return ToolResult.error(str(exc))


# --- ast_grep ----------------------------------------------------------------------------


def _search(ctx: ToolContext, args: JSONObject) -> ToolResult:
    try:
        path, lang, pattern = _prepare(ctx, args)
        asked = args.get("max_results")
        limit = (
            int(asked) if isinstance(asked, int | float | str) and asked else DEFAULT_MAX_RESULTS
        )
        limit = max(1, min(limit, MAX_MAX_RESULTS))
        replies = _search_shards(
            ctx, Search(root=str(path), lang=lang, pattern=pattern.source, limit=limit)
        )
    except (PatternError, LanguageError, ValueError) as exc:
        return _error(exc)
    except (RuntimeError, ResourceError) as exc:
        return _error(exc)
    total = sum(r.total for r in replies)
    nfiles = sum(r.files for r in replies)
    matches = [
        dataclasses.replace(m, path=ctx.relative(Path(m.path))) for r in replies for m in r.matches
    ]
    matches.sort(key=lambda m: (m.path, m.start_line, m.start_col))
    listed = matches[:limit]
    where = ctx.relative(path) if path != Path(ctx.workdir) else "the workspace"
    binary = sum(r.stats.get("binary", 0) for r in replies)
    skipped = (
        f"\n{binary} binary file{'s' if binary != 1 else ''} named like {lang} source "
        f"{'were' if binary != 1 else 'was'} skipped."
        if binary
        else ""
    )
    contexts = list(pattern.contexts)
    read_as = _read_as(contexts)
    if total == 0:
        text = (
            f"No matches for `{shown(pattern.source)}` ({lang}) in {where}. The pattern was "
            f"parsed as {read_as}; loosen it with metavariables ($X, $$$ARGS) "
            f"if you expected matches."
        )
        data = {"matches": [], "total": 0, "binary": binary, "contexts": contexts}
        return ToolResult.ok(text + skipped, data=data)
    head = f"{total} match{'es' if total != 1 else ''} in {nfiles} file{'s' if nfiles != 1 else ''}"
    if len(contexts) > 1:  # a member pattern is searched in every container that reads it
        head += f", the pattern read as {read_as}"
    if total > len(listed):
        head += f" (showing the first {len(listed)}; raise max_results or narrow `path` for more)"
    lines = [head + ":"]
    for m in listed:
        lines.append(f"{m.path}:{m.start_line}: {_code_line(m.text)}")
        if m.captures:
            lines.append(f"    {_captures_text(m.captures)}")
    data = {
        "matches": [plain(m) for m in listed],
        "total": total,
        "binary": binary,
        "contexts": contexts,
    }
    return ToolResult.ok("\n".join(lines) + skipped, data=data)


def _read_as(contexts: list[str]) -> str:
    """'a statement'; 'a class member, an interface member or an object type member'."""
    named = [f"{'an' if c[0] in 'aeiou' else 'a'} {c}" for c in contexts]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} or {named[-1]}"


def _ast_grep(ctx: ToolContext, args: JSONObject) -> ToolResult:
    result = _search(ctx, args)
    if not result.is_error:
        warm_after_first_search(ctx, str(args.get("language") or ""), args.get("path"))
    return result


# --- ast_edit ----------------------------------------------------------------------------


def _staging(ctx: ToolContext) -> tuple[Staging, threading.Lock]:
    return run_staging(ctx.state)


def run_staging(state: RunState) -> tuple[Staging, threading.Lock]:
    """A run's staged edits and their lock, from its per-run state (also used by vibe
    workers, whose changes `resolve` takes as well)."""
    fam = state.setdefault(FAMILY, StructuralState())
    lock = fam.setdefault("lock", threading.Lock())
    staging = fam.setdefault("staging", Staging())
    return staging, lock


def _diff(rel: str, old: bytes, new: bytes) -> list[str]:
    a = old.decode("utf-8", "replace").splitlines()
    b = new.decode("utf-8", "replace").splitlines()
    return list(difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}", n=1, lineterm=""))


def _ast_edit(ctx: ToolContext, args: JSONObject) -> ToolResult:
    try:
        path, lang, pattern = _prepare(ctx, args)
        rewrite = str(args["rewrite"])
        check_template(rewrite, pattern.metavars)
        replies = _edit_shards(
            ctx, Edit(root=str(path), lang=lang, pattern=pattern.source, rewrite=rewrite)
        )
    except (PatternError, LanguageError, RewriteError, ValueError) as exc:
        return _error(exc)
    except (RuntimeError, ResourceError) as exc:
        return _error(exc)
    proposed = sorted((f for r in replies for f in r.files), key=lambda f: f.path)
    if not proposed:
        return ToolResult.ok(
            f"No matches for `{shown(pattern.source)}` ({lang}); nothing was staged.",
            data={"edit_id": None, "replacements": 0, "files": []},
        )
    staged: list[StagedFile] = []
    diff: list[str] = []
    moved: list[str] = []
    for f in proposed:
        rel = ctx.relative(Path(f.path))
        try:
            old = Path(f.path).read_bytes()
        except OSError:
            moved.append(rel)
            continue
        if digest(old) != f.old_hash:
            moved.append(rel)
            continue
        staged.append(StagedFile(rel, f.path, f.old_hash, f.new, f.replacements))
        diff.extend(_diff(rel, old, f.new))
    if moved:
        return ToolResult.error(
            f"{len(moved)} file(s) changed while the edit was being computed: "
            f"{', '.join(moved)}. Nothing was staged; call ast_edit again."
        )
    staging, lock = _staging(ctx)
    with lock:
        edit = staging.stage(pattern.source, rewrite, staged)
    count = sum(f.replacements for f in staged)
    flags = [(s, p.syntax) for s, p in zip(staged, proposed, strict=True) if p.syntax]
    lines = [
        f"(proposed) {count} replacement{'s' if count != 1 else ''} in {len(staged)} "
        f'file{"s" if len(staged) != 1 else ""} … call resolve with edit_id "{edit.edit_id}" '
        f'(action "accept" writes them all, "discard" drops the change). Nothing is written yet.'
    ]
    for s, flag in flags:
        lines.append(f"⚠ syntax: {s.rel}: {flag}")
    preview = diff[:DIFF_PREVIEW_LINES]
    lines.append("")
    lines.extend(preview)
    if len(diff) > len(preview):
        lines.append(
            f"… diff truncated ({len(diff) - len(preview)} more lines); accept applies the "
            f"whole change"
        )
    data = {
        "edit_id": edit.edit_id,
        "replacements": count,
        "files": [
            {"path": s.rel, "replacements": s.replacements, "syntax_error": p.syntax}
            for s, p in zip(staged, proposed, strict=True)
        ],
    }
    return ToolResult.ok("\n".join(lines), data=data)


# --- resolve -----------------------------------------------------------------------------


def _resolve(ctx: ToolContext, args: JSONObject) -> ToolResult:
    edit_id = str(args.get("edit_id", "")).strip()
    action = str(args.get("action", "")).strip().lower()
    staging, lock = _staging(ctx)
    try:
        with lock:
            if action == "discard":
                edit = staging.discard(edit_id)
                return ToolResult.ok(
                    f"{edit_id} discarded; no file was changed.",
                    data={"edit_id": edit_id, "written": []},
                )
            if action != "accept":
                return ToolResult.error(
                    f'unknown action {action!r}: use "accept" (write the change) or '
                    f'"discard" (drop it).'
                )
            edit = staging.get(edit_id)
            written = commit(edit)
    except ResolveError as exc:
        return ToolResult.error(str(exc))
    count = sum(f.replacements for f in edit.files)
    return ToolResult.ok(
        f"{edit_id} accepted: {count} replacement{'s' if count != 1 else ''} written to "
        f"{len(written)} file{'s' if len(written) != 1 else ''}: {', '.join(written)}",
        data={"edit_id": edit_id, "written": written},
    )


# --- specs -------------------------------------------------------------------------------

_PATTERN_HELP = (
    "`pattern` is a code fragment in the target language with metavariables: `$X` matches "
    "one node (an expression, a statement, an identifier), `$$$ARGS` any run of sibling "
    "nodes (zero or more arguments, statements, ...), `$_` one node without binding it. A "
    "metavariable repeated in one pattern must match the same code. Names are UPPERCASE. "
    "Matching is by syntax tree: whitespace, line breaks and comments in the code do not "
    "matter, and code inside strings or comments never matches. Not a regex: no `.*`, no "
    "`a|b`, no partial identifiers like `use$NAME`."
)

_AST_GREP_DESCRIPTION = (
    "Structural code search: find code by its shape, not its text. " + _PATTERN_HELP + " "
    "Results are `path:line: code` with the captured metavariables. `language` is a grammar "
    "id (python, typescript, tsx, javascript, dart, rust, go, c, cpp, java, kotlin, swift, "
    "ruby, csharp, ...) and is inferred when `path` names a file. "
    'Example: {"pattern": "if ($X != null) $X.dispose()", "language": "dart"} finds guards '
    "that dispose what they test."
)

_AST_EDIT_DESCRIPTION = (
    "Structural rewrite, staged: the same matching as ast_grep, and every match (outermost, "
    "non-overlapping) replaced by `rewrite`, with the captured metavariables substituted "
    "back and indentation kept. Nothing is written: the result shows a diff and an "
    "edit_id; call resolve to accept or discard it. " + _PATTERN_HELP + " "
    'Example: {"pattern": "dispose($X)", "rewrite": "$X.dispose()", "language": "dart"}.'
)

_RESOLVE_DESCRIPTION = (
    "Commit or discard a change staged by ast_edit. accept re-checks every file against "
    "its content at staging: if any file changed since, the whole change is rejected "
    "(nothing written; stage it again). Writes are all-or-nothing. "
    'Example: {"edit_id": "edit_1", "action": "accept"}.'
)

_PATTERN: JSONObject = {"type": "string", "minLength": 1, "description": "code with $METAVARS"}
_LANGUAGE: JSONObject = {
    "type": "string",
    "description": "grammar id (python, dart, rust, typescript, ...); inferred from a file path",
}
_PATH: JSONObject = {
    "type": "string",
    "description": "workspace-relative file or directory to search; default: the whole workspace",
}


def specs() -> list[ToolSpec]:
    needs = frozenset({Needs.WORKDIR, Needs.PARSER})
    return [
        ToolSpec(
            name="ast_grep",
            tier=Tier.READ,
            description=_AST_GREP_DESCRIPTION,
            schema={
                "type": "object",
                "properties": {
                    "pattern": _PATTERN,
                    "path": _PATH,
                    "language": _LANGUAGE,
                    "max_results": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_MAX_RESULTS,
                        "description": f"matches shown (default {DEFAULT_MAX_RESULTS}); the total is always counted",
                    },
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
            handler=_ast_grep,
            needs=needs,
            path_args=("path",),
        ),
        ToolSpec(
            name="ast_edit",
            tier=Tier.WRITE,
            description=_AST_EDIT_DESCRIPTION,
            schema={
                "type": "object",
                "properties": {
                    "pattern": _PATTERN,
                    "rewrite": {"type": "string", "description": "replacement; may use the pattern's $METAVARS"},
                    "path": _PATH,
                    "language": _LANGUAGE,
                },
                "required": ["pattern", "rewrite"],
                "additionalProperties": False,
            },
            handler=_ast_edit,
            needs=needs,
            path_args=("path",),
        ),
        ToolSpec(
            name="resolve",
            tier=Tier.WRITE,
            description=_RESOLVE_DESCRIPTION,
            schema={
                "type": "object",
                "properties": {
                    "edit_id": {"type": "string", "minLength": 1, "description": 'from ast_edit, e.g. "edit_1"'},
                    "action": {"type": "string", "enum": ["accept", "discard"]},
                },
                "required": ["edit_id", "action"],
                "additionalProperties": False,
            },
            handler=_resolve,
            needs=needs,
        ),
    ]  # fmt: skip


def local_cache() -> ParseCache:
    """The in-process fallback's cache (tests and embedders without a runtime)."""
    return _LOCAL_CACHE


__all__ = ["FAMILY", "local_cache", "specs", "stop_warming", "warm_index"]
