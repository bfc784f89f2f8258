"""Chaos: conversations calling the runtime while its processes are SIGKILLed, one every few
seconds, chosen among every process of the runtime (thespian's admin and logger included).

    python benchmarks/chaos.py [--conversations 30] [--duration 60] [--interval 5]
                               [--tail 10] [--baseline-duration 60] [--seed N]
                               [--roles admin,root,...] [--json out.json]

Each conversation is a thread with its own run, calling in turn: the shared "echo" actor
(in-process), the shared "echo_process" actor (a subprocess behind it), its own run-scoped
"echo_run" actor, and the `ast_grep` tool (the parser pool) on a copy of some of tether's
sources. Every echo carries a token the answer must carry back, every ast_grep must answer
what it answered before the faults: anything else is a wrong reply.

The same load runs first without faults (the baseline), then with them: the kills within
--duration, the load going on --tail s more so the last kill's recovery is seen.
Reported: calls/s of both, errors by code, calls that ended past their deadline (target
0), wrong replies (target 0), per kill the time until every affected conversation was
answered again by what the killed process served (and until the first one was), and the
processes left after shutdown (target 0). Roles are taken in a shuffled cycle so a short
run still kills a bit of everything; the admin is always among them.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import random
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import alive  # noqa: E402
from tether.messages.calls import ResourceError  # noqa: E402
from tether.processes import processes_with_token  # noqa: E402
from tether.runtime import RESOURCE_KIND_MODULES, Runtime  # noqa: E402

ECHO_TIMEOUT = 5.0  # s, each echo call's deadline
AST_GREP_DEADLINE = 120.0  # s, the tool's own deadline (tether.tools.structural)
SLACK = 0.5  # s a call may end after its deadline before it counts as late
WINDOW = 2.0  # s per point of the throughput timeline
TYPES = ("echo", "echo_process", "echo_run", "ast_grep")
AST_GREP = {"pattern": "def $F($$$A): $$$B", "language": "python", "max_results": 5}

# what a kill of each role takes away: the call types it served, and whether only the
# conversation it belonged to (a RunActor and what runs under it) or every conversation
TOP = ("admin", "logger", "root")
AFFECTS: dict[str, tuple[tuple[str, ...], bool]] = {
    **{role: (TYPES, False) for role in TOP},
    "runs": (("echo_run",), False),
    "supervisor:echo": (("echo",), False),
    "supervisor:echo_process": (("echo_process",), False),
    "supervisor:parser": (("ast_grep",), False),
    "actor:echo": (("echo",), False),
    "actor:echo_process": (("echo_process",), False),
    "process:echo_process": (("echo_process",), False),
    "actor:parser": (("ast_grep",), False),
    "run": (("echo_run",), True),
    "actor:echo_run": (("echo_run",), True),
    "process:echo_run": (("echo_run",), True),
}


@dataclass
class Outcome:
    conversation: int
    type: str
    started: float
    ended: float
    deadline: float  # s
    code: str = ""  # "" when answered
    wrong: bool = False
    text: str = ""  # an error the tool gave without a code


@dataclass
class Kill:
    at: float
    role: str
    pid: int
    conversation: int | None  # for a run's own processes


@dataclass
class Load:
    rt: Runtime
    conversations: int
    workdir: Path
    expected: str  # what ast_grep answers on this workdir
    outcomes: list[Outcome] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    tokens: itertools.count = field(default_factory=itertools.count)

    def run(self, seconds: float, during: Any = None) -> float:
        """Load for `seconds` (calling `during(deadline)` meanwhile); returns the span."""
        threads = [
            threading.Thread(target=self._conversation, args=(n,), daemon=True)
            for n in range(self.conversations)
        ]
        start = time.monotonic()
        for t in threads:
            t.start()
        if during is not None:
            during(start + seconds)
        else:
            self.stop.wait(seconds)
        self.stop.set()
        for t in threads:
            t.join(AST_GREP_DEADLINE + 10)
        return time.monotonic() - start

    def _conversation(self, n: int) -> None:
        run = None
        while run is None and not self.stop.is_set():
            try:
                run = self.rt.open_run(f"c{n}", workdir=str(self.workdir))
            except ResourceError as exc:  # (its supervisor was just killed: again)
                now = time.monotonic()
                self.outcomes.append(Outcome(n, "open_run", now, now, 10.0, exc.code))
        for i in itertools.count(n):
            if self.stop.is_set():
                return
            kind = TYPES[i % len(TYPES)]
            if kind == "ast_grep":
                self.outcomes.append(self._ast_grep(n, run))
            else:
                self.outcomes.append(self._echo(n, kind, idempotent=bool(i % 2)))

    def _echo(self, n: int, kind: str, idempotent: bool) -> Outcome:
        token = next(self.tokens)
        start = time.monotonic()
        try:
            reply = self.rt._call(
                f"c{n}", kind, "k", "echo", {"t": token}, ECHO_TIMEOUT, idempotent=idempotent
            )
        except ResourceError as exc:
            return Outcome(n, kind, start, time.monotonic(), ECHO_TIMEOUT, exc.code)
        wrong = reply.get("echo") != {"t": token}
        return Outcome(n, kind, start, time.monotonic(), ECHO_TIMEOUT, wrong=wrong)

    def _ast_grep(self, n: int, run: Any) -> Outcome:
        start = time.monotonic()
        result = run.call("ast_grep", AST_GREP)
        ended = time.monotonic()
        if result.is_error:
            found = re.search(r"failed \((\w+)\)", result.text)
            code = found.group(1) if found else "tool_error"
            text = "" if found else result.text[:300]
            return Outcome(n, "ast_grep", start, ended, AST_GREP_DEADLINE, code, text=text)
        wrong = result.text != self.expected
        return Outcome(n, "ast_grep", start, ended, AST_GREP_DEADLINE, wrong=wrong)


def roles_now(rt: Runtime) -> dict[str, list[tuple[int, int | None]]]:
    """Role -> [(pid, conversation or None)] of every live process of the runtime."""
    found: dict[str, list[tuple[int, int | None]]] = collections.defaultdict(list)
    found["admin"].append((rt.admin_pid, None))
    found["root"].append((rt.root_pid, None))
    try:
        for child in psutil.Process(rt.admin_pid).children():
            if child.pid != rt.root_pid:
                found["logger"].append((child.pid, None))
    except psutil.Error:
        pass
    try:
        health = rt.health(timeout=10.0)
    except ResourceError:
        return found

    def walk(node: dict[str, Any]) -> None:
        name, kind = node["name"], node["kind"]
        pids = [p["pid"] for p in node.get("pids", []) if p.get("alive")]
        match = re.match(r"run:c(\d+)", name)
        conversation = int(match.group(1)) if match else None
        if pids and kind in ("supervisor", "runs"):
            found[name].append((pids[0], None))
        elif pids and kind == "run":
            found["run"].append((pids[0], conversation))
        elif pids and kind in ("echo", "echo_process", "echo_run", "parser"):
            found[f"actor:{kind}"].append((pids[0], conversation))
            for pid in pids[1:]:
                found[f"process:{kind}"].append((pid, conversation))
        for child in node.get("children", []):
            walk(child)

    for child in health.get("children", []):
        walk(child)
    return found


def kill_order(rng: random.Random, kills: int, roles: list[str]) -> list[str]:
    """Every role in turn (a shuffled cycle), the admin among the first `kills`."""
    order: list[str] = []
    while len(order) < max(kills, 1):
        cycle = list(roles)
        rng.shuffle(cycle)
        order += cycle
    if "admin" in roles and "admin" not in order[:kills]:
        order[rng.randrange(max(kills, 1))] = "admin"
    return order


def chaos(
    load: Load, rng: random.Random, args: argparse.Namespace, kills: list[Kill], seen: Any
) -> Any:
    """What runs beside the load: a SIGKILL every `args.interval` s until its deadline."""
    start, interval = time.monotonic(), args.interval

    def during(deadline: float) -> None:
        # kills at start + k * interval within --duration, each with half an interval left
        # after it; the load goes on to `deadline` (--tail s more) so every kill's recovery
        # is seen
        planned = max(int(args.duration / interval - 0.5), 1)
        for k, role in enumerate(kill_order(rng, planned, args.roles)[:planned]):
            load.stop.wait(max(start + (k + 1) * interval - time.monotonic(), 0))
            seen()
            choices = roles_now(load.rt).get(role, [])
            if not choices:
                print(f"  (no live process for {role}; skipped)", flush=True)
                continue
            pid, conversation = rng.choice(choices)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            kills.append(Kill(time.monotonic(), role, pid, conversation))
            print(f"  t={kills[-1].at - start:5.1f}s SIGKILL {role} (pid {pid})", flush=True)
        load.stop.wait(max(deadline - time.monotonic(), 0))
        seen()

    return during


def recovery(
    outcomes: list[Outcome], kill: Kill, until: float, conversations: int
) -> tuple[float, float, str]:
    """(until the first, until every) affected conversation works again: answered by what
    the killed process served, in a call that started after its last failed call (one that
    ended after the kill and before `until`, the next kill); inf if never. A call
    answered by the dying tree right after the kill is not a recovery. Also: which
    conversation and call type was the last."""
    types, own_only = AFFECTS[kill.role]
    who = (
        [kill.conversation] if own_only and kill.conversation is not None else range(conversations)
    )
    times: list[tuple[float, str]] = []
    for conversation in who:
        for kind in types:
            mine = [
                o
                for o in outcomes
                if o.conversation == conversation and o.type == kind and o.ended > kill.at
            ]
            failed = [o.ended for o in mine if (o.code or o.wrong) and o.ended < until]
            since = max(failed, default=kill.at)
            back = [o.ended for o in mine if not (o.code or o.wrong) and o.started >= since]
            took = min(back) - kill.at if back else float("inf")
            times.append((took, f"c{conversation} {kind}"))
    last = max(times)
    return min(times)[0], last[0], last[1]


def report(name: str, load: Load, span: float) -> dict[str, Any]:
    outs = load.outcomes
    answered = [o for o in outs if not o.code]
    late = [o for o in outs if o.ended - o.started > o.deadline + SLACK]
    errors = collections.Counter(o.code for o in outs if o.code)
    durations = sorted(o.ended - o.started for o in outs)
    result: dict[str, Any] = {
        "calls": len(outs),
        "calls_per_s": len(outs) / span,
        "answered_per_s": len(answered) / span,
        "errors": dict(errors),
        "late": len(late),
        "wrong": sum(o.wrong for o in outs),
        "p50_ms": 1000 * statistics.median(durations) if durations else 0.0,
        "max_s": durations[-1] if durations else 0.0,
    }
    result["per_type"] = {
        kind: {
            "calls": len(mine),
            "p50_ms": 1000 * statistics.median(d)
            if (d := [o.ended - o.started for o in mine])
            else 0,
        }
        for kind in TYPES
        if (mine := [o for o in outs if o.type == kind])
    }
    t0 = min((o.started for o in outs), default=0.0)
    windows = collections.Counter(int((o.ended - t0) // WINDOW) for o in answered)
    result["answered_per_s_by_window"] = [
        windows.get(w, 0) / WINDOW for w in range(int(span // WINDOW) + 1)
    ]
    print(
        f"{name}: {result['calls']} calls in {span:.1f} s = {result['calls_per_s']:.0f} calls/s "
        f"({result['answered_per_s']:.0f} answered/s), p50 {result['p50_ms']:.1f} ms, "
        f"slowest {result['max_s']:.2f} s; errors {dict(errors) or 'none'}; "
        f"past deadline {result['late']}; wrong replies {result['wrong']}"
    )
    for text in sorted({o.text for o in outs if o.text})[:3]:
        print(f"  a tool error without a code: {text!r}")
    per_type = ", ".join(
        f"{k} {v['calls']} ({v['p50_ms']:.1f} ms)" for k, v in result["per_type"].items()
    )
    print(f"  calls (p50) per type: {per_type}")
    timeline = " ".join(f"{x:.0f}" for x in result["answered_per_s_by_window"])
    print(f"  answered/s per {WINDOW:g} s: {timeline}")
    return result


def workspace() -> Path:
    """A copy of some of tether's own sources for ast_grep to search (the supervisors and
    actors: ~14 files, ~3000 lines)."""
    root = Path(tempfile.mkdtemp(prefix="tether-chaos-"))
    source = Path(__file__).resolve().parent.parent / "tether"
    for part in ("supervisors", "actors"):
        shutil.copytree(
            source / part, root / "tether" / part, ignore=shutil.ignore_patterns("__pycache__")
        )
    return root


def one_load(args: argparse.Namespace, faults: bool, rng: random.Random) -> dict[str, Any]:
    kinds = [*RESOURCE_KIND_MODULES, "tether.actors.echo"]
    root = workspace()
    rt = Runtime.start(kind_modules=kinds)
    seen: dict[int, psutil.Process] = {}

    def remember() -> None:  # (the tree's processes: its subprocesses are descendants too)
        for proc in rt._tree_processes():
            seen.setdefault(proc.pid, proc)

    try:
        probe = rt.open_run("probe", workdir=str(root)).call("ast_grep", AST_GREP)
        assert not probe.is_error, probe.text
        load = Load(rt, args.conversations, root, probe.text)
        kills: list[Kill] = []
        remember()
        during = chaos(load, rng, args, kills, remember) if faults else None
        seconds = args.duration + args.tail if faults else args.baseline_duration
        span = load.run(seconds, during)
        remember()
        name = "with faults" if faults else "baseline (no faults)"
        result = report(name, load, span)
        if faults:  # (the tail after the kills aside)
            t0 = min((o.started for o in load.outcomes), default=0.0)
            window = [o for o in load.outcomes if o.ended - t0 <= args.duration]
            result["calls_per_s_during_kills"] = len(window) / args.duration
            print(f"  during the kills: {result['calls_per_s_during_kills']:.0f} calls/s")
        result["kills"] = []
        for i, kill in enumerate(kills):
            until = kills[i + 1].at if i + 1 < len(kills) else float("inf")
            first, every, last = recovery(load.outcomes, kill, until, args.conversations)
            result["kills"].append(
                {
                    "role": kill.role,
                    "pid": kill.pid,
                    "first_s": first,
                    "every_s": every,
                    "last": last,
                }
            )
        if faults:
            print("time to recover per kill (first / every affected conversation answered again):")
            for k in result["kills"]:
                print(
                    f"  {k['role']:24s} {k['first_s']:6.2f} s / {k['every_s']:6.2f} s"
                    f"  (last: {k['last']})"
                )
            print(f"tree rebuilds: {rt.health()['restarts']}")
    finally:
        remember()
        rt.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    deadline = time.monotonic() + 5.0
    while alive(list(seen.values())) and time.monotonic() < deadline:
        psutil.wait_procs(alive(list(seen.values())), timeout=0.1)
    left = alive(list(seen.values()))
    left += [p for p in processes_with_token(rt._token) if p.pid not in seen]  # (escaped)
    result["orphans"] = [(p.pid, " ".join(p.cmdline()[:3])) for p in left]
    print(f"processes seen {len(seen)}, left after shutdown: {len(left)} {result['orphans']}")
    for proc in left:  # (a benchmark leaves nothing either)
        proc.kill()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=30)
    parser.add_argument("--duration", type=float, default=60.0, help="s of load with faults")
    parser.add_argument("--baseline-duration", type=float, default=None, help="default: same")
    parser.add_argument("--interval", type=float, default=5.0, help="s between kills")
    parser.add_argument(
        "--tail", type=float, default=10.0, help="s of load after the kills, to see them heal"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--roles",
        default=",".join(AFFECTS),
        help=f"comma-separated roles to kill (default: all of {', '.join(AFFECTS)})",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    args.roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    unknown = sorted(set(args.roles) - set(AFFECTS))
    if unknown or not args.roles:
        parser.error(f"unknown roles {unknown}; roles: {', '.join(AFFECTS)}")
    if args.baseline_duration is None:
        args.baseline_duration = args.duration
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(
        f"{args.conversations} conversations, {args.duration:g} s with a kill every "
        f"{args.interval:g} s (seed {seed}); load average {os.getloadavg()[0]:.2f} on "
        f"{os.cpu_count()} cores"
    )
    rng = random.Random(seed)
    baseline = one_load(args, faults=False, rng=rng)
    faulted = one_load(args, faults=True, rng=rng)
    base = baseline["calls_per_s"] or 1.0
    print(
        f"calls/s with faults / without: {faulted['calls_per_s'] / base:.2f} "
        f"(during the kills: {faulted['calls_per_s_during_kills'] / base:.2f})"
    )
    ok = faulted["late"] == 0 and faulted["wrong"] == 0 and not faulted["orphans"]
    ok = ok and all(k["every_s"] < 10.0 for k in faulted["kills"])
    print(
        "targets (0 past deadline, 0 wrong replies, 0 orphans, every kill recovered within "
        f"10 s): {'met' if ok else 'NOT met'}"
    )
    if args.json:
        args.json.write_text(json.dumps({"seed": seed, "baseline": baseline, "faults": faulted}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
