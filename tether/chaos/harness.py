"""One chaos run: a runtime, its conversations and the fault injector, then the checks
that need the end (unanswered calls, orphan processes) and the report.

    report = run_chaos(ChaosConfig(workdir=Path("checkout"), duration=60, runs=4))
    print(report.text()); report.ok
"""

from __future__ import annotations

import contextlib
import importlib.util
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tether.chaos import invariants as inv
from tether.chaos.faults import CLASSES, Injector, recoveries
from tether.chaos.report import Report
from tether.chaos.scratch import Workspace
from tether.chaos.workload import (
    EVAL_INACTIVITY,
    EVAL_WALL,
    GUARD_OPS,
    OPS,
    PROJECT_SEARCH,
    SLACK,
    Conversation,
    Guard,
    Ledger,
    TornWatch,
    echo_brief,
)
from tether.debug import adapters
from tether.lsp import servers
from tether.runtime import Runtime
from tether.tools.eval import configure as configure_eval
from tether.tools.spec import Surface
from tether.tools.vibe_workers import CallableBackend, VibeConfig

GUARD = "ro"  # the conversation on a read-only surface


@dataclass(frozen=True)
class ChaosConfig:
    workdir: Path
    duration: float = 60.0  # s of load (and faults)
    runs: int = 4  # conversations calling tools (the read-only guard comes on top)
    seed: int | None = None  # None: a fresh one (the report names it, to replay)
    interval: float = 2.0  # s between faults
    faults: Sequence[str] = tuple(CLASSES)
    ops: Sequence[str] = OPS
    in_place: bool = False  # work in workdir itself (writing only in a folder of its own)
    keep: bool = False  # leave the scratch files for a look afterwards
    pace: float = 0.05  # s a conversation pauses between operations
    guard: bool = True  # also run the read-only guard conversation
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _check("duration", self.duration > 0, "a positive number of seconds")
        _check("runs", self.runs >= 1, "at least 1")
        _check("interval", self.interval > 0, "a positive number of seconds")
        _check("pace", self.pace >= 0, "0 or more seconds")
        _known("faults", self.faults, list(CLASSES))
        _known("ops", self.ops, OPS)


def _check(name: str, ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"--{name} must be {what}")


def _known(name: str, given: Sequence[str], valid: Sequence[str]) -> None:
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise ValueError(f"unknown {name} {', '.join(unknown)}; choose among {', '.join(valid)}")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def missing_components(ws: Workspace, run: str) -> dict[str, str]:
    """The operations this machine cannot run, and why (a component not installed)."""
    missing = {}
    lsp = servers.resolve(servers.BY_NAME["basedpyright"], ws.file(run, 0), ws.root)
    if not lsp.usable:
        missing["lsp"] = lsp.why_not()
    for module in ("jupyter_client", "ipykernel"):
        if importlib.util.find_spec(module) is None:
            missing["eval"] = f"{module} is not installed (bash scripts/install.sh installs it)"
    program = ws.conversation_dir(run) / "prog.py"
    debug = adapters.resolve(adapters.BY_NAME["debugpy"], program, ws.root)
    if not debug.usable:
        missing["debug"] = debug.why_not()
    return missing


def run_chaos(config: ChaosConfig, log: Callable[[str], None] = _stderr) -> Report:
    seed = config.seed if config.seed is not None else random.randrange(1 << 31)
    rng = random.Random(seed)
    ws = Workspace(config.workdir, config.in_place, config.keep)
    try:
        names = [f"c{n}" for n in range(config.runs)] + ([GUARD] if config.guard else [])
        for name in names:
            ws.plant(name)
        found = missing_components(ws, names[0])
        if config.in_place:
            found["escape"] = "--in-place: a write that escaped would land beside DIR"
        missing = {op: why for op, why in found.items() if op in config.ops}
        ops = [op for op in config.ops if op not in missing]
        guard = " + a read-only guard" if config.guard else ""
        log(
            f"tether chaos: {config.runs} conversations{guard} for {config.duration:g} s, a "
            f"fault every {config.interval:g} s (seed {seed}), {ws.describe()}"
        )
        ledger = Ledger()
        stop = threading.Event()
        rt = Runtime.start()
        injector = Injector(
            rt, ledger, config.faults, config.interval, rng.randrange(1 << 31),
            config.duration - config.interval, stop, log,
        )  # fmt: skip
        watch = TornWatch(ws, names, ledger, stop)
        try:
            total, why = _baseline(rt, ws) if "search_project" in ops else (None, "")
            if why:
                missing["search_project"] = why
                ops.remove("search_project")
            conversations = [_open(rt, ws, ledger, n, ops, rng, stop, config.pace) for n in names]
            for conversation in conversations:
                conversation.project_total = total if total is not None else -1
            seconds = _load(config, conversations, ledger, injector, watch, stop)
        finally:
            stop.set()
            injector.sample()
            rt.shutdown()
            _orphans(rt, injector, ledger)
    finally:
        ws.cleanup()
    return Report(
        seed=seed,
        runs=config.runs,
        seconds=seconds,
        where=ws.describe(),
        exercised=ops,
        not_exercised=missing,
        calls=list(ledger.calls),
        faults=list(injector.faults),
        skipped_faults=list(injector.skipped),
        recoveries=recoveries(injector.faults, ledger.calls),
        violations=list(ledger.violations),
        notices=list(ledger.notices),
        processes_seen=len(injector.seen),
        notes=[*config.notes, f"a reader looked at the scratch files {watch.reads} times"],
    )


