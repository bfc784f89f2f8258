"""`diagnostics "*"`: the project's own checker, run host-side.

basedpyright --outputjson, tsc --noEmit, cc -fsyntax-only, go vet ./..., cargo check, dart
analyze: the row's `checker` says which, and `checkers.parse_checker_output` turns its output
into the same records as a language server's diagnostics.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tether.lsp import render
from tether.lsp.checkers import parse_checker_output
from tether.lsp.servers import SERVERS, ServerRow, resolve
from tether.messages.calls import ErrorCode, ResourceError
from tether.tools.lsp.records import Lines, model_records, severe
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

CHECKER_TIMEOUT = 300.0
SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", "build", "target", ".cache"}


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
    recs = parse_checker_output(ck.parser, text)
    for r in recs:
        p = Path(r["path"])
        r["path"] = str(p if p.is_absolute() else (root / p).resolve())
    return recs


def project_check(ctx: ToolContext) -> ToolResult:
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
        found = model_records(ctx, severe(found), Lines(ctx))
        recs += found
        parts.append(f"{row.checker_name}: {len(found)} finding(s)")
    shown = recs[: render.CAPS["diagnostics"]]
    text = render.diagnostics(shown, len(recs), "project check (" + "; ".join(parts) + ")")
    return ToolResult.ok(text, data={"diagnostics": shown, "total": len(recs), "checkers": ran})
