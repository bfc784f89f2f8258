"""Project roots and the intersection rule, shared by the language-server table
(`tether.lsp.servers`) and the debug-adapter table (`tether.debug.adapters`).

SPEC.md "lsp" and "debug" state one rule for both: a tool can run for a path only when one
of its root markers is in the path's directory or above it (up to the workspace root) AND
its binary resolves. Each table finds its binary its own way (a server may live in
node_modules/.bin, debugpy is a module); the marker walk up, the rule, the words of its
refusal and the bounded walk down (a sample file, a marker anywhere) live here once.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Collection
from pathlib import Path


def local_or_path(root: Path, bin_dirs: Collection[str], name: str) -> str | None:
    """`name` in the project's own bin dirs under `root` (node_modules/.bin, .venv/bin, ...),
    else on PATH: a project's own tool wins over the machine's."""
    for d in bin_dirs:
        candidate = root / d / name
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


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


def usable(root: Path | None, binary: str) -> bool:
    """The intersection rule: a root marker was found AND the binary resolved."""
    return root is not None and bool(binary)


def why_not(root: Path | None, markers: tuple[str, ...], binary: str, binary_missing: str) -> str:
    """Which half of the rule is missing ("" when none): the markers looked for, and
    `binary_missing` (the table's words for its binary: the names looked for, how to
    install)."""
    parts = []
    if root is None:
        parts.append(f"no root marker ({', '.join(markers)}) from there up to the workspace root")
    if not binary:
        parts.append(binary_missing)
    return "; ".join(parts)


def first_below(
    root: Path, wanted: Callable[[os.DirEntry[str]], bool], skip: Collection[str], limit: int
) -> Path | None:
    """The first entry under `root` that is `wanted` (never a directory), shallowest first,
    then by name. Hidden directories and those named in `skip` are not entered, symlinked
    directories are not followed, and at most `limit` entries are looked at: a walk that
    answers in bounded time on any tree (None when nothing was found within it)."""
    seen = 0
    level = [root]
    while level:
        below: list[Path] = []
        for d in level:
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError:
                continue
            for e in entries:
                seen += 1
                if seen > limit:
                    return None
                try:
                    if e.is_dir(follow_symlinks=False):
                        if not e.name.startswith(".") and e.name not in skip:
                            below.append(Path(e.path))
                    elif wanted(e):
                        return Path(e.path)
                except OSError:
                    continue
        level = below
    return None