def _baseline(rt: Runtime, ws: Workspace) -> tuple[int | None, str]:
    """What the whole-workspace search finds before any fault (what it must find after),
    or None and why it could not search."""
    with rt.open_run("chaos-baseline", workdir=str(ws.root)) as run:
        found = run.call("ast_grep", PROJECT_SEARCH)
    if found.is_error:
        return None, f"the search failed before the load: {found.text[:200]}"
    return int((found.data or {}).get("total", 0)), ""


def _load(
    config: ChaosConfig,
    conversations: Sequence[Conversation],
    ledger: Ledger,
    injector: Injector,
    watch: TornWatch,
    stop: threading.Event,
) -> float:
    """The load and the faults for `config.duration` s, then the calls still open, each
    until its deadline; the runs closed. Returns how long the load ran."""
    injector.sample()
    ledger.t0 = time.monotonic()  # (the clock starts with the load)
    for conversation in conversations:
        conversation.thread.start()
    injector.thread.start()
    watch.thread.start()
    stop.wait(config.duration)
    stop.set()
    seconds = ledger.now()
    _drain(conversations, ledger)
    watch.thread.join(5.0)
    injector.thread.join(10.0)
    injector.sample()
    for conversation in conversations:
        with contextlib.suppress(Exception):
            conversation.run.close()
    return seconds


def _open(
    rt: Runtime,
    ws: Workspace,
    ledger: Ledger,
    name: str,
    ops: Sequence[str],
    rng: random.Random,
    stop: threading.Event,
    pace: float,
) -> Conversation:
    seed = rng.randrange(1 << 31)
    if name == GUARD:
        guard_ops = [op for op in GUARD_OPS if op == "breach" or op in ops]
        run = rt.open_run(name, workdir=str(ws.root), surface=Surface.READONLY)
        return Guard(run, ws, ledger, guard_ops, seed, stop, pace)
    vibe = VibeConfig({"fast": CallableBackend(echo_brief)})
    run = rt.open_run(name, workdir=str(ws.root), vibe=True, vibe_config=vibe)
    configure_eval(run, inactivity=EVAL_INACTIVITY, wall=EVAL_WALL)
    return Conversation(run, ws, ledger, ops, seed, stop, pace)


def _drain(conversations: Sequence[Conversation], ledger: Ledger) -> None:
    """Wait for the calls still open, each until its deadline (+ slack); one that is still
    open then was never answered."""
    for conversation in conversations:
        while conversation.thread.is_alive():
            flight = conversation.in_flight
            left = (
                1.0 if flight is None else flight.started + flight.deadline + SLACK - ledger.now()
            )
            if left <= 0:
                break
            conversation.thread.join(min(left, 1.0))
        flight = conversation.in_flight
        if conversation.thread.is_alive() and flight is not None:
            detail = (
                f"called at t={flight.started:.1f}s, still unanswered past its "
                f"{flight.deadline:g} s deadline (+{SLACK:g} s)"
            )
            ledger.violate(inv.HUNG, conversation.name, flight.tool, detail)


def _orphans(rt: Runtime, injector: Injector, ledger: Ledger) -> None:
    """After shutdown: any process of the runtime still alive is an orphan (reported, then
    killed: the harness leaves nothing behind either)."""
    for proc in rt.left_behind(injector.seen.values()):
        with contextlib.suppress(Exception):
            detail = f"pid {proc.pid} ({' '.join(proc.cmdline()[:3])}) outlived the runtime"
            ledger.violate(inv.ORPHAN, "-", "shutdown", detail)
            proc.kill()
