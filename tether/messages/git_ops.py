"""The ops of the git actor (kind "git", `tether.actors.git`): git, run under the tree.

Key: the absolute path of a directory (a workspace root). One op, `ListFiles`, answers
{"files": [...]} (paths relative to the root, as `git ls-files` shows the work tree:
tracked files and untracked ones not ignored, with one of `extensions`, outside hidden and
`exclude`d directories) or {"files": None} when the root is not in a git work tree (or git
is missing, or did not answer in time): the caller walks the directory instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tether.messages.ops import Vocabulary

GIT = Vocabulary("git")


@GIT.op
@dataclass(frozen=True)
class ListFiles:
    """The work tree's files with one of `extensions` (no dot, lower case)."""

    extensions: list[str]
    exclude: list[str] = field(default_factory=list)
