"""Which files a search reads: the walk, the extension filter, shards and the text prefilter.

Inside a git work tree the file list is git's (tracked and untracked, minus what
.gitignore excludes), as the ast-grep CLI honours .gitignore. Either way we skip what no
one means to search: hidden directories (`.git`, `.venv`), `node_modules`, `__pycache__`. Files are assigned to pool slots by a stable hash of their
path (crc32, not `hash()`, which is salted per process), so the same file always reaches
the same actor and its parse cache.

The listing is made once per search by the caller that fans it out (`ops.split_work`, on
the host), never in a slot's message handler: each slot gets its share of the paths and
only stats those (`stat_files`). In a runtime, git runs under the tree, as the "git"
actor's subprocess (`tether.actors.git`, which answers `select_listed` of GIT_LIST's
output); the host only walks when that says "not a work tree". Without a runtime,
`git_files` runs git here, bounded by GIT_TIMEOUT.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import zlib
from collections.abc import Iterable, Iterator

SKIP_DIRS = frozenset({"node_modules", "__pycache__", ".git", ".hg", ".svn"})
GIT_TIMEOUT = 10.0


def shard_of(path: str, nshards: int) -> int:
    return zlib.crc32(path.encode("utf-8", "surrogateescape")) % nshards if nshards > 1 else 0


# `git ls-files` of a work tree: tracked files, plus untracked ones not ignored
GIT_LIST = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
# asked when the listing is empty: is the directory one the enclosing repository ignores?
GIT_IGNORED = ("check-ignore", "-q", ".")


def git_names(stdout: bytes) -> list[str]:
    """The names (relative to the root, sorted, once each) in the output of GIT_LIST."""
    return sorted({n for n in stdout.decode("utf-8", "surrogateescape").split("\0") if n})


def git_files(root: str) -> list[str] | None:
    """The files git would show under `root` (tracked, plus untracked not ignored), or
    None when `root` is not in a git work tree. This is how .gitignore is honoured (as the
    ast-grep CLI does) without re-implementing its rules.

    Runs git in this process: for the in-process mode only (no runtime, so no tree to run
    it under). A runtime lists through its "git" actor (`tether.actors.git`), which runs
    the same commands as its own watched subprocess."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        out = subprocess.run(
            [git, *GIT_LIST], cwd=root, capture_output=True, timeout=GIT_TIMEOUT, check=False
        )
        if out.returncode != 0:
            return None
        if not out.stdout:
            # `root` may sit in a directory the enclosing repository ignores (a Python
            # under ~/.pyenv/versions): git lists nothing there, which is not "no files".
            ignored = subprocess.run(
                [git, *GIT_IGNORED], cwd=root, capture_output=True, timeout=GIT_TIMEOUT
            )
            if ignored.returncode == 0:
                return None
    except (OSError, subprocess.SubprocessError):
        return None
    return [os.path.join(root, n) for n in git_names(out.stdout)]


def _skipped(rel_parts: list[str], exclude: frozenset[str]) -> bool:
    return any(p.startswith(".") or p in SKIP_DIRS or p in exclude for p in rel_parts)


def list_files(
    root: str,
    extensions: frozenset[str],
    exclude: frozenset[str] = frozenset(),
    listed: list[str] | None = None,
) -> list[str]:
    """Every file under the directory `root` with one of the extensions, not stat'ed yet
    (`stat_files` does that, where the file is read).

    `listed`: git's listing of `root` (absolute paths; so .gitignore applies); None: in a
    git work tree, git's listing made here (`git_files`), elsewhere a walk (`walk_files`).
    `exclude` names directories (by base name) to skip besides the defaults.
    """
    if listed is None:
        listed = git_files(root)
    if listed is None:
        return walk_files(root, extensions, exclude)
    return select_listed(root, listed, extensions, exclude)


def select_listed(
    root: str, listed: Iterable[str], extensions: frozenset[str], exclude: frozenset[str]
) -> list[str]:
    """The paths of git's listing of `root` with one of the extensions, outside skipped
    directories."""
    out = []
    skip = len(os.path.join(root, ""))  # git's names are relative and normalised
    for path in listed:
        slash = path.rfind(os.sep)
        dot = path.rfind(".")
        if dot <= slash + 1 or path[dot + 1 :].lower() not in extensions:
            continue
        if slash > skip and _skipped(path[skip:slash].split(os.sep), exclude):
            continue
        out.append(path)
    return out


def walk_files(
    root: str, extensions: frozenset[str], exclude: frozenset[str] = frozenset()
) -> list[str]:
    """`list_files` outside a git work tree: a walk, skipping hidden and skipped dirs."""
    out = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for e in entries:
            name = e.name
            try:
                if e.is_dir(follow_symlinks=False):
                    if name.startswith(".") or name in SKIP_DIRS or name in exclude:
                        continue
                    subdirs.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    dot = name.rfind(".")
                    if dot > 0 and name[dot + 1 :].lower() in extensions:
                        out.append(e.path)
            except OSError:
                continue
        stack.extend(reversed(subdirs))
    return out


def stat_files(paths: Iterable[str]) -> Iterator[tuple[str, os.stat_result]]:
    """(path, stat) of each path that is a regular file now: a symlink may point outside
    the workspace, and a listed file may be gone (deleted but still in git's index)."""
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            yield path, st


def iter_files(
    root: str, extensions: frozenset[str], exclude: frozenset[str] = frozenset()
) -> Iterator[tuple[str, os.stat_result]]:
    """(path, stat) of every file under `root` (or `root` itself) with one of the extensions
    (`list_files`, then `stat_files`)."""
    if os.path.isfile(root):
        yield root, os.stat(root)
        return
    yield from stat_files(list_files(root, extensions, exclude))


_IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def has_word(source: bytes, lit: bytes) -> bool:
    """Whether `lit` occurs in `source` not between two ASCII word characters.

    The token `len` never sits inside a longer identifier (that identifier would have
    swallowed it), so files where `len` only occurs inside `length` need no parse. A
    `find` loop beats a look-around regex by ~10x here: the first hit usually decides.
    """
    n = len(lit)
    end = len(source)
    i = source.find(lit)
    while i >= 0:
        if (i == 0 or source[i - 1] not in _WORD_BYTES) and (
            i + n >= end or source[i + n] not in _WORD_BYTES
        ):
            return True
        i = source.find(lit, i + 1)
    return False


def passes_prefilter(source: bytes, literals: tuple[bytes, ...]) -> bool:
    """Every literal token of the pattern occurs in the file's bytes (cheap, in C); the
    first (longest) identifier-like one as a whole word."""
    if not all(lit in source for lit in literals):
        return False
    for lit in literals:
        if _IDENT.fullmatch(lit):
            return has_word(source, lit)
    return True
