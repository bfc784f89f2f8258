"""`CheckerActor`: a project's own checker for `lsp diagnostics "*"` (resource kind "checker").

basedpyright --outputjson, tsc --noEmit, cc -fsyntax-only, go vet, cargo check, dart
analyze: one run takes seconds to minutes and hundreds of MB. It runs here, as this actor's
subprocess (ProcessActor: its own process group, a parent-death signal, killed with the
actor), so it belongs to the tree like every other process: it dies with `shutdown()` and
with the host (the watchdog), and the next start reaps it by the runtime's token. What it
writes beside the project (temp files) goes to each run's own private scratch directory
(`ProcessActor.new_scratch`), removed once the run ended; build caches (`go vet`'s) go to
the runtime's shared cache, kept.

Key: "<server>:<absolute root>" as for language servers (`servers.make_key`): the row names
the checker, its argv and the parser of its output (`checkers.checker_argv`,
`checkers.parse_checker_output`). Its one op, `Check` (tether.messages.checker_ops), answers
a `CheckReply` (the records, the exit code). One check runs at a time per key: calls that
arrive meanwhile are served together by the next run (which sees their writes), and a run
whose callers all gave up is killed rather than left to burn a core.
"""

from __future__ import annotations

import os
from pathlib import Path

from tether.actors.base import ResourceUnavailable
from tether.actors.process import ProcessActor
from tether.capacity.ceiling import ResourceCeiling
from tether.json_types import JSONObject
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.lsp.checkers import (
    CHECKER_TIMEOUT,
    CheckerUnavailable,
    checker_argv,
    parse_checker_output,
)
from tether.lsp.servers import BY_NAME, split_key
from tether.messages.calls import Call, ErrorCode
from tether.messages.checker_ops import CHECKER, Check, CheckReply
from tether.messages.ops import op_args
from tether.places import PlaceError
from tether.places.registry import recall, split_place
from tether.resources.serial import CallersCheck, RunDeadline, SerialRuns

MAX_OUTPUT = 64 << 20  # bytes of output a run may print before it is stopped
GAVE_UP_CHECK = 1.0  # s between checks that a run still has a caller waiting


