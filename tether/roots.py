"""Project roots: the nearest directory holding a root marker, shared by the language-server
and debug-adapter tables (the intersection rule of SPEC.md "lsp" and "debug")."""

from __future__ import annotations

from pathlib import Path


def find_root(start: Path, workspace: Path, markers: tuple[str, ...]) -> tuple[Path, str] | None:
    """Nearest directory from `start` up to `workspace` (inclusive) that holds a marker."""
    start, workspace = start.resolve(), workspace.resolve()
    d = start if start.is_dir() else start.parent
    while True:
        for m in markers:
            if (d / m).exists():
                return d, m
        if d == workspace or workspace not in d.parents:
            return None
        d = d.parent
