"""Actor records -> model records: workspace-relative paths, 1-based code-point columns,
the code line of each record, and the SPEC's severity filter.

The actor leaves characters in the server's position encoding (converting needs the line's
text, which is read here anyway for the record's `text`); `Lines` reads each file once per
change, shared across calls.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NotRequired, TypedDict, TypeVar, cast, overload

from tether import atomic_files, beneath
from tether.lsp.checkers import Finding
from tether.lsp.positions import from_character
from tether.messages.language_server_ops import (
    DiagnosticRecord,
    HierarchyRecord,
    LocationRecord,
    Span,
    SymbolRecord,
)
from tether.tools.spec import ToolContext


def relative(ctx: ToolContext, path: str | Path) -> str:
    """A path a server or checker reported, as the model should see it: resolved first (so
    a path through a symlink into the workspace still counts as inside), "" for the
    workspace root itself, absolute outside it. `ctx.relative` differs: it takes an
    already resolved path and names the root "."."""
    text, root = str(path), str(ctx.workdir)
    if text.startswith(root) and text[len(root) : len(root) + 1] == "/" and _plain(text):
        return text[len(root) + 1 :]  # servers report real paths: most are inside already
    p = Path(path)
    try:
        return p.resolve().relative_to(ctx.workdir).as_posix()
    except ValueError:
        return str(p)


def _plain(path: str) -> bool:
    """No `.`, `..` or empty segment: the path means what it says, lexically."""
    return "//" not in path and "/./" not in path and "/.." not in path and not path.endswith("/.")


_LINE_CACHE: dict[str, tuple[tuple[int, int], list[str]]] = {}  # path -> (stamp, lines)


class Lines:
    """Code lines for records: one stat per file per call, one read per file change."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.seen: dict[str, list[str]] = {}
        self.rels: dict[str, str] = {}

    def relative(self, path: str) -> str:
        """`relative(ctx, path)`, once per path per call: a references answer names the
        same few files over and over, and each resolve costs two realpaths (~40 us)."""
        rel = self.rels.get(path)
        if rel is None:
            rel = self.rels[path] = relative(self.ctx, path)
        return rel

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
                    real = os.path.realpath(p)  # links resolved here, then none followed:
                    root = beneath.root_for(real, [self.ctx.workdir])  # a swap is refused
                    with atomic_files.open_regular(real, root=root) as f:  # never blocks
                        lines = f.read().decode("utf-8", errors="replace").split("\n")
                    if len(_LINE_CACHE) > 512:
                        _LINE_CACHE.clear()
                    _LINE_CACHE[p] = (stamp, lines)
            except OSError:
                lines = []
            self.seen[path] = lines
        return lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else ""


class ModelLocation(TypedDict):
    """A location as the model reads it: workspace-relative path, 1-based code-point
    columns, and `text`, the code line. (The keys of every model record below come in the
    actor record's order, then `text`: the model sees them rendered so.)"""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    text: str


class ModelSymbol(ModelLocation):
    name: str
    kind: str
    container: str
    detail: str


class ModelHierarchyItem(ModelLocation):
    """A caller, callee or type; a caller or callee has its call sites as locations (the
    first SITES_CAP of `sites_total`)."""

    name: str
    kind: str
    detail: str
    sites: NotRequired[list[ModelLocation]]
    sites_total: NotRequired[int]


class ModelDiagnostic(DiagnosticRecord):
    """A server's diagnostic as the model reads it (diagnostics on write): its path
    workspace-relative, and `text`, the code line."""

    text: str


class ModelFinding(Finding):
    """A project checker's finding as the model reads it: its path workspace-relative, and
    `text`, the code line."""

    text: str


_ActorRecord = LocationRecord | SymbolRecord | HierarchyRecord | DiagnosticRecord | Finding


@overload
def model_records(
    ctx: ToolContext, raw: Sequence[SymbolRecord], lines: Lines, encoding: str = ""
) -> list[ModelSymbol]: ...
@overload
def model_records(
    ctx: ToolContext, raw: Sequence[HierarchyRecord], lines: Lines, encoding: str = ""
) -> list[ModelHierarchyItem]: ...
@overload
def model_records(
    ctx: ToolContext, raw: Sequence[LocationRecord], lines: Lines, encoding: str = ""
) -> list[ModelLocation]: ...
@overload
def model_records(
    ctx: ToolContext, raw: Sequence[DiagnosticRecord], lines: Lines, encoding: str = ""
) -> list[ModelDiagnostic]: ...
@overload
def model_records(
    ctx: ToolContext, raw: Sequence[Finding], lines: Lines, encoding: str = ""
) -> list[ModelFinding]: ...
def model_records(
    ctx: ToolContext, raw: Sequence[_ActorRecord], lines: Lines, encoding: str = ""
) -> Sequence[Mapping[str, object]]:
    """Actor records -> model records: workspace-relative path, 1-based code-point columns
    (converted from the server's encoding when given as `character`), and the code line; a
    caller's or callee's call sites (in the file `sites_path`) as model locations too."""
    out: list[Mapping[str, object]] = []
    for r in raw:
        path = lines.relative(r["path"])
        text = lines(path, int(r["line"]))
        # (built key by key in the actor record's order; the overloads name its shape)
        rec: dict[str, object] = {"path": path, "line": r["line"]}
        if "character" in r:  # a location (its span in the server's encoding)
            sp = cast(Span, r)
            enc = encoding or "utf-16"
            end_text = text if sp["end_line"] == sp["line"] else lines(path, int(sp["end_line"]))
            rec["column"] = from_character(text, int(sp["character"]), enc) + 1
            rec["end_line"] = sp["end_line"]
            rec["end_column"] = from_character(end_text, int(sp["end_character"]), enc) + 1
        sites_path = r.get("sites_path")
        for k, v in r.items():
            if k in rec or "character" in k or k == "sites_path":
                continue
            if k == "sites" and isinstance(sites_path, str):
                v = _sites(ctx, sites_path, cast(list[Span], v), lines, encoding)
            rec[k] = v
        rec["text"] = text
        out.append(rec)
    return out


def _sites(
    ctx: ToolContext, where: str, sites: list[Span], lines: Lines, encoding: str
) -> list[ModelLocation]:
    """A caller's or callee's call sites as model records (path, line, column, code)."""
    located: list[LocationRecord] = [{"path": where, **s} for s in sites]
    return model_records(ctx, located, lines, encoding)


# a language server's diagnostic, or a project checker's finding
_Diagnostic = TypeVar("_Diagnostic", DiagnosticRecord, Finding)


def severe(recs: Sequence[_Diagnostic]) -> list[_Diagnostic]:
    """SPEC: diagnostics are errors and warnings (hints and infos are left out)."""
    return [d for d in recs if int(d.get("severity") or 1) <= 2]
