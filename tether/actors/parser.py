"""`ParserActor`: one slot of the tree-sitter parser pool (resource kind "parser").

The pool is a few actor processes (parsing holds the GIL, so threads would not help),
each with its own parse cache. The tool handler fans a search out to every slot with a
shard index; files are assigned by a stable hash of their path, so a file always lands
in the same slot and hits that slot's cache on the next search, by any run.

ops: `PARSER` (`tether.messages.parser_ops`): search, edit, stats, clear (run by
`tether.structural.ops`), index (parse a workspace in the background, a chunk per timer
tick, so searches interleave) and unindex (a run closed: drop what is still queued for
it). A bad pattern or language is a `bad_request` with the compiler's message.

Searches and edits are jobs (generators that yield between candidate nodes), run a slice
at a time, so one run's pathological search does not hold up another run's trivial one:

- Fair per run, not per job: the queue is one line of jobs per run, and the runs take
  turns (a slice of the first job of each), so a run with many searches in flight gets
  the same share as a run with one. A new call runs its first slice at once when its run
  has nothing queued here (a small search is answered right there); otherwise it queues
  behind its own run's jobs.
- Slices end on time even inside one candidate: a job's generator can only yield between
  candidates, and one candidate can take tens of milliseconds of matching (hundreds on a
  loaded machine). So the budget's periodic check (every few thousand matcher steps) calls
  `_preempt`: once the slice is used up, the slot takes the calls waiting on its call
  channel (their first slice runs there) and runs a slice of every other run's next job,
  then resumes. One level deep: work run from there is not preempted again.

A job ends with its reply, with a budget error naming what to narrow
(`tether.structural.budget`), or silently when its caller has gone (the call was swept
past its deadline): the slot is never left busy.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from tether.actors.base import ResourceActor
from tether.json_types import JSONObject
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import Call, ErrorCode
from tether.messages.nested import plain
from tether.messages.parser_ops import (
    PARSER,
    Clear,
    DroppedReply,
    Edit,
    EditReply,
    Index,
    IndexReply,
    JobProgress,
    ParserReply,
    Search,
    SearchReply,
    Stats,
    StatsReply,
    Unindex,
)
from tether.structural.budget import Budget, BudgetExceeded
from tether.structural.cache import DEFAULT_MAX_BYTES, ParseCache
from tether.structural.languages import LanguageError
from tether.structural.ops import (
    Job,
    budget_of,
    edit_job,
    index_some,
    op_clear,
    plan_index,
    search_job,
)
from tether.structural.pattern import PatternError
from tether.structural.rewrite import RewriteError

INDEX_CHUNK = 16  # files parsed per timer tick while indexing (calls interleave)
# Settled jobs kept for Stats: a slot whose share finished between two progress probes
# still counts in its call's "files searched" (the probe keeps the ones since its call).
FINISHED_KEPT = 64
SLICE = 0.02  # seconds a job runs before the actor reads its mailbox and the next job runs
# Delay of the next slice's timer. Not 0: thespian delivers an already expired wakeup
# without polling its sockets and watched channels, so new calls would wait for every job.
TICK = 0.002


@dataclass(frozen=True)
class IndexTick:
    """Timer tag: parse the next chunk of the index queue."""


@dataclass(frozen=True)
class WorkTick:
    """Timer tag: run a slice of the next search or edit job."""


@dataclass(eq=False)
class _Running:
    call: Call
    steps: Job
    budget: Budget
    stats: dict[str, int]  # the job's own counters, filled as it goes (ops.search_job)
    planned: int | None  # files of its share, when the host listed them (else unknown)
    started: float = field(default_factory=time.monotonic)
    slice_ends: float = 0.0
    done: bool = False

    @property
    def run(self) -> str:
        return self.call.run_id

    def searched(self) -> JobProgress:
        """How far it got: files scanned of how many (None: the slot lists them itself);
        `started` is time.monotonic(), one clock for every process of the machine."""
        return JobProgress(self.stats.get("files", 0), self.planned, self.started, self.done)


class ParserActor(ResourceActor):
    def on_start(self, key: str, config: JSONObject) -> None:
        cache_bytes = config.get("cache_bytes", DEFAULT_MAX_BYTES)
        if not isinstance(cache_bytes, int | float | str):
            raise TypeError(f"parser: cache_bytes must be a number, not {cache_bytes!r}")
        self.cache = ParseCache(int(cache_bytes))
        self.calls = 0
        self.index_queue: list[tuple[str, str]] = []
        self.index_owner: dict[str, str] = {}  # queued path -> the run that asked for it
        self.closed_runs: deque[str] = deque(maxlen=256)  # their late index calls: refused
        self.indexed = 0
        self.jobs: OrderedDict[str, deque[_Running]] = OrderedDict()  # run -> its jobs
        self.active: list[_Running] = []  # the job in its slice (and one run from _preempt)
        self.finished: deque[_Running] = deque(maxlen=FINISHED_KEPT)
        self.work_armed = False

    def on_timer(self, tag: WorkTick | IndexTick) -> None:
        match tag:
            case WorkTick():
                self.work_armed = False
                if self.jobs:
                    self._slice_or_queue(self._next_job())
                self._arm_work()
            case IndexTick() if self.jobs:  # indexing is low priority: searches first
                self.after(0.05, IndexTick())
            case IndexTick():
                self.indexed += index_some(self.cache, self.index_queue, INDEX_CHUNK)
                if self.index_queue:
                    self.after(0.001, IndexTick())
                else:
                    self.index_owner.clear()

    def _index(self, run_id: str, op: Index) -> IndexReply:
        """Parse this shard of a workspace in the background, a chunk per timer tick, so
        the first search of a run finds warm trees; searches are served in between."""
        if run_id and run_id in self.closed_runs:
            return IndexReply(0)  # the run closed before its index call came
        planned = plan_index(op)
        for path, _ in planned:
            self.index_owner[path] = run_id
        idle = not self.index_queue
        self.index_queue = planned[::-1] + self.index_queue
        if idle and self.index_queue:
            self.after(0.001, IndexTick())
        return IndexReply(len(planned))

    def _unindex(self, run_id: str) -> DroppedReply:
        """A run closed: drop what is still queued for it (and refuse its late index calls)."""
        self.closed_runs.append(run_id)
        before = len(self.index_queue)
        self.index_queue = [q for q in self.index_queue if self.index_owner.get(q[0]) != run_id]
        self.index_owner = {p: r for p, r in self.index_owner.items() if r != run_id}
        return DroppedReply(before - len(self.index_queue))

    def _arm_work(self) -> None:
        if self.jobs and not self.work_armed:
            self.work_armed = True
            self.after(TICK, WorkTick())

    def _start_job(self, call: Call, op: Search | Edit) -> None:
        budget = budget_of(op)
        stats: dict[str, int] = {}
        steps: Job
        if isinstance(op, Search):
            steps = search_job(self.cache, op, budget, stats)
        else:
            steps = edit_job(self.cache, op, budget, stats)
        planned = len(op.files) if op.files is not None else None
        job = _Running(call, steps, budget, stats, planned)
        budget.pause = lambda: self._preempt(job)
        if self._busy(job.run):
            self._queue(job)  # behind its own run's work: runs take turns, not jobs
            self._arm_work()
        else:
            self._slice_or_queue(job)  # a small search is answered right here

    def _busy(self, run: str) -> bool:
        return run in self.jobs or any(job.run == run for job in self.active)

    def _queue(self, job: _Running) -> None:
        self.jobs.setdefault(job.run, deque()).append(job)

    def _next_job(self, run: str | None = None) -> _Running:
        """The first job of `run` (default: the run whose turn it is); the run goes to the
        back of the line."""
        if run is None:
            run = next(iter(self.jobs))
        line = self.jobs.pop(run)
        job = line.popleft()
        if line:
            self.jobs[run] = line
        return job

    def _slice_or_queue(self, job: _Running) -> None:
        if self._slice(job):
            job.done = True
            self.finished.append(job)
        else:
            self._queue(job)
            self._arm_work()

    def _slice(self, job: _Running) -> bool:
        """Run `job` for about SLICE seconds; True when it is settled (or abandoned)."""
        call = job.call
        if call.call_id not in self._open:
            job.steps.close()  # its caller has gone (swept past the deadline): stop
            return True
        self._cancel_if_late(job)
        job.slice_ends = time.monotonic() + SLICE
        self.active.append(job)
        try:
            while time.monotonic() < job.slice_ends:
                next(job.steps)
        except StopIteration as done:
            reply: SearchReply | EditReply = done.value
            self.reply(call, plain(reply))
            return True
        except (PatternError, LanguageError, RewriteError, BudgetExceeded) as exc:
            self.fail(call, ErrorCode.BAD_REQUEST, str(exc))
            return True
        except Exception as exc:  # a bug or an unreadable file: the caller hears it now
            self._log_exception(exc)
            self.fail(call, ErrorCode.FAILED, f"{self.name}: {type(exc).__name__}: {exc}")
            return True
        finally:
            self.active.remove(job)
        return False

    def _cancel_if_late(self, job: _Running) -> None:
        call = job.call
        if call.call_id not in self._open:
            job.budget.cancel("its caller has gone")
        elif call.deadline and time.monotonic() > call.deadline:
            job.budget.cancel("its caller's deadline passed")

    def _preempt(self, job: _Running) -> None:
        """Called from `job`'s budget checks: once its slice is used up, serve what waits
        (new calls, then a slice of each other run's next job) and give it a new slice."""
        if len(self.active) != 1 or time.monotonic() < job.slice_ends:
            return  # not its slice's end yet, or already run from another job's _preempt
        self._cancel_if_late(job)  # (the sweep that fails late calls runs between handlers)
        self.serve_arrivals()
        for run in [r for r in self.jobs if r != job.run]:
            if run in self.jobs:
                self._slice_or_queue(self._next_job(run))
        job.slice_ends = time.monotonic() + SLICE

    def on_cancel(self, call: Call, reason: str) -> None:
        """Settled as cancelled now: its job sees its caller gone at the next budget check
        (a few thousand matcher steps) and stops, so the slot is free for the next search."""
        self.fail(call, ErrorCode.CANCELLED, f"the search was cancelled: {reason}")

    def on_call(self, call: Call) -> None:
        op = PARSER.parse(call)
        self.calls += 1
        reply: ParserReply
        match op:
            case Search() | Edit():
                self._start_job(call, op)
                return
            case Index():
                reply = self._index(call.run_id, op)
            case Unindex(run=run):
                reply = self._unindex(run or call.run_id)
            case Stats():
                reply = self._stats()
            case Clear():
                reply = op_clear(self.cache)
        self.reply(call, plain(reply))

    def _stats(self) -> StatsReply:
        cache = self.cache.stats()
        return StatsReply(
            files=cache["files"],
            trees=cache["trees"],
            bytes=cache["bytes"],
            max_bytes=cache["max_bytes"],
            hits=cache["hits"],
            misses=cache["misses"],
            parses=cache["parses"],
            jobs=self._jobs_by_run(),
            searched=self._searched_by_run(),
        )

    def _jobs_by_run(self) -> dict[str, int]:
        """Searches and edits in flight here, per run (queued and running)."""
        out = {run: len(line) for run, line in self.jobs.items()}
        for job in self.active:
            out[job.run] = out.get(job.run, 0) + 1
        return out

    def _searched_by_run(self) -> dict[str, list[JobProgress]]:
        """Per run, each of its jobs here (queued, running, or among the last settled):
        files scanned so far, of how many, when it started, whether it is done."""
        out: dict[str, list[JobProgress]] = {}
        queued = [job for line in self.jobs.values() for job in line]
        for job in [*self.finished, *self.active, *queued]:
            out.setdefault(job.run, []).append(job.searched())
        return out

    def health_extra(self) -> JSONObject:
        return {
            "calls": getattr(self, "calls", 0),
            "cache": {**self.cache.stats()},  # (a copy typed as JSON)
            "indexing": len(getattr(self, "index_queue", ())),
            "indexed": getattr(self, "indexed", 0),
            "jobs": sum(self._jobs_by_run().values()) if hasattr(self, "jobs") else 0,
        }


POOL_SIZE = max(1, min(4, os.cpu_count() or 1))
POOL_KEYS = [str(i) for i in range(POOL_SIZE)]

KINDS: list[KindSpec] = [
    KindSpec(
        "parser",
        "tether.actors.parser:ParserActor",
        Scope.SHARED,
        ChildSpec(Restart.PERMANENT, max_restarts=5, period=60.0, backoff_initial=0.05),
        config={"keys": [*POOL_KEYS]},
    ),
]
