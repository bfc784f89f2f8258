"""The ops of the git actor (kind "git", `tether.actors.git`): git, run under the tree.

Key: the absolute path of a directory (a workspace root). One op, `ListFiles`, answers
`FilesReply`: the paths relative to the root, as `git ls-files` shows the work tree
(tracked files and untracked ones not ignored, with one of `extensions`, outside hidden and
`exclude`d directories), or None when the root is not in a git work tree (or git is
missing, or did not answer in time): the caller walks the directory instead. On the wire
the reply is flat (`{"files": ...}`); the host reads it back checked (`read_files_reply`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from tether.messages.ops import Records, Vocabulary

GIT = Vocabulary("git", idempotent=False)
REPLIES = Records("git reply")  # checks a reply as it comes off the wire

# How git runs against a workspace from the host: a conversation can write its repository's
# .git/config, and git reads it. What in there would run a command for `ls-files
# --others` or `check-ignore`: core.fsmonitor (a hook git runs to learn what changed:
# measured, a planted one ran on the host at the next ast_grep), hooks, and for other
# commands pagers, filters, ssh/askpass helpers and the like. Command-line settings win
# over every config file (the repository's, its includes, the user's), so each is pinned
# here; the system config is not read at all. Nothing is written either (no locks, no
# untracked cache, no gc). Fields every git run of the host uses: `hardened_argv`.
HARDENED_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.sshCommand=false",
    "core.askPass=",
    "credential.helper=",
    "core.editor=false",
    "sequence.editor=false",
    "diff.external=",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "submodule.recurse=false",
)
HARDENED_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_OPTIONAL_LOCKS": "0",  # a listing writes nothing, not even .git/index
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_ASKPASS": "",
    "GIT_EXTERNAL_DIFF": "",
}
# variables a caller's environment may carry that would point git elsewhere or run things
UNSAFE_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_PROXY_COMMAND",
    "GIT_CONFIG_COUNT",
    "GIT_EXEC_PATH",
)


def hardened_argv(git: str, *args: str) -> list[str]:
    """`git args...` with the workspace's executable settings neutralised."""
    pinned = [part for setting in HARDENED_CONFIG for part in ("-c", setting)]
    return [git, "--no-pager", *pinned, *args]


def hardened_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a host-side git: nothing that redirects it, and HARDENED_ENV."""
    out = {k: v for k, v in env.items() if k not in UNSAFE_ENV and not k.startswith("GIT_CONFIG_")}
    out.update(HARDENED_ENV)
    return out


@REPLIES.op
@dataclass(frozen=True)
class FilesReply:
    """The work tree's files (relative to the root), or None: walk the directory."""

    files: list[str] | None


def read_files_reply(payload: Mapping[str, object]) -> FilesReply:
    """The `Reply` payload back as a FilesReply (OpError if `files` is missing or mistyped)."""
    reply: FilesReply = REPLIES.build(FilesReply, payload)
    return reply


@GIT.op
@dataclass(frozen=True)
class ListFiles:
    """The work tree's files with one of `extensions` (no dot, lower case)."""

    extensions: list[str]
    exclude: list[str] = field(default_factory=list)
    reply: ClassVar[type[FilesReply]] = FilesReply
