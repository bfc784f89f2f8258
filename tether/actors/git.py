"""`GitActor`: git, run under the tree (resource kind "git").

A search lists the workspace's files once, on the host, and gives each parser slot its
share (`tether.structural.ops.split_work`). In a git work tree that listing is git's (so
.gitignore applies, as the ast-grep CLI does), and git is a process: it runs here, as this
actor's watched subprocess (ProcessActor: its own process group, a parent-death signal,
killed with the actor), so it belongs to the tree like every other process tether starts
and dies with `shutdown()` and with the host. Reading the index instead would mean
re-implementing git (index versions, split and sparse indexes, every ignore source).

Key: the root directory's absolute path. Its one op, `ListFiles` (tether.messages.git_ops),
answers `FilesReply`: the relative paths, or None when the root is not in a work tree
(git missing, failed, or over GIT_TIMEOUT: the caller walks instead). One git runs at a
time per root: calls that arrive meanwhile are served together by the next run, which sees
any file written since they were sent.

git runs on the host against a directory the conversation can write, so it runs with the
repository's executable settings neutralised (`hardened_argv`: core.fsmonitor, hooks,
pagers and helpers pinned off on the command line, which outranks every config file; the
system config unread; tests/places/test_host_git.py plants them and sees nothing run).
"""

from __future__ import annotations

import os
import shutil

from tether.actors.base import ResourceUnavailable
from tether.actors.process import ProcessActor
from tether.json_types import JSONObject
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import Call
from tether.messages.git_ops import GIT, FilesReply, ListFiles, hardened_argv, hardened_env
from tether.messages.nested import plain
from tether.resources.serial import RunDeadline, SerialRuns
from tether.structural.scan import (
    GIT_IGNORED,
    GIT_LIST,
    GIT_TIMEOUT,
    git_names,
    select_listed,
)

MAX_OUTPUT = 256 << 20  # bytes of listing kept; more and the caller walks instead


class GitActor(ProcessActor):
    kind_name = "git"

    def __init__(self) -> None:
        super().__init__()
        self.runs = SerialRuns(self._run, MAX_OUTPUT)
        self.step: tuple[str, ...] = GIT_LIST
        self.timed_out = False

    def on_start(self, key: str, config: JSONObject) -> None:
        if not os.path.isabs(key) or not os.path.isdir(key):
            raise ResourceUnavailable(f"git: the key {key!r} is not an absolute directory")
        self.root = key
        self.git = shutil.which("git")

    def on_call(self, call: Call) -> None:
        match GIT.parse(call):
            case ListFiles():
                self.runs.add(call)

    def _run(self) -> None:
        if self.git is None:
            self._answer(None)
            return
        run_no = self.runs.begin()
        self.timed_out = False
        self._spawn(GIT_LIST)
        self.after(GIT_TIMEOUT, RunDeadline(run_no))

    def _spawn(self, step: tuple[str, ...]) -> None:
        assert self.git is not None
        self.step = step
        self.runs.restart_output()
        # the workspace's repository is the conversation's to write: its fsmonitor, hooks
        # and helpers must not run here (tether.messages.git_ops.HARDENED_CONFIG)
        env = hardened_env(os.environ)
        try:
            self.spawn(hardened_argv(self.git, *step), cwd=self.root, env=env)
        except OSError:
            self._answer(None)

    def on_stdout(self, data: bytes) -> None:
        if not self.runs.keep("out", data):
            self.kill_process()

    def on_timer(self, tag: RunDeadline) -> None:
        if isinstance(tag, RunDeadline) and self.runs.is_current(tag):
            self.timed_out = True
            self.kill_process()  # (its exit answers the calls)

    def on_exit(self, returncode: int | None) -> None:
        if self.timed_out or self.runs.over() or returncode != 0:
            if self.step == GIT_IGNORED and not self.timed_out and returncode == 1:
                self._answer([])  # a work tree with no files in it
            else:
                self._answer(None)  # not a work tree (or ignored by its repository)
            return
        if self.step == GIT_LIST and not self.runs.out:
            # `root` may sit in a directory the enclosing repository ignores (a Python
            # under ~/.pyenv/versions): git lists nothing there, which is not "no files"
            self._spawn(GIT_IGNORED)
            return
        self._answer(git_names(b"".join(self.runs.out)) if self.step == GIT_LIST else None)

    def _answer(self, names: list[str] | None) -> None:
        prefix = os.path.join(self.root, "")
        for call in self.runs.finish():
            if names is None:
                self.reply(call, plain(FilesReply(None)))
                continue
            op = GIT.parse(call)
            assert isinstance(op, ListFiles)
            listed = select_listed(
                self.root,
                (prefix + name for name in names),
                frozenset(op.extensions),
                frozenset(op.exclude),
            )
            self.reply(call, plain(FilesReply([path[len(prefix) :] for path in listed])))
        self.runs.next()

    def health_extra(self) -> JSONObject:
        running = bool(self.runs.running)
        return {"root": getattr(self, "root", ""), "running": running, **self.runs.health()}


KINDS: list[KindSpec] = [
    KindSpec(
        kind="git",
        actor_class="tether.actors.git:GitActor",
        scope=Scope.SHARED,
        # a crashed git actor is started afresh by the next call; one not used for ten
        # minutes goes away (its key names a workspace root: there may be many)
        child=ChildSpec(
            restart=Restart.TEMPORARY, shutdown_timeout=3.0, max_restarts=5, idle_ttl=600.0
        ),
    )
]