class CheckerActor(ProcessActor):
    kind_name = "checker"

    def __init__(self) -> None:
        super().__init__()
        self.runs = SerialRuns(self._run, MAX_OUTPUT)
        self.failure = ""  # why the current run was stopped, if it was

    def on_start(self, key: str, config: JSONObject) -> None:
        try:
            name, self.root = split_key(key)
        except ValueError as exc:
            raise ResourceUnavailable(str(exc)) from exc
        self.row = BY_NAME[name]
        try:  # the place its runs share (a suffix of the key, tether.places.registry)
            self.place = recall(split_place(key)[1])
        except PlaceError as exc:
            raise ResourceUnavailable(f"{name}: {exc}") from exc
        if self.row.checker is None:
            raise ResourceUnavailable(f"{name} has no project checker")
        try:  # a hard memory ceiling (tether.capacity.ceiling): a runaway check ends alone
            self.ceiling = ResourceCeiling(self.kind_name, config)
        except ValueError as exc:
            raise ResourceUnavailable(str(exc)) from exc

    def on_call(self, call: Call) -> None:
        match CHECKER.parse(call):
            case Check():
                self.runs.add(call)

    def _run(self) -> None:
        try:
            argv = checker_argv(self.row, self.root)
        except CheckerUnavailable as exc:
            self._settle_running(None, ErrorCode.UNAVAILABLE, str(exc))
            return
        if not argv:  # nothing to check (no source files)
            self._settle_running(CheckReply([], 0))
            return
        run_no = self.runs.begin()
        self.failure = ""
        try:
            scratch = self.new_scratch(f"{self.row.name}-checker")
            # a node checker (basedpyright's, tsc) gets the V8 heap limit of its ceiling
            heap = self.ceiling.node_options() if self.row.node_options else []
            pid = self.spawn(
                argv,
                cwd=str(self.root),
                env=scratch.env(go_offline=True, given=self.row.extra_env(os.environ, heap)),
                place=self.place,
                workspace=str(self.root),
            )
        except (OSError, PlaceError) as exc:  # (a place refuses what it cannot show)
            self._settle_running(None, ErrorCode.UNAVAILABLE, f"could not run {argv[0]}: {exc}")
            return
        host = self.place.kind == "host"
        self.ceiling.put([pid], f"check-{pid}", v8=bool(self.row.node_options), on_host=host)
        self.after(CHECKER_TIMEOUT, RunDeadline(run_no))
        self.after(GAVE_UP_CHECK, CallersCheck(run_no))

    def on_stdout(self, data: bytes) -> None:
        if not self.runs.keep("out", data):
            self._stop_run(f"printed more than {MAX_OUTPUT >> 20} MB")

    def on_stderr(self, data: bytes) -> None:
        if not self.runs.keep("err", data):
            self._stop_run(f"printed more than {MAX_OUTPUT >> 20} MB")

    def _stop_run(self, why: str) -> None:
        if not self.failure:
            self.failure = why
            self.kill_process()  # (its exit settles the calls)

    def on_timer(self, tag: RunDeadline | CallersCheck) -> None:
        match tag:
            case RunDeadline() | CallersCheck() if not self.runs.is_current(tag):
                pass  # (about an earlier run)
            case _ if not self._running():
                pass  # (its exit settles the calls)
            case RunDeadline():
                self._stop_run(f"did not finish within {CHECKER_TIMEOUT:.0f} s")
            case CallersCheck() if not self.runs.callers_left(self.open_calls()):
                self._stop_run("every caller gave up")
            case CallersCheck():
                self.after(GAVE_UP_CHECK, tag)

    def _running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def on_exit(self, returncode: int | None) -> None:
        """The run ended (the checker's exit code says what it found, not whether it ran)."""
        checker = self.row.checker
        assert checker is not None
        over = self.ceiling.note(b"".join(self.runs.err).decode("utf-8", "replace")[-4000:])
        self.ceiling.release()
        if self.failure:
            code = ErrorCode.DEADLINE if "finish" in self.failure else ErrorCode.FAILED
            self._settle_running(None, code, f"{' '.join(checker.argv)} {self.failure}")
        elif over:
            self._settle_running(None, ErrorCode.FAILED, f"{' '.join(checker.argv)}: {over}")
        else:
            out, err = b"".join(self.runs.out), b"".join(self.runs.err)
            text = _stream_text(checker.stream, out, err)
            try:
                records = parse_checker_output(checker.parser, text)
            except ValueError as exc:
                message = f"could not read the output of {' '.join(checker.argv)}: {exc}"
                self._settle_running(None, ErrorCode.FAILED, message)
            else:
                for rec in records:
                    path = Path(str(rec["path"]))  # (a str: the parsers write it)
                    rec["path"] = str(path if path.is_absolute() else (self.root / path).resolve())
                self._settle_running(CheckReply(records, returncode))
        self.runs.next()

    def _settle_running(self, reply: CheckReply | None, code: str = "", message: str = "") -> None:
        for call in self.runs.finish():
            if reply is not None:
                self.reply(call, op_args(reply))
            else:
                self.fail(call, code, message)

    def release(self) -> None:
        super().release()
        if hasattr(self, "ceiling"):
            self.ceiling.release()

    def health_extra(self) -> JSONObject:
        return {
            "root": str(getattr(self, "root", "")),
            "running": self._running(),
            "memory_ceiling": self.ceiling.how() if hasattr(self, "ceiling") else "",
            **self.runs.health(),
        }


def _stream_text(stream: str, out: bytes, err: bytes) -> str:
    text = {"stdout": out, "stderr": err, "both": out + b"\n" + err}[stream]
    return text.decode("utf-8", "replace")


KINDS: list[KindSpec] = [
    KindSpec(
        kind="checker",
        actor_class="tether.actors.checker:CheckerActor",
        scope=Scope.SHARED,
        # a crashed checker actor is started afresh by the next call; one not used for ten
        # minutes goes away (its key names a project root: there may be many)
        child=ChildSpec(
            restart=Restart.TEMPORARY, shutdown_timeout=3.0, max_restarts=5, idle_ttl=600.0
        ),
    )
]
