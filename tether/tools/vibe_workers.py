"""The host side of vibe workers: one run's worker table (its configuration, backends per
tier and caps, is tether.tools.vibe_config, re-exported here).

Each worker is a `vibe_worker` actor of the run (tether.actors.vibe), reached through the
run's runtime (what the table needs of both: tether.tools.vibe_port). `VibeWorkers` keeps,
per run, which workers exist and a watcher thread per running worker: it long-polls the
actor (`Poll`, answered when a permission prompt arrives or the run ends) and answers the
worker's permission prompts through the run's own gate (tether.tools.registry.permission:
the run's approval policy, a permission card through its question port, fail closed when
nobody can approve; every decision is written into the worker's output).

An isolated worker runs on its own copy-on-write view of the workspace
(tether.worker_views; which view: tether.tools.vibe_isolation); when a run of it ends,
its change is staged for `resolve` (tether.tools.vibe_changes). Caps (`Caps`, per tier
in `VibeConfig.caps`, lowered per spawn) stop a run that goes on too long, prints too
much, or reports too many tool calls or tokens.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tether import worker_views
from tether.json_types import JSONValue
from tether.messages.calls import ErrorCode, ResourceError
from tether.messages.worker_ops import (
    EndView,
    Kill,
    KillReply,
    Permit,
    PermitReply,
    Poll,
    Prepare,
    PrepareReply,
    Prompt,
    R,
    Send,
    SendReply,
    Spawn,
    Status,
    Wait,
    WorkerSnapshot,
    WorkerStatus,
    read_reply,
)
from tether.tools import vibe_changes
from tether.tools.registry import permission
from tether.tools.spec import Tier, ToolContext
from tether.tools.vibe_changes import StagedChange
from tether.tools.vibe_config import (
    DEFAULT_CAPS,
    TIERS,
    Backend,
    CallableBackend,
    Caps,
    CommandBackend,
    VibeConfig,
    VibeError,
)
from tether.tools.vibe_isolation import run_place, view_kind
from tether.tools.vibe_port import RunHolder, WorkerOp, WorkerRun, WorkerRuntime

__all__ = [
    "TIERS",
    "Backend",
    "CallableBackend",
    "Caps",
    "CommandBackend",
    "VibeConfig",
    "VibeError",
    "VibeWorkers",
    "Worker",
    "workers_of",
]

KIND = "vibe_worker"
LIVE: tuple[WorkerStatus, ...] = ("new", "running", "waiting")
# runs whose change (if isolated) is staged
ENDED_WITH_CHANGE: tuple[WorkerStatus, ...] = ("done", "failed", "capped")
POLL_SECONDS = 2.0  # how long one watcher Poll may stay open on the actor
CALL_SLACK = 5.0  # s a held call's engine deadline exceeds its own wait
CALL_TIMEOUT = 10.0
PREPARE_TIMEOUT = 2.0
PREPARER_IDLE_CHECK = 1.0  # s between the idle preparer's checks that its runtime still runs


# the worker tables of each runtime, for the per-runtime cap
_TABLES: weakref.WeakKeyDictionary[WorkerRuntime, weakref.WeakSet[VibeWorkers]] = (
    weakref.WeakKeyDictionary()
)
_TABLES_LOCK = threading.Lock()
_MAKING = threading.Lock()  # one run's table is made once, whoever asks first


@dataclass
class Worker:
    worker_id: str
    label: str
    tier: str
    snapshot: WorkerSnapshot  # its actor's last answer
    watching: bool = False
    gone: str = ""  # why the actor is gone (crashed, reaped); "" while it is there
    ended_at: float = 0.0  # host clock: when the watcher saw the run end
    isolated: bool = False
    change: StagedChange | None = None  # the change of its last run (isolated only)
    settling: threading.Lock = field(default_factory=threading.Lock)

    @property
    def status(self) -> WorkerStatus | Literal["crashed"]:
        return "crashed" if self.gone.startswith("crashed") else self.snapshot.status


class VibeWorkers:
    """One run's vibe workers (kept in `run.state["vibe"]`)."""

    def __init__(self, run: WorkerRun, runtime: WorkerRuntime, config: VibeConfig):
        self.run = run
        self.runtime = runtime  # (the run's: a run with workers has one)
        self.config = config
        self._lock = threading.RLock()  # (the caps check lists workers under it)
        self._workers: dict[str, Worker] = {}
        self._next = 1  # the number of the next worker id
        self._closed = False
        self._prepare_wanted = threading.Event()
        with _TABLES_LOCK:
            _TABLES.setdefault(runtime, weakref.WeakSet()).add(self)
        run.on_close(self.close)
        self._prepare_wanted.set()
        # the overlay probe (~10 ms, once per process) is made here, not in a spawn
        self._probe = config.isolated is not False
        name = f"tether-vibe-prepare-{run.run_id}"
        self._preparer = threading.Thread(target=self._preparer_loop, name=name, daemon=True)
        self._preparer.start()

    # --- the five tools --------------------------------------------------------------
    def spawn(
        self,
        brief: str,
        label: str,
        tier: str,
        isolated: bool | None = None,
        caps: Mapping[str, JSONValue] | None = None,
    ) -> Worker:
        backend = self.config.backends.get(tier)
        if backend is None:
            have = ", ".join(sorted(self.config.backends)) or "none"
            raise VibeError(
                f"no worker backend is configured for tier {tier!r} on this run (configured: "
                f"{have}); use another tier"
            )
        argv, mode, env = backend.command()
        limits = self.config.caps.get(tier, DEFAULT_CAPS).lowered(caps or {}, tier).limits()
        view = view_kind(self.run, isolated, self.config.isolated, self.runtime)
        with self._lock:
            self._check_caps()
            worker_id = f"w{self._next}"
            self._next += 1
            op = Spawn(
                worker_id,
                label,
                tier,
                brief,
                argv,
                mode,
                str(self.run.workdir),
                {**env, **self._env()},
                float(self.config.reap_after),
                view,
                limits,
                run_place(self.run),
            )
            worker = Worker(
                worker_id,
                label,
                tier,
                WorkerSnapshot.new(worker_id, label, tier),
                isolated=bool(view),
            )
            self._workers[worker_id] = worker
        try:
            worker.snapshot = self._call(worker_id, op, WorkerSnapshot)
        except ResourceError:
            with self._lock:
                del self._workers[worker_id]
            raise
        self._watch(worker)
        self._prepare_wanted.set()
        return worker

    def send(self, worker_id: str, message: str) -> tuple[Worker, bool]:
        worker = self.get(worker_id)
        if worker.gone:
            raise VibeError(f"worker {worker_id} is {worker.gone}; spawn a new one with vibe_spawn")
        if worker.status not in LIVE:
            with self._lock:
                self._check_caps()
        vibe_changes.supersede(self.run.state, worker.change)
        reply = self._call(worker_id, Send(message), SendReply)
        worker.snapshot, worker.ended_at = reply, 0.0
        self._watch(worker)
        return worker, reply.stopped_previous

    def wait(self, worker_id: str, seconds: float) -> tuple[Worker, bool]:
        worker = self.get(worker_id)
        if worker.gone or worker.status not in LIVE:
            return worker, True
        try:
            worker.snapshot = self._call(
                worker_id, Wait(seconds), WorkerSnapshot, seconds + CALL_SLACK
            )
        except ResourceError as exc:
            if exc.code == ErrorCode.DEADLINE:
                raise
            self._lost(worker, exc)  # its actor died under the wait: say so, not "call again"
            self._ended(worker)
            return worker, True
        self._settle(worker)
        return worker, worker.status not in LIVE

    def kill(self, worker_id: str) -> tuple[Worker, str]:
        """Kill the worker's process tree; returns it and what it was ("running" if killed now)."""
        worker = self.get(worker_id)
        if worker.gone:
            return worker, worker.status
        reply = self._call(worker_id, Kill(), KillReply)
        worker.snapshot = reply
        self._ended(worker)
        return worker, reply.was

    def refresh(self) -> list[Worker]:
        """Every worker not reaped, refreshed from its actor."""
        self._drop_reaped()
        workers = self.workers()
        fresh = [w for w in workers if not w.gone]
        answers = self.runtime.gather(
            self.run.run_id, [(KIND, w.worker_id, Status(), None) for w in fresh], CALL_TIMEOUT
        )
        for worker, answer in zip(fresh, answers, strict=True):
            if isinstance(answer, ResourceError):
                self._lost(worker, answer)
            else:
                worker.snapshot = read_reply(WorkerSnapshot, answer)
                self._settle(worker)
        self._drop_reaped()
        return self.workers()

    # --- the table -------------------------------------------------------------------
    def workers(self) -> list[Worker]:
        with self._lock:
            return list(self._workers.values())

    def get(self, worker_id: str) -> Worker:
        self._drop_reaped()
        with self._lock:
            worker = self._workers.get(worker_id)
            known = ", ".join(self._workers) or "none"
        if worker is None:
            raise VibeError(
                f"no worker {worker_id!r} on this run (workers: {known}); finished workers are "
                f"reaped {self.config.reap_after:g} s after they end"
            )
        return worker

    def live_ids(self) -> list[str]:
        if self._closed:  # the run's actors, and so its workers, are gone
            return []
        return [w.worker_id for w in self.workers() if not w.gone and w.status in LIVE]

    def close(self) -> None:
        """The run is closing: no call from here on (a call to a closed run's actor would
        open the run again), and none left in flight but the watchers' (they end when the
        run's actors do)."""
        self._closed = True
        self._prepare_wanted.set()
        if self._preparer is not threading.current_thread():
            self._preparer.join(PREPARE_TIMEOUT)

    def _check_caps(self) -> None:
        live = len(self.live_ids())
        if live >= self.config.max_per_run:
            raise VibeError(
                f"this run already has {live} running workers (cap {self.config.max_per_run}); "
                "wait for one with vibe_wait or stop one with vibe_kill, then spawn again"
            )
        with _TABLES_LOCK:
            tables = list(_TABLES.get(self.runtime, ()))
        total = sum(len(t.live_ids()) for t in tables)
        if total >= self.config.max_per_runtime:
            raise VibeError(
                f"the runtime already runs {total} workers across its runs (cap "
                f"{self.config.max_per_runtime}); wait for one to finish, then spawn again"
            )

    def _settle(self, worker: Worker) -> None:
        """Stage the change of an isolated worker's run that ended (once per run)."""
        snap = worker.snapshot
        if not worker.isolated or snap.status not in ENDED_WITH_CHANGE:
            return
        run_no, view = snap.run, snap.view
        with worker.settling:
            if worker.change is not None and worker.change.run == run_no:
                return
            if view is None:  # its actor removed it: unchanged (else killed: no change)
                if snap.view_unchanged:
                    worker.change = StagedChange(run_no)
                return
            worker.change = vibe_changes.stage(
                self.run.state,
                worker.worker_id,
                worker.label,
                run_no,
                view,
                lambda _edit: self._end_view_soon(worker),
            )
            if worker.change.edit is None:  # nothing to resolve: the view can go now
                self._end_view_soon(worker)

    def _end_view_soon(self, worker: Worker) -> None:
        """Have the actor remove the worker's view, without waiting for it: resolve (under
        the run's staging lock) does not wait on a round trip and a directory removal."""
        name = f"tether-vibe-endview-{self.run.run_id}-{worker.worker_id}"
        threading.Thread(target=self._end_view, args=(worker,), name=name, daemon=True).start()

    def _end_view(self, worker: Worker) -> None:
        reaped = worker.ended_at and time.monotonic() - worker.ended_at >= self.config.reap_after
        if self._closed or worker.gone or reaped:
            return  # (its actor, and the view with it, is gone: no call to make it anew)
        with contextlib.suppress(ResourceError, VibeError):
            worker.snapshot = self._call(worker.worker_id, EndView(), WorkerSnapshot)

    def _env(self) -> dict[str, str]:
        import json

        policy = self.run.policy
        decided = {t.value: d.value for t, d in policy.items()} if policy else {}
        return {"TETHER_APPROVAL": json.dumps(decided), "TETHER_RUN_ID": self.run.run_id}

    def _call(
        self, worker_id: str, op: WorkerOp, expect: type[R], timeout: float = CALL_TIMEOUT
    ) -> R:
        """Ask the worker's actor; its reply read back as `expect` (the op's declared one)."""
        if self._closed:
            raise VibeError("this run is closed; its workers are gone")
        payload = self.runtime.call(self.run.run_id, KIND, worker_id, op, None, timeout)
        return read_reply(expect, payload)

    def _lost(self, worker: Worker, error: ResourceError) -> None:
        if worker.gone:
            return
        if worker.status in LIVE:
            worker.gone = f"crashed: its actor died ({error.message})"
        else:
            worker.gone = "reaped"
        # an actor killed outright left its view (its mount died with its namespace): the
        # next view made would reap it, but nothing is to stay on disk till then
        worker_views.remove(worker.snapshot.view)

    def _ended(self, worker: Worker) -> None:
        if worker.status not in LIVE and not worker.ended_at:
            worker.ended_at = time.monotonic()

    def _drop_reaped(self) -> None:
        now = time.monotonic()
        with self._lock:
            for worker_id, w in list(self._workers.items()):
                reaped = w.gone == "reaped" or (
                    w.ended_at and not w.gone and now - w.ended_at >= self.config.reap_after
                )
                if reaped:
                    del self._workers[worker_id]

    def _preparer_loop(self) -> None:
        """Start the next worker's actor ahead of its vibe_spawn, each time one was taken:
        making an actor process costs ~15-25 ms, which vibe_spawn would otherwise add. One
        thread for the table's life (starting one per spawn cost ~2 ms of the spawn)."""
        if self._probe:
            with contextlib.suppress(Exception):  # (a spawn would probe, and say why)
                worker_views.overlay_mode(self.runtime.state_dir)
        while not self._closed and not self.runtime.closed:
            if not self._prepare_wanted.wait(PREPARER_IDLE_CHECK):
                continue
            self._prepare_wanted.clear()
            if self._closed:
                return
            with contextlib.suppress(Exception):  # a failure here only costs that time later
                self._call(f"w{self._next}", Prepare(), PrepareReply, PREPARE_TIMEOUT)

    # --- the watcher: permission prompts and the end of a run ------------------------
    def _watch(self, worker: Worker) -> None:
        with self._lock:
            if worker.watching:
                return
            worker.watching = True
        name = f"tether-vibe-{self.run.run_id}-{worker.worker_id}"
        threading.Thread(target=self._watcher, args=(worker,), name=name, daemon=True).start()

    def _watcher(self, worker: Worker) -> None:
        since = 0
        try:
            while not self._closed and not worker.gone:
                try:
                    snap = self._call(
                        worker.worker_id,
                        Poll(since, POLL_SECONDS),
                        WorkerSnapshot,
                        POLL_SECONDS + CALL_SLACK,
                    )
                except ResourceError as exc:
                    if exc.code != ErrorCode.DEADLINE and not self._closed:
                        self._lost(worker, exc)
                        self._ended(worker)
                        return
                    continue
                worker.snapshot = snap
                for prompt in snap.prompts:
                    since = max(since, prompt.seq)
                    self._answer(worker, prompt)
                if worker.status not in LIVE:
                    self._ended(worker)
                    self._settle(worker)
                    return
        except Exception:  # noqa: BLE001 - the runtime went away under us: nothing to watch
            return
        finally:
            with self._lock:
                worker.watching = False

    def _answer(self, worker: Worker, prompt: Prompt) -> None:
        tier = _tier_of(self.run, prompt.tool, prompt.tier)
        asker = f"worker {worker.worker_id} ({worker.label})"
        verdict = permission(self.run, prompt.tool, tier, prompt.arguments, asker)
        reason = verdict.how or verdict.refused
        with_who = f"{reason} [{tier.value} tier]"
        worker.snapshot = self._call(
            worker.worker_id, Permit(prompt.seq, verdict.allowed, with_who), PermitReply
        )


