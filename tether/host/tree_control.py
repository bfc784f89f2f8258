"""What the host asks the tree's own nodes: open and close runs, list keys, health, faults.

Calls to resources go through `CallEngine.call`; these go to a supervisor (the root, the
runs supervisor, a kind's supervisor) with `CallEngine.ask_node`, each one control message
of `tether.messages.control` with its own deadline. Each function takes the engine of the
current tree and what is left of the caller's timeout (`Runtime._engine_within`), and a
fresh call id.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import cast

from tether.health_node import HealthNode
from tether.host.engine import CallEngine
from tether.host.routes import ROOT, Target
from tether.kinds import KindSpec, Scope
from tether.messages.calls import ErrorCode, Reply, ResourceError, Wire
from tether.messages.control import CloseRun, HealthQuery, HealthReport, Inject, ListKeys, OpenRun

FAULTS = ("kill_process", "crash_actor", "delay", "drop_reply", "memory_pressure")
RUNS: Target = ("", "runs", "")


def open_run(engine: CallEngine, call_id: str, run_id: str, timeout: float) -> None:
    """Start (or find) the RunActor of `run_id`, and learn where it is. Idempotent."""
    msg = OpenRun(call_id, run_id)
    reply, address = engine.ask_node(
        RUNS, msg, call_id, timeout, f"open run {run_id!r}", expect=Reply
    )
    if not reply.ok:
        raise ResourceError(reply.error, reply.message)
    incarnation, pid = reply.payload["incarnation"], reply.payload["pid"]
    assert isinstance(incarnation, int) and isinstance(pid, int)  # (RunSupervisor._opened)
    engine.routes.add(("", "run", run_id), address, incarnation, pid)


def close_run(engine: CallEngine, call_id: str, run_id: str, timeout: float) -> None:
    """Stop the RunActor of `run_id` and the run-scoped actors under it."""
    engine.routes.forget_run(run_id)
    what = f"close run {run_id!r}"
    engine.ask_node(RUNS, CloseRun(call_id, run_id), call_id, timeout, what, expect=Reply)


def declared_keys(kinds: Mapping[str, KindSpec], kind: str) -> list[str] | None:
    """The keys of `kind` known without asking the tree: its declared key set
    (config["keys"], e.g. pool slots), or none for a run kind (its keys are per run);
    None for a shared kind whose keys are those of its running actors."""
    spec = kinds.get(kind)
    if spec is None:
        connected = ", ".join(sorted(kinds)) or "none"
        raise ResourceError(
            ErrorCode.BAD_REQUEST, f"no resource kind {kind!r}; connected kinds: {connected}"
        )
    keys = spec.config.get("keys")
    if isinstance(keys, list | tuple):  # (KindSpec checked: a list of str)
        return [str(k) for k in keys]
    return None if spec.scope is Scope.SHARED else []


def running_keys(engine: CallEngine, call_id: str, kind: str, timeout: float) -> list[str]:
    """The keys of the actors of shared kind `kind` running now (its supervisor knows)."""
    target: Target = ("", "supervisor", kind)
    deadline = time.monotonic() + timeout
    if engine.routes.get(target) is None:
        down = engine.learn_hops(timeout, wait_for=target)
        if engine.routes.get(target) is None and f"supervisor:{kind}" not in down:
            return []  # (its supervisor starts with the kind's first call: none yet)
    what = f"list the keys of {kind!r}"
    msg = ListKeys(call_id, kind)
    left = deadline - time.monotonic()
    reply, _ = engine.ask_node(target, msg, call_id, left, what, expect=Reply)
    keys = reply.payload.get("keys", [])
    assert isinstance(keys, list)  # (a KindSupervisor's answer to ListKeys)
    return [str(key) for key in keys]


def tree_health(engine: CallEngine, query_id: str, deadline: float, timeout: float) -> HealthNode:
    """The root's health tree: each supervisor gathers its children's answers by `deadline`
    (time.monotonic) and speaks for those that do not answer."""
    query = HealthQuery(query_id, deadline)
    what = "report the health of the actor tree"
    report, _ = engine.ask_node(ROOT, query, query_id, timeout, what, expect=HealthReport)
    return cast(HealthNode, dict(report.node))  # (each node built by health_node)


def check_fault(fault: str, args: Mapping[str, float]) -> None:
    """A ValueError saying how to call `rt.inject` if `fault` or its `args` are wrong."""
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; faults: {', '.join(FAULTS)}")
    if fault == "memory_pressure" and ("budget" not in args or set(args) - {"budget", "seconds"}):
        raise ValueError(
            "memory_pressure takes budget= (bytes, or a fraction of the budget) and "
            "optionally seconds=, e.g. rt.inject('memory_pressure', budget=0.5, "
            f"seconds=10); got {sorted(args)}"
        )
    if fault == "delay" and "seconds" not in args:
        raise ValueError(
            "delay needs seconds=..., e.g. rt.inject('delay', target='echo:k', seconds=2.0)"
        )


def inject(
    engine: CallEngine,
    call_id: str,
    fault: str,
    target: str,
    args: Mapping[str, float],
    timeout: float,
) -> Wire:
    """Hand the fault to the root, which finds `target` (as health names it)."""
    msg = Inject(call_id, fault, target, dict(args))
    what = f"inject {fault} into {target!r}"
    reply, _ = engine.ask_node(ROOT, msg, call_id, timeout, what, expect=Reply)
    if not reply.ok:
        raise ResourceError(reply.error, reply.message)
    return dict(reply.payload)


def evict(engine: CallEngine, call_id: str, name: str, why: str, timeout: float) -> bool:
    """Stop the resource actor `name` to make room: a normal stop (its supervisor forgets
    it; the next call starts a fresh one, whose first result says why). True if it
    stops, False if the tree answered no (it is inside a call, or not there to stop).
    No answer within `timeout` raises ResourceError: whether it stops is unknown (the
    answer may be late or lost with its process), and the caller asks health."""
    msg = Inject(call_id, "evict", name, {"why": why})
    what = f"stop {name!r} for room"
    reply, _ = engine.ask_node(ROOT, msg, call_id, timeout, what, expect=Reply)
    return bool(reply.ok)
