"""The project checkers `lsp diagnostics "*"` runs: how each is started (`checker_argv`), and
the parsers of their output, one per output format.

A row of the server table (`tether.lsp.servers`) names its checker's argv and, by name,
the parser here that reads what it prints: basedpyright's JSON, tsc's one-line errors,
the gcc-style `path:line:col: severity: message` that cc, go vet and cargo (short) share,
and dart's machine format. Each returns the same records, so the project's findings are
rendered like a language server's diagnostics.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from tether.atomic_files import open_regular
from tether.json_types import JSONObject, JSONValue
from tether.roots import local_or_path

if TYPE_CHECKING:
    from tether.lsp.servers import ServerRow

CHECKER_TIMEOUT = 300.0  # s one run of a project checker may take

_SEVERITY = {"error": 1, "warning": 2, "information": 3, "info": 3, "hint": 4, "note": 3}


def _pyright_json(out: str) -> list[JSONObject]:
    start = out.find("{")
    if start < 0:
        return []
    data = json.loads(out[start:])
    res: list[JSONObject] = []
    for d in data.get("generalDiagnostics", []):
        r = d.get("range", {}).get("start", {})
        res.append(
            {
                "path": d.get("file", ""),
                "line": int(r.get("line", 0)) + 1,
                "column": int(r.get("character", 0)) + 1,
                "severity": _SEVERITY.get(d.get("severity", "error"), 1),
                "code": d.get("rule", ""),
                "message": d.get("message", ""),
            }
        )
    return res


_TSC = re.compile(
    r"^(?P<path>[^\s(][^(]*)\((?P<line>\d+),(?P<col>\d+)\): (?P<sev>error|warning) (?P<code>TS\d+): (?P<msg>.*)$"
)
_GCC = re.compile(
    r"^(?:vet: )?(?P<path>[^:\s][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? ?(?:(?P<sev>fatal error|error|warning|note)(?:\[(?P<code>[^\]]+)\])?: )?(?P<msg>.+)$"
)


def _tsc(out: str) -> list[JSONObject]:
    res: list[JSONObject] = []
    for line in out.splitlines():
        m = _TSC.match(line.strip())
        if m:
            res.append(
                {
                    "path": m["path"],
                    "line": int(m["line"]),
                    "column": int(m["col"]),
                    "severity": _SEVERITY[m["sev"]],
                    "code": m["code"],
                    "message": m["msg"],
                }
            )
        elif res and line.startswith("  "):  # continuation of a multi-line message
            res[-1]["message"] = f"{res[-1]['message']}\n{line.strip()}"
    return res


def _gcc(out: str) -> list[JSONObject]:
    res: list[JSONObject] = []
    for line in out.splitlines():
        if line.startswith("#") or line.startswith(" "):
            continue
        m = _GCC.match(line.strip())
        if not m:
            continue
        sev = (m["sev"] or "error").replace("fatal error", "error")
        if sev == "note":
            continue
        res.append(
            {
                "path": m["path"],
                "line": int(m["line"]),
                "column": int(m["col"] or 1),
                "severity": _SEVERITY[sev],
                "code": m["code"] or "",
                "message": m["msg"],
            }
        )
    return res


def _dart_machine(out: str) -> list[JSONObject]:
    res: list[JSONObject] = []
    for line in out.splitlines():
        f = line.split("|")
        if len(f) < 8 or f[0] not in ("ERROR", "WARNING", "INFO"):
            continue
        res.append(
            {
                "path": f[3],
                "line": int(f[4]),
                "column": int(f[5]),
                "severity": {"ERROR": 1, "WARNING": 2, "INFO": 3}[f[0]],
                "code": f[2].lower(),
                "message": "|".join(f[7:]),
            }
        )
    return res


PARSERS: dict[str, Callable[[str], list[JSONObject]]] = {
    "pyright-json": _pyright_json,
    "tsc": _tsc,
    "gcc": _gcc,
    "dart-machine": _dart_machine,
}


def parse_checker_output(parser: str, out: str) -> list[JSONObject]:
    """Findings as records {path (as printed), line, column (1-based), severity, code, message}
    (JSON objects: they cross to the host as a CheckReply; `finding` reads one back)."""
    return PARSERS[parser](out)


class Finding(TypedDict):
    """One finding of a project checker, as `parse_checker_output` makes it."""

    path: str
    line: int
    column: int
    severity: int
    code: str
    message: str


def finding(rec: JSONObject) -> Finding:
    """A record off the wire as a Finding, its fields in the parsers' order (a field of
    another type than the parsers write reads as its zero)."""
    return {
        "path": _text(rec.get("path")),
        "line": _whole(rec.get("line")),
        "column": _whole(rec.get("column")),
        "severity": _whole(rec.get("severity")),
        "code": _text(rec.get("code")),
        "message": _text(rec.get("message")),
    }


def _text(v: JSONValue) -> str:
    return v if isinstance(v, str) else ""


def _whole(v: JSONValue) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


class CheckerUnavailable(Exception):
    """The row's project checker cannot run here (its binary is missing)."""


SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", "build", "target", ".cache"}


def checker_argv(row: ServerRow, root: Path) -> list[str]:
    """The argv of `row`'s project checker for the project at `root` (run in `root`); []
    when there is nothing to check (a checker of listed files, and no such file)."""
    ck = row.checker
    assert ck is not None, f"{row.name} has no project checker"
    exe = local_or_path(root, row.local_bin_dirs, ck.argv[0])
    if exe is None:
        raise CheckerUnavailable(
            f"the {row.name} project checker needs {ck.argv[0]}, which is not on PATH"
        )
    argv = [exe, *ck.argv[1:]]
    if ck.files:
        argv += _flag_lines(row, root)
        files = _project_files(root, ck.files)
        if not files:
            return []
        argv += files
    return argv


def _flag_lines(row: ServerRow, root: Path) -> list[str]:
    """The lines of the project's compile_flags.txt (none when it has none), read beneath
    `root`: a file whose links lead out of the project (to another run's workspace, a
    secret) is not read into the checker's argv on the host (issue 22)."""
    flags = root / "compile_flags.txt"
    try:
        with open_regular(flags, follow=True, root=root) as f:
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise CheckerUnavailable(
            f"the {row.name} project checker reads {flags}, which could not be read: {exc}. "
            "Make it a regular file inside the project"
        ) from exc
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _project_files(root: Path, exts: tuple[str, ...]) -> list[str]:
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
        out += [
            os.path.relpath(os.path.join(d, f), root) for f in sorted(files) if f.endswith(exts)
        ]
    return out