def _tier_of(run: WorkerRun, tool: str, declared: str) -> Tier:
    """The tier a worker's tool counts as: as declared, else as the registry has it, else
    exec (the strictest: an unknown tool is gated like starting a process)."""
    try:
        return Tier(declared)
    except ValueError:
        pass
    spec = run.registry.get(tool)
    return spec.tier if spec is not None else Tier.EXEC


def workers_of(ctx: ToolContext) -> VibeWorkers:
    """The run's worker table, made on first use; VibeError when vibe cannot run here."""
    if not isinstance(ctx, RunHolder):
        raise VibeError("vibe workers need a run's tool context (tether.run.RunContext)")
    run = ctx.run
    table = run.state.get("vibe")
    if table is not None:
        return table
    if run.runtime is None or KIND not in run.runtime.connected_kinds():
        raise VibeError(
            "vibe workers need a runtime with the vibe_worker kind; open the run with "
            "Runtime.open_run(..., vibe=True)"
        )
    config = run.vibe_config
    if config is None:
        raise VibeError(
            "vibe mode is on but no worker backend is configured; the host opens the run with "
            "vibe_config=VibeConfig(backends={'fast': CommandBackend([...])})"
        )
    with _MAKING:
        table = run.state.get("vibe")
        if table is None:
            table = run.state["vibe"] = VibeWorkers(run, run.runtime, config)
    return table
