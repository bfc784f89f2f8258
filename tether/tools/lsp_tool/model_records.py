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
from typing import Any, TypeVar

from tether import atomic_files, beneath
from tether.lsp.positions import from_character
from tether.messages.language_server_ops import DiagnosticRecord
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


def model_records(
    ctx: ToolContext, raw: Sequence[Mapping[str, Any]], lines: Lines, encoding: str = ""
) -> list[dict[str, Any]]:
    """Actor records -> model records: workspace-relative path, 1-based code-point columns
    (converted from the server's encoding when given as `character`), and the code line."""
    out: list[dict[str, Any]] = []
    for r in raw:
        path = lines.relative(r["path"])
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


class ModelDiagnostic(DiagnosticRecord):
    """A server's diagnostic as the model reads it (diagnostics on write): its path
    workspace-relative, and `text`, the code line."""

    text: str


# a language server's diagnostic, or a project checker's finding (CheckReply.records, whose
# type is still dict[str, Any])
_Diagnostic = TypeVar("_Diagnostic", DiagnosticRecord, dict[str, Any])


def severe(recs: Sequence[_Diagnostic]) -> list[_Diagnostic]:
    """SPEC: diagnostics are errors and warnings (hints and infos are left out)."""
    return [d for d in recs if int(d.get("severity") or 1) <= 2]
