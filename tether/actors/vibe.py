"""`VibeWorkerActor`: one vibe worker (SPEC.md "vibe_*"), a RUN-scoped, temporary child.

The actor owns the worker's process (an agent CLI, or tether.vibe_runner for a Python
callable) through `ProcessActor`: own process group, killed with its actor. It keeps
what the host shows: status, elapsed time, the output so far (a bounded tail), the last
result, and the permission prompts the worker printed (see tether.messages.worker_ops).

Nothing here blocks: a `Wait`/`Poll` call is held open and answered when the run ends, a
prompt arrives, or its own timer fires; a `Kill` is answered once the pidfd says the
process is gone. A finished worker stays for `reap_after` seconds, then stops itself.
Temporary: a crashed worker actor is reported to the host (its calls fail), never
restarted; its process dies with it (parent-death signal, owned pids reported).

An isolated worker (`Spawn.view`) runs on its own view of the workspace
(tether.worker_views; in a sandbox place, the view is what bwrap binds as the workspace,
at the same path), made at its first run and kept across reruns (vibe_send builds on
what it did) until the host says its change was resolved (`EndView`), it is killed, or
the actor ends (`tether.worker_views.holder` holds it). Caps (`Spawn.caps`, per run):
wall-clock seconds (a timer), output chars (counted as it arrives), tool calls and tokens
(as the worker reports them, see tether.messages.worker_ops); the first one hit stops
the run, status "capped".
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass

from tether import worker_views
from tether.actors.base import ResourceUnavailable
from tether.actors.process import ProcessActor
from tether.capacity.ceiling import ResourceCeiling
from tether.json_types import JSONObject, JSONValue
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import Call, ErrorCode
from tether.messages.nested import plain
from tether.messages.worker_ops import (
    PROTOCOL_PREFIX,
    WORKER,
    Capped,
    EndView,
    Kill,
    Permit,
    Poll,
    Prepare,
    PrepareReply,
    Prompt,
    Send,
    Spawn,
    Status,
    Wait,
    WorkerSnapshot,
    WorkerStatus,
)
from tether.places import PlaceError
from tether.worker_views.holder import ViewHolder

OUTPUT_KEEP = 64 * 1024  # chars of output a worker keeps at least (the tail)
LONG_LINE = 8192  # chars of an unfinished line held back before it is shown anyway
SNAPSHOT_CHARS = 4000  # chars of output/result a snapshot carries (the host caps further)
RUNNING: tuple[WorkerStatus, ...] = ("running", "waiting")  # statuses of a live process

KINDS = [
    KindSpec(
        "vibe_worker",
        "tether.actors.vibe:VibeWorkerActor",
        Scope.RUN,
        ChildSpec(Restart.TEMPORARY, shutdown_timeout=2.0),
    )
]


# timer tags (ResourceActor.after / on_timer)
@dataclass(frozen=True)
class HeldDue:  # a held Wait/Poll has waited its time: answer it with the snapshot
    call_id: str


@dataclass(frozen=True)
class CloseStdin:  # the brief is still being written to stdin: close it once flushed
    pass


@dataclass(frozen=True)
class CapDue:  # run `run_no` has run for its wall-clock cap
    run_no: int


CAP_WORDS = {
    "seconds": "wall-clock time",
    "output_chars": "output size",
    "tool_calls": "tool calls",
    "tokens": "tokens",
}


@dataclass(frozen=True)
class Reap:  # run `run_no` ended `reap_after` s ago: stop, unless another run started
    run_no: int


class VibeWorkerActor(ProcessActor):
    def on_start(self, key: str, config: JSONObject) -> None:
        self.spec: Spawn | None = None
        self.brief = ""
        self.status: WorkerStatus = "new"
        self.run_no = 0
        self.run_started = self.run_ended = 0.0
        self.output = ""
        self.partial = ""  # an incomplete last line of stdout
        self.result = ""
        self.exit_code: int | None = None
        self.error = ""
        self.prompts: dict[int, Prompt] = {}  # pending, by sequence number
        self.prompt_seq = 0
        self.held: dict[str, tuple[Call, str]] = {}  # call id -> (call, "wait" | "poll")
        self.kills: list[Call] = []
        self.rerun = False
        self.killed = False
        self.views = ViewHolder()  # an isolated worker's view, kept across its runs
        self.output_total = 0  # chars of output this run, for its output cap
        self.reported: dict[str, int] = {}  # tool_calls / tokens, as the worker reported them
        self.capped: Capped | None = None  # the cap that stopped this run
        try:  # a hard memory ceiling per run (tether.capacity.ceiling): a runaway ends itself
            self.ceiling = ResourceCeiling("vibe_worker", config)
        except ValueError as e:
            raise ResourceUnavailable(str(e)) from e

    # --- calls -----------------------------------------------------------------------
    def on_call(self, call: Call) -> None:
        op = WORKER.parse(call)
        if isinstance(op, Prepare):
            self.reply(call, plain(PrepareReply(prepared=True, spawned=self.spec is not None)))
            if self.spec is None:
                self.make_scratch_ahead("vibe")
            return
        if self.spec is None and not isinstance(op, Spawn):
            self.fail(call, ErrorCode.UNAVAILABLE, f"{self.key}: no such worker (gone)")
            self.stop("normal", "asked about a worker it never ran")
            return
        match op:
            case Spawn():
                self._spawn(call, op)
            case Send(message=message):
                self._send(call, message)
            case Status():
                self.reply(call, plain(self.snapshot()))
            case Wait(seconds=seconds):
                self._hold(call, "wait", seconds, ready=self.status not in RUNNING)
            case Poll(since=since, seconds=seconds):
                ready = self.status not in RUNNING or any(s > since for s in self.prompts)
                self._hold(call, "poll", seconds, ready=ready)
            case Permit(prompt=seq, allow=allow, reason=reason):
                self._permit(call, seq, allow, reason)
            case Kill():
                self._kill(call)
            case EndView():
                self._end_view(call)

    def _spawn(self, call: Call, spec: Spawn) -> None:
        if self.spec is not None:
            self.fail(call, ErrorCode.BAD_REQUEST, f"worker {self.key} was spawned already")
            return
        self.spec, self.brief = spec, spec.brief
        self._start_run()
        self.reply(call, plain(self.snapshot()))

    def _send(self, call: Call, message: str) -> None:
        self.brief = f"{self.brief}\n\n{message}"
        if self.status in RUNNING:
            self.rerun = True  # the exit of this run starts the next (on_exit)
            self._kill_process_tree()
            reply = dataclasses.replace(self.snapshot(), run=self.run_no + 1)
            self.reply(call, plain(reply.sent(stopped_previous=True)))
            return
        self._start_run()
        self.reply(call, plain(self.snapshot().sent(stopped_previous=False)))

    def _hold(self, call: Call, what: str, seconds: float, ready: bool) -> None:
        if ready:
            self.reply(call, plain(self.snapshot()))
            return
        self.held[call.call_id] = (call, what)
        self.after(max(float(seconds), 0.0), HeldDue(call.call_id))

    def _permit(self, call: Call, seq: int, allow: bool, reason: str) -> None:
        prompt = self.prompts.pop(seq, None)
        if prompt is None:
            self.reply(call, plain(self.snapshot().permitted(delivered=False)))
            return
        self._answer_prompt(prompt, allow, reason)
        self.reply(call, plain(self.snapshot().permitted(delivered=True)))

    def _end_view(self, call: Call) -> None:
        if self.status in RUNNING:
            self.fail(call, ErrorCode.BAD_REQUEST, f"worker {self.key} runs on its view now")
            return
        self.views.remove()
        self.reply(call, plain(self.snapshot()))

    def _kill(self, call: Call) -> None:
        self.rerun = False
        if self.status not in RUNNING:
            self.views.remove()
            self.reply(call, plain(self.snapshot().killed(was=self.status)))
            return
        self.killed = True
        self.kills.append(call)
        self._kill_process_tree()

    # --- the process -----------------------------------------------------------------
    def _start_run(self) -> None:
        spec = self.spec
        assert spec is not None
        argv = [*spec.argv, self.brief] if spec.brief_mode == "arg" else list(spec.argv)
        self.run_no += 1
        self.output, self.partial, self.result, self.error = "", "", "", ""
        self.exit_code, self.killed = None, False
        self.output_total, self.reported, self.capped = 0, {}, None
        self.views.unchanged = False
        self.prompts.clear()
        self.run_started, self.run_ended = time.monotonic(), 0.0
        try:
            argv = self.views.run_argv(spec, argv)
            # its own TMPDIR, removed once this run of it ended
            env = {
                **self.new_scratch("vibe").env(given=spec.env),
                "TETHER_WORKER_ID": spec.worker_id,
            }
            pid = self.spawn(argv, cwd=spec.cwd, env=env, **self.views.where(spec))
        except (OSError, worker_views.ViewError, PlaceError) as exc:
            self._finish("failed", None, f"cannot start {argv[0]!r}: {exc}")
            return
        # at once, so what it starts inherits the rlimit or is born in the cgroup
        host = not spec.place or spec.place.get("kind") == "host"
        self.ceiling.put([pid], f"vibe-{pid}", on_host=host)
        self.status = "running"
        if spec.caps.get("seconds"):
            self.after(float(spec.caps["seconds"]), CapDue(self.run_no))
        if spec.brief_mode == "stdin":
            self.write(self.brief.encode())
            self._close_stdin_when_flushed()

    def _check_cap(self, name: str, used: float) -> None:
        assert self.spec is not None
        limit = self.spec.caps.get(name)
        if not limit or used < limit or self.capped is not None or self.status not in RUNNING:
            return
        self.capped = Capped(name, limit, used)
        self._add_output(f"[tether] stopped: it reached its {CAP_WORDS[name]} cap ({limit:g})\n")
        self._kill_process_tree()

    def _close_stdin_when_flushed(self) -> None:
        if self._stdin is None or self.proc is None or self.proc.stdin is None:
            return
        if self._stdin.flush():
            self._stdin.close()
            self.proc.stdin.close()
        else:
            self.after(0.01, CloseStdin())

    def _kill_process_tree(self) -> None:
        if self.owned is not None:
            self.owned.kill()  # (its exit, seen through the pidfd, settles the worker)

    def on_stdout(self, data: bytes) -> None:
        text = self.partial + data.decode("utf-8", "replace")
        *lines, self.partial = text.split("\n")
        plain: list[str] = []
        for line in lines:
            if line.startswith(PROTOCOL_PREFIX):
                self._add_output("".join(plain))
                plain = []
                self._protocol(line[len(PROTOCOL_PREFIX) :])
            else:
                plain.append(line + "\n")
        if len(self.partial) > LONG_LINE:  # a line that never ends (a progress bar): show it
            plain.append(self.partial)
            self.partial = ""
        self._add_output("".join(plain))

    def _add_output(self, text: str) -> None:
        # trimmed in steps, not per line: a chatty worker must not cost a copy per line
        self.output += text
        self.output_total += len(text)
        if len(self.output) > 2 * OUTPUT_KEEP:
            self.output = self.output[-OUTPUT_KEEP:]
        if text and self.spec is not None:
            self._check_cap("output_chars", self.output_total)

    def _protocol(self, payload: str) -> None:
        try:
            message = json.loads(payload)
            if "usage" in message:
                self._usage(message["usage"])
                return
            ask = message["permission"]
            arguments = ask.get("arguments", {})
            if not isinstance(arguments, dict):
                raise TypeError(f"a prompt's arguments must be an object, not {arguments!r:.60}")
            prompt = Prompt(
                seq=self.prompt_seq + 1,
                id=ask.get("id", 0),
                tool=str(ask["tool"]),
                tier=str(ask.get("tier", "")),
                arguments=arguments,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._add_output(f"[tether] unreadable protocol line ({exc!r}): {payload[:200]}\n")
            return
        self.prompt_seq += 1
        if self.spec is not None and self.spec.brief_mode == "stdin":
            self._answer_prompt(
                prompt, False, "this worker reads its brief from stdin, so it cannot get answers"
            )
            return
        self.prompts[self.prompt_seq] = prompt
        self.status = "waiting"
        self._settle_held("poll")

    def _usage(self, reported: JSONValue) -> None:
        """A usage line's counts (a malformed one: TypeError or ValueError, the line is
        shown as unreadable)."""
        if not isinstance(reported, dict):
            return
        for name in ("tool_calls", "tokens"):
            if name in reported:
                value = reported[name]
                if not isinstance(value, str | int | float):
                    raise TypeError(f"usage {name} must be a number, not {value!r:.40}")
                self.reported[name] = int(value)
                self._check_cap(name, self.reported[name])

    def _answer_prompt(self, prompt: Prompt, allow: bool, reason: str) -> None:
        verdict = "allowed" if allow else "denied"
        self._add_output(f"[tether] permission for {prompt.tool} {verdict}: {reason}\n")
        if self._stdin is not None and not self._stdin.broken:
            line = {"permission": prompt.id, "allow": allow, "reason": reason}
            self.write((json.dumps(line) + "\n").encode())
        if not self.prompts and self.status == "waiting":
            self.status = "running"

    def on_exit(self, returncode: int | None) -> None:
        if self.partial and not self.partial.startswith(PROTOCOL_PREFIX):
            self._add_output(self.partial)
        self.partial = ""
        if self.rerun:
            self.rerun = False
            self._add_output("[tether] stopped to rerun with the new message\n")
            self._start_run()
            return
        if self.killed:
            self.views.remove()  # a killed worker's change is dropped with its view
            self._finish("killed", returncode, "killed by vibe_kill")
        elif self.capped is not None:
            c = self.capped
            used = f"{c.used:.1f} s" if c.cap == "seconds" else f"{c.used:g}"
            why = f"stopped at its {CAP_WORDS[c.cap]} cap ({c.limit:g}; used {used})"
            self._finish("capped", returncode, why)
        elif returncode == 0:
            self._finish("done", returncode, "")
        else:
            why = self.exit_message(returncode)
            over = self.ceiling.note(f"{self.stderr_tail()}\n{self.output[-2000:]}")
            self._finish("failed", returncode, f"{why}; {over}" if over else why)

    def _finish(self, status: WorkerStatus, returncode: int | None, error: str) -> None:
        self.status, self.exit_code, self.error = status, returncode, error
        view = self.views.run_ended()
        self.run_ended = time.monotonic()
        self.result = self.output[-OUTPUT_KEEP:]
        self.prompts.clear()
        for call in self.kills:
            self.reply(call, plain(self.snapshot().killed(was="running")))
        self.kills = []
        self._settle_held("wait", "poll")
        self.views.settle(view)  # once the calls waiting for the end have their answer
        assert self.spec is not None
        self.after(self.spec.reap_after, Reap(self.run_no))

    def _settle_held(self, *kinds: str) -> None:
        for call_id, (call, what) in list(self.held.items()):
            if what in kinds:
                del self.held[call_id]
                self.reply(call, plain(self.snapshot()))

    def on_timer(self, tag: HeldDue | CloseStdin | CapDue | Reap) -> None:
        match tag:
            case HeldDue(call_id=call_id):
                entry = self.held.pop(call_id, None)
                if entry is not None:
                    self.reply(entry[0], plain(self.snapshot()))
            case CloseStdin():
                self._close_stdin_when_flushed()
            case CapDue(run_no=run_no) if run_no == self.run_no:
                limit = float(self.spec.caps["seconds"]) if self.spec else 0.0
                self._check_cap("seconds", max(time.monotonic() - self.run_started, limit))
            case Reap(run_no=run_no) if run_no == self.run_no and self.status not in RUNNING:
                reap_after = self.spec.reap_after if self.spec else 0
                self.stop("normal", f"reaped {reap_after:g} s after it ended")

    # --- what the host sees ----------------------------------------------------------
    def snapshot(self) -> WorkerSnapshot:
        spec = self.spec
        end = self.run_ended or time.monotonic()
        shown = self.output + ("" if self.partial.startswith(PROTOCOL_PREFIX) else self.partial)
        return WorkerSnapshot(
            worker_id=self.key,
            label=spec.label if spec else "",
            tier=spec.tier if spec else "",
            status=self.status,
            run=self.run_no,
            elapsed=round(end - self.run_started, 3) if self.run_started else 0.0,
            output=shown[-SNAPSHOT_CHARS:],
            output_chars=len(shown),
            result=self.result[-SNAPSHOT_CHARS:],
            exit_code=self.exit_code,
            error=self.error,
            prompts=sorted(self.prompts.values(), key=lambda p: p.seq),
            pid=self.proc.pid if self.proc is not None and self.status in RUNNING else None,
            view=self.views.view,
            view_unchanged=self.views.unchanged,
            caps=dict(spec.caps) if spec else {},
            usage={"output_chars": self.output_total, **self.reported},
            capped=self.capped,
        )

    def release(self) -> None:
        super().release()
        self.views.remove()  # (the actor ends: reaped, killed with its run, or crashed)
        if hasattr(self, "ceiling"):
            self.ceiling.release()

    def health_extra(self) -> JSONObject:
        return {
            "worker": {k: v for k, v in plain(self.snapshot()).items() if k != "output"},
            "memory_ceiling": self.ceiling.how() if hasattr(self, "ceiling") else "",
        }
