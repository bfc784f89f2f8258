"""The governor: keeps the tree inside its memory budget, on the host.

Two duties, as supervision has two (restart, give up):
- **Admission.** A call that would start a resource (the host has no route to it, and the
  last sample of the tree does not show it) first reserves the kind's expected size. If
  the budget cannot hold it, the policy (tether.capacity.policy) names what may be
  stopped to make room; if nothing may, the call is refused at once with a `capacity`
  error that says what is full, what each kind holds, and what to do. Never a hang, and
  never a start that hands the decision to the OOM killer.
- **Eviction.** A thread reads the tree's health (usage records) and its charge
  (tether.capacity.measure): every SAMPLE_PERIOD s while the tree holds more than
  BUSY_SHARE of its budget, something is starting (reserved) or stopping; every
  IDLE_PERIOD s while it is well inside it (a sample costs every actor a wake and a read
  of its processes' memory: at 2 s, ~3% of a core for an idle tree of one conversation,
  and more with each). Over the budget (the tree grew, or the
  budget shrank: `memory_pressure`), it stops what the policy allows. An eviction is a
  normal stop: the actor is told to stop, its supervisor forgets it (no restart, nothing
  in health), and the next call starts a fresh one whose first result says why.

It is host-side and knows the tree only through three functions the runtime hands it:
`health(timeout)`, `top_pids()` (thespian's own processes, which carry no usage record)
and `evict(name, why) -> bool` (True: it stops; False: the tree answered no - it is inside
a call, or its supervisor sees it stopping or gone already; ResourceError: no answer, so
whether it stops is unknown: short of a yes, the governor asks health whether it is
stopping or gone, see `_ask_to_stop`).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from tether.capacity.measure import Budget
from tether.capacity.policy import Settings, candidates, decide, tier
from tether.capacity.usage import (
    EVICTED,
    MIB,
    TREE_TRAITS,
    KindTraits,
    UsageRecord,
    by_kind,
    pss_bytes,
    records,
    traits_of,
)
from tether.cgroups import Cgroup, CgroupError
from tether.health_node import HealthNode
from tether.json_types import JSONObject, JSONValue
from tether.messages.calls import Call, ErrorCode, ResourceError

SAMPLE_PERIOD = 2.0  # s between samples of a tree near its budget, starting or stopping
IDLE_PERIOD = 10.0  # s between samples of a tree well inside its budget
BUSY_SHARE = 0.75  # of the budget, held (sampled + reserved): above it, sample often
SAMPLE_TIMEOUT = 3.0
RESERVE_TTL = 30.0  # s a reservation holds a starting resource's expected size at most
# over the budget, stop down to this share of it: room for what grows meanwhile (a
# server indexing, a cell) before the next sample, instead of hovering at the limit
LOW_WATER = 0.9
# a conversation the tree has not seen yet: a kernel and two language servers' worth
EXPECTED_CONVERSATION = (
    traits_of("kernel").expected_bytes + 2 * traits_of("language_server").expected_bytes
)


@dataclass
class _Reservation:
    kind: str
    bytes: int
    until: float
    spare: bool = False  # a spare's: room a conversation's own call may take back


@dataclass
class _Leaving:
    """A resource the governor stopped, for as long as the tree may still list it: it is
    no candidate (never asked twice), and what its sampled record holds is on its way out.
    It stops being one at the first sample asked after its eviction was answered that
    does not list its name as stopping: gone, a successor under the same name (a new
    incarnation, evictable as any), or an actor that only dropped what it held (the
    kernel pool keeps its name and discards its spares)."""

    answered: float = math.inf  # time.monotonic() its eviction was answered (inf: not yet)
    counts_out: bool = True  # False once a successor was admitted: its bytes count again
    # what was still reserved for its start: released with the eviction, held again if
    # the eviction is refused (a call came in meanwhile: it runs on, and grows)
    reservation: _Reservation | None = None

    def still(self, rec: UsageRecord | None, asked: float) -> bool:
        """Whether a sample asked at `asked` that found `rec` under its name (None: no
        record) still shows this one leaving."""
        return rec is not None and (asked < self.answered or rec.stopping)


def resource_name(call: Call) -> str:
    """The name health gives the actor `call` is for."""
    name = f"{call.kind}:{call.key}"
    return f"run:{call.run_id}/{name}" if call.run_scoped else name


def mib(n: float) -> str:
    return f"{n / MIB:.0f} MiB" if abs(n) < 10 * 2**30 else f"{n / 2**30:.1f} GiB"


class Governor:
    def __init__(
        self,
        budget: Budget,
        cgroup: Cgroup | None,
        settings: Settings,
        health: Callable[[float], HealthNode],  # rt.health(timeout)
        top_pids: Callable[[], list[int]],
        evict: Callable[[str, str], bool],
        kind_configs: Mapping[str, Mapping[str, JSONValue]] | None = None,
        status_file: Path | None = None,
    ):
        self.budget = budget
        self.cgroup = cgroup
        self.settings = settings
        self._health = health
        self._top_pids = top_pids
        self._evict = evict
        self._configs = dict(kind_configs or {})
        self.status_file = status_file
        self._lock = threading.Lock()
        # one enforcement at a time, its stops included: a sample that finds the tree over
        # its budget (the sampling thread's, or memory_pressure's own) returns once what
        # any of them stopped for it is stopped and counted
        self._enforcing = threading.Lock()
        self.records: list[UsageRecord] = []
        self.used = 0
        self.used_source = "not sampled yet"
        self.sampled_at = 0.0
        self._reserved: dict[str, _Reservation] = {}
        self._stopping: dict[str, _Leaving] = {}  # evicted, and maybe still listed
        self._pressure: tuple[int, float] | None = None  # (budget bytes, until) injected
        self.evictions: dict[str, int] = {}  # by kind
        self.refusals = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the budget ------------------------------------------------------------------
    def effective_budget(self, now: float | None = None) -> int:
        """The budget, or the injected pressure's smaller one while it lasts."""
        if self._pressure is not None:
            limit, until = self._pressure
            if (now or time.monotonic()) < until:
                return min(limit, self.budget.bytes)
            self._pressure = None
        return self.budget.bytes

    def pressure(self, budget: int | float, seconds: float | None) -> JSONObject:
        """Shrink the budget (bytes, or a fraction of the configured one) for `seconds`
        (None: until the next pressure; budget=1.0 lifts it). Enforced at once."""
        if isinstance(budget, bool) or not isinstance(budget, int | float) or budget <= 0:
            raise ValueError(
                f"memory_pressure needs budget=bytes (int) or a fraction of the budget "
                f"(0 < f <= 1), e.g. rt.inject('memory_pressure', budget=0.5, seconds=10); "
                f"got {budget!r}"
            )
        if isinstance(budget, float) and budget > 1:
            raise ValueError(f"memory_pressure budget fraction must be <= 1, got {budget!r}")
        limit = int(self.budget.bytes * budget) if isinstance(budget, float) else int(budget)
        until = time.monotonic() + seconds if seconds else float("inf")
        self._pressure = (limit, until)
        self.sample()
        lasting = f"for {seconds:g} s" if seconds else "until lifted (budget=1.0)"
        return {"message": f"the tree's memory budget is {mib(limit)} {lasting}", **self.summary()}

    # --- sampling and eviction -------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="tether-capacity", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(SAMPLE_TIMEOUT + 1.0)
        if self.status_file is not None:
            with contextlib.suppress(OSError):
                self.status_file.unlink()

    def _loop(self) -> None:
        while not self._stop.wait(self.period()):
            self.sample()

    def period(self) -> float:
        """Seconds until the next sample: SAMPLE_PERIOD when the tree may soon need a stop
        (near its budget, resources starting whose growth is not seen yet, or stopping),
        IDLE_PERIOD otherwise."""
        with self._lock:
            if self._reserved or self._stopping:
                return SAMPLE_PERIOD
            held = self.used
        return SAMPLE_PERIOD if held > BUSY_SHARE * self.effective_budget() else IDLE_PERIOD

    def sample(self) -> None:
        """Read the tree's usage records and charge, then stop what keeps it over budget."""
        asked = time.monotonic()
        try:
            tree = self._health(SAMPLE_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - a sample that fails is skipped, said in health
            self.last_error = f"the tree did not answer its capacity sample: {exc}"
            return
        found = records(tree)
        used, source = self._charge(found)
        now = time.monotonic()
        with self._lock:
            names = {r.name: r for r in found}
            self.records, self.used, self.used_source, self.sampled_at = found, used, source, now
            self._stopping = {
                n: s for n, s in self._stopping.items() if s.still(names.get(n), asked)
            }
            # (a reservation outlives its resource's first sample: a server grows while it
            # indexes, and only what it has not reached yet stays reserved)
            self._reserved = {n: r for n, r in self._reserved.items() if r.until > now}
            self.last_error = ""
        self._enforce(now)
        self._write_status()

    def _charge(self, found: list[UsageRecord]) -> tuple[int, str]:
        if self.cgroup is not None:
            with contextlib.suppress(CgroupError, ValueError):
                return self.cgroup.charge(), str(self.cgroup)
        top = self._top_pids()  # (thespian's admin and logger: steady)
        return sum(r.bytes for r in found) + pss_bytes(top, steady=top), (
            f"PSS of the tree's processes ({len(found)} actors)"
        )

    def _live_used(self) -> int:
        """The charge now where reading it is cheap (a cgroup), else the last sample's;
        less what is being stopped already (what the last sample saw it hold)."""
        used = self.used
        if self.cgroup is not None:
            with contextlib.suppress(CgroupError, ValueError):
                used = self.cgroup.charge()
        leaving = sum(
            r.bytes
            for r in self.records
            if (s := self._stopping.get(r.name)) is not None and s.counts_out
        )
        return max(used - leaving, 0)

    def _enforce(self, now: float) -> None:
        with self._enforcing:
            with self._lock:
                held = self._live_used() + self._reserved_bytes()
                if held <= self.effective_budget(now):
                    return
                need = held - int(self.effective_budget(now) * LOW_WATER)
                plan = decide(
                    self._candidates(),
                    need,
                    now,
                    self.settings,
                    partial=True,
                    reserved=self._residuals(),
                )
                self._stopping_now(plan.stop)
            why = f"{EVICTED} (it was {mib(self.used)} of {mib(self.effective_budget(now))})"
            for rec in plan.stop:
                self._stop_one(rec, why)

    def _stop_one(self, rec: UsageRecord, why: str) -> None:
        idle = time.monotonic() - rec.last_use
        stopped = self._ask_to_stop(rec.name, f"{why}; idle {idle:.0f} s")
        with self._lock:
            leaving = self._stopping.get(rec.name)
            if stopped and leaving is not None:
                leaving.answered = time.monotonic()
            elif not stopped:  # busy by now, or gone: it counts again, and its reservation
                left = self._stopping.pop(rec.name, None)
                if left is not None and left.reservation is not None:
                    self._reserved.setdefault(rec.name, left.reservation)
        if stopped:
            self.evictions[rec.kind] = self.evictions.get(rec.kind, 0) + 1

    def _ask_to_stop(self, name: str, why: str) -> bool:
        """Whether `name` stops: yes if it says so; otherwise what health says of it now:
        stopping or gone is stopped; listed and not stopping is kept (it counts again, with
        its reservation). A "no" may come from its supervisor, which sees it stopping or
        gone already, and an answer may be lost (or late): read as a refusal, either held
        what the resource had reserved for up to RESERVE_TTL while its process was gone
        (issue 23)."""
        try:
            if self._evict(name, why):
                return True
            doubt = f"{name} refused its eviction"
        except ResourceError as exc:
            doubt = f"{name} did not answer its eviction ({exc})"
        try:
            tree = self._health(SAMPLE_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - unknown: counted as kept, said in health
            self.last_error = f"{doubt}, and the tree no health query ({exc})"
            return False
        found = next((r for r in records(tree) if r.name == name), None)
        return found is None or found.stopping

    def _candidates(self) -> list[UsageRecord]:
        return [r for r in self.records if r.name not in self._stopping]

    def _residuals(self, names: Collection[str] | None = None) -> dict[str, int]:
        """By name, what starting resources (or those of `names`) will hold beyond what
        the last sample saw them hold: what is still reserved for them. Stopping one frees
        it with its bytes (`_stopping_now` releases it), so the policy counts both."""
        seen = {r.name: r.bytes for r in self.records}
        return {
            n: max(r.bytes - seen.get(n, 0), 0)
            for n, r in self._reserved.items()
            if names is None or n in names
        }

    def _reserved_bytes(self, names: Collection[str] | None = None) -> int:
        """What starting resources (or those of `names`) will hold beyond what they hold
        already."""
        return sum(self._residuals(names).values())

    def _stopping_now(self, stop: tuple[UsageRecord, ...]) -> None:
        """`stop` is being stopped: its bytes are on their way out, and what was reserved
        for its start is no longer held for it (under the lock)."""
        for rec in stop:
            self._stopping[rec.name] = _Leaving(reservation=self._reserved.pop(rec.name, None))

    # --- admission -------------------------------------------------------------------
    def admit(self, call: Call) -> None:
        """Room for the resource `call` is for, or ResourceError(CAPACITY). Called by the
        host's engine for a call it has no route for (it may start a resource)."""
        self.admit_resource(resource_name(call), call.kind)

    def admit_resource(self, name: str, kind: str) -> None:
        """A spare (the kernel pool) is speculative: it starts only into free room, never
        by stopping anything, and a starting spare's reservation is room that a
        conversation's own call takes back (the spare is stopped) before anything else."""
        now = time.monotonic()
        spare = self._traits(kind).spare
        spares: list[str] = []  # starting spares whose room this call takes back
        with self._lock:
            if name in self._reserved or any(r.name == name for r in self.records):
                if name not in self._stopping:
                    return  # it runs (or is starting): nothing new to hold
                # started again while the one stopped is still in the last sample: what
                # that one holds counts again until it is gone (its successor has its name;
                # the first sample that lists the successor ends the entry)
                self._stopping[name].counts_out = False
            need = self._expected(kind)
            free = self.effective_budget(now) - self._live_used() - self._reserved_bytes()
            if spare:
                if need > free:
                    raise ResourceError(
                        ErrorCode.CAPACITY,
                        f"no spare {name} now: the tree's memory budget has {mib(max(free, 0))} "
                        f"free and a spare needs ~{mib(need)} (a spare starts only into free "
                        f"room; the first cell starts its own kernel instead)",
                    )
                plan = decide((), 0, now, self.settings)
            else:
                # (what a candidate's stop frees: its bytes, and what is still reserved
                # for it: `free` counted that as held)
                residual = self._residuals()
                plan = decide(
                    self._candidates(),
                    need - free,
                    now,
                    self.settings,
                    protect={name},
                    reserved=residual,
                )
                if not plan.enough:  # then the room held for starting spares, first
                    spares = [n for n, r in self._reserved.items() if r.spare and n != name]
                    room = free + self._reserved_bytes(spares)
                    plan = decide(
                        self._candidates(),
                        need - room,
                        now,
                        self.settings,
                        protect={name},
                        # (the spares' residuals are in `room` already)
                        reserved={n: b for n, b in residual.items() if n not in spares},
                    )
                if not plan.enough:
                    self.refusals += 1
                    raise ResourceError(ErrorCode.CAPACITY, self._refusal(name, kind, need, free))
                for gone in spares:
                    self._reserved.pop(gone)
                spares = [n for n in spares if n not in {r.name for r in plan.stop}]
            self._stopping_now(plan.stop)
            self._reserved[name] = _Reservation(kind, need, now + RESERVE_TTL, spare)
        why = f"{EVICTED} (to start {name}, ~{mib(need)})"
        for rec in plan.stop:
            self._stop_one(rec, why)
        for gone in spares:  # (one still starting may not stop yet: the next sample's turn)
            if self._ask_to_stop(gone, f"{why}: its spares were starting"):
                kind_of = gone.split(":", 1)[0]
                self.evictions[kind_of] = self.evictions.get(kind_of, 0) + 1

    def _traits(self, kind: str) -> KindTraits:
        try:
            return traits_of(kind, self._configs.get(kind))
        except ValueError:
            return traits_of(kind)

    def _expected(self, kind: str) -> int:
        """What a new resource of `kind` will hold: its table size, or what the ones of
        its kind running now hold on average if that is more (the table is a guess made
        on one machine; the tree's own resources are the better one)."""
        if kind == "run":
            return TREE_TRAITS.expected_bytes
        table = self._traits(kind).expected_bytes
        seen = [r.bytes for r in self.records if r.kind == kind]
        return max(table, sum(seen) // len(seen)) if seen else table

    def _refusal(self, name: str, kind: str, need: int, free: int) -> str:
        now = time.monotonic()
        budget = self.effective_budget(now)
        held = ", ".join(
            f"{k} {mib(b)} in {sum(1 for r in self.records if _kind(r) == k)}"
            for k, b in sorted(by_kind(self.records).items(), key=lambda kv: -kv[1])
        )
        kept = []
        state = [r for r in self.records if r.holds_state and tier(r, now, self.settings) is None]
        if state:
            kept.append(f"{len(state)} hold conversations' state ({mib(_sum(state))})")
        busy = [r for r in self.records if r.busy and r.evictable]
        if busy:
            kept.append(f"{len(busy)} are inside a call")
        work = [r for r in self.records if not r.evictable and _kind(r) != "tree"]
        if work:
            kept.append(f"{len(work)} are running work ({mib(_sum(work))})")
        return (
            f"the tree's memory budget is full, so {name} (~{mib(need)}) cannot "
            f"start: {mib(self._live_used())} of {mib(budget)} used ({self.used_source}), "
            f"{mib(self._reserved_bytes())} reserved for resources starting, "
            f"{mib(max(free, 0))} free. Held by kind: {held or 'nothing sampled yet'}. "
            f"Nothing may be stopped to make room"
            + (f": {'; '.join(kept)}" if kept else "")
            + ". What to do: retry once other calls have finished, close a conversation you "
            "no longer need (run.close()), or give the runtime a larger memory_budget "
            "(a host may also let idle kernels go: evict_idle_kernels_after=N minutes)."
        )

    # --- what the host can ask ahead -------------------------------------------------
    def summary(self) -> JSONObject:
        """rt.capacity(): budget, used, per-kind use, reserved, how many more fit.

        `fit` counts as room what admission would free for a newcomer (`evictable`): idle
        stateless resources and spares the policy would stop, and the room held for spares
        still starting, which a conversation's call takes back. So the forecast and
        admission agree: a host that holds back while `fit` is 0 holds back exactly the
        conversations whose resources would be refused, and does not turn away ones the
        tree would take by stopping idle servers (not counting them would leave idle
        servers in the budget while conversations are sent elsewhere). A conversation's
        state is room only where the host opted in, as for admission."""
        now = time.monotonic()
        with self._lock:
            budget = self.effective_budget(now)
            used = self._live_used()
            reserved = self._reserved_bytes()
            runs = sum(1 for r in self.records if r.kind == "run")
            average = used // runs if runs else EXPECTED_CONVERSATION
            kinds = by_kind(self.records)
            # what admission would free for a newcomer counts as room: what the policy would
            # stop (spares, idle servers) with what is still reserved for them, and the
            # room of spares still starting
            residual = self._residuals()
            may_go = {r.name: r.bytes for r in candidates(self._candidates(), now, self.settings)}
            evictable = sum(b + residual.get(n, 0) for n, b in may_go.items())
            evictable += sum(
                b for n, b in residual.items() if self._reserved[n].spare and n not in may_go
            )
            counts = {k: sum(1 for r in self.records if _kind(r) == k) for k in kinds}
            return {
                "budget": budget,
                "budget_source": self.budget.source
                + (" (shrunk by memory_pressure)" if budget < self.budget.bytes else ""),
                "used": used,
                "used_source": self.used_source,
                "reserved": reserved,
                "free": max(budget - used - reserved, 0),
                "evictable": evictable,
                "by_kind": {k: {"bytes": kinds[k], "count": counts[k]} for k in kinds},
                "conversations": runs,
                "average_conversation": average,
                "fit": max((budget - used - reserved + evictable) // max(average, 1), 0),
                "evictions": dict(self.evictions),
                "refusals": self.refusals,
                "sampled_ago": round(now - self.sampled_at, 3) if self.sampled_at else None,
                "last_error": self.last_error,
            }

    def _write_status(self) -> None:
        """The summary beside the port file, for `tether status` in another process."""
        if self.status_file is None:
            return
        import json

        tmp = self.status_file.with_name(f".{self.status_file.name}.{os.getpid()}.tmp")
        with contextlib.suppress(OSError):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(self.summary(), out)
            os.replace(tmp, self.status_file)


def _kind(rec: UsageRecord) -> str:
    return "tree" if rec.kind in ("root", "supervisor", "runs", "run") else rec.kind


def _sum(found: list[UsageRecord]) -> int:
    return sum(r.bytes for r in found)
