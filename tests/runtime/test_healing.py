"""The tree heals: SIGKILL any supervisor, the root, thespian's admin or its logger, under
load, and the tool works again; health tells the truth meanwhile.

A supervisor is restarted by its parent and found again by the host (through the root,
which holds a lookup until the supervisor is up). The admin, its logger and the root have
no parent in the tree: the host watches them (tether.host.tree_watch), fails the calls open on
the old tree at once, and boots a new one. Every call ends before its deadline, no reply
is ever handed to the wrong call, and nothing is left running after shutdown.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass, field

import psutil
import pytest

from tests.conftest import gone, health_node, wait_until
from tether.messages.calls import ErrorCode, ResourceError
from tether.messages.echo_ops import Echo

ECHO_KINDS = ["tether.actors.echo"]
CALL_TIMEOUT = 3.0
SLACK = 0.5  # s a call may end after its deadline (thread scheduling on a busy machine)


def echo_runtime(runtime_factory):
    return runtime_factory(kind_modules=ECHO_KINDS)


def pid_of(rt, name: str) -> int:
    """The pid of a tree node: "admin", "logger", "root", or a name as health shows it."""
    if name == "admin":
        return rt.admin_pid
    if name == "root":
        return rt.root_pid
    if name == "logger":
        others = [p for p in psutil.Process(rt.admin_pid).children() if p.pid != rt.root_pid]
        assert len(others) == 1, others
        return others[0].pid
    node = wait_until(lambda: health_node(rt.health(), name), timeout=5.0)
    return node["pids"][0]["pid"]


def kill(pid: int) -> float:
    os.kill(pid, signal.SIGKILL)
    return time.monotonic()


@dataclass
class Outcome:
    started: float
    ended: float
    kind: str
    code: str = ""  # "" when answered
    message: str = ""
    wrong: bool = False  # answered with what another call asked for


@dataclass
class Load:
    """Threads calling the echo kinds in a loop (shared in-process, shared with a
    subprocess, run-scoped), each call with its own token that the answer must carry."""

    rt: object
    threads: int = 4
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=itertools.count)

    KINDS = ("echo", "echo_process", "echo_run")

    def start(self) -> Load:
        for n in range(self.threads):
            worker = threading.Thread(target=self._loop, args=(f"c{n % 2}", n), daemon=True)
            worker.start()
            self._workers.append(worker)
        return self

    def stop(self) -> list[Outcome]:
        self._stop.set()
        for worker in self._workers:
            worker.join(CALL_TIMEOUT + 5)
            assert not worker.is_alive(), "a caller thread never came back"
        return self.outcomes

    def _loop(self, run: str, n: int) -> None:
        for i in itertools.count():
            if self._stop.is_set():
                return
            kind = self.KINDS[(n + i) % len(self.KINDS)]
            self.outcomes.append(self.one(run, kind, idempotent=bool(i % 2)))

    def one(self, run: str, kind: str, idempotent: bool = False) -> Outcome:
        token = next(self._ids)
        start = time.monotonic()
        try:
            reply = self.rt.call(
                run, kind, "k", Echo({"token": token}, idempotent=idempotent), None, CALL_TIMEOUT
            )
        except ResourceError as exc:
            return Outcome(start, time.monotonic(), kind, exc.code, exc.message)
        return Outcome(start, time.monotonic(), kind, wrong=reply["echo"] != {"token": token})

    def recovered(self, after: float) -> float:
        """Seconds from `after` until every kind answered a call that started after it."""
        firsts = []
        for kind in self.KINDS:
            answered = [o.ended for o in self.outcomes if o.kind == kind and not o.code]
            answered = [t for t in answered if t > after]
            if not answered:
                return 0.0
            firsts.append(min(answered))
        return max(firsts) - after


def check_outcomes(outcomes: list[Outcome], allowed: set[str]) -> None:
    assert outcomes, "the load made no calls"
    assert not [o for o in outcomes if o.wrong], "a reply reached the wrong call"
    late = [o for o in outcomes if o.ended - o.started > CALL_TIMEOUT + SLACK]
    assert not late, f"calls waited past their deadline: {late[:3]}"
    odd = [o for o in outcomes if o.code and o.code not in allowed]
    assert not odd, f"unexpected errors: {odd[:3]}"


# --- supervisors: restarted by their parent, found again by the host ---------------------

SUPERVISORS = ["supervisor:echo", "supervisor:echo_process", "runs", "run:c0"]


@pytest.mark.parametrize("victim", SUPERVISORS)
def test_a_supervisor_killed_mid_load_is_found_again(runtime_factory, victim) -> None:
    rt = echo_runtime(runtime_factory)
    load = Load(rt).start()
    wait_until(lambda: load.recovered(0.0), timeout=5.0)
    old = pid_of(rt, victim)
    killed = kill(old)
    wait_until(lambda: load.recovered(killed), timeout=10.0)
    took = load.recovered(killed)
    time.sleep(0.3)  # (more load on the healed tree)
    outcomes = load.stop()
    # a plain call open on an actor that died with its supervisor hears resource_died; a
    # call arriving while its resource restarts hears restarting: never a deadline
    check_outcomes(outcomes, {ErrorCode.RESOURCE_DIED, ErrorCode.RESTARTING})
    assert took < 1.0, f"calls of every kind were answered again only after {took:.2f} s"
    node = health_node(rt.health(), victim)
    assert node["state"] == "ready" and node["restarts"] == 1, node
    assert node["pids"][0]["pid"] != old
    assert "died" in node["last_error"], node


@pytest.mark.parametrize("victim", ["supervisor:echo", "runs"])
def test_the_host_learns_the_restarted_supervisor(runtime_factory, victim) -> None:
    rt = echo_runtime(runtime_factory)
    kind = "echo" if victim.startswith("supervisor") else "echo_run"
    target = ("", "supervisor", "echo") if kind == "echo" else ("", "runs", "")
    reply = rt.call("c0", kind, "k", "pid", {}, 5)
    actor = psutil.Process(reply.get("actor_pid") or reply["pid"])
    kill(pid_of(rt, victim))
    actor.wait(5)  # (its watchdog takes it down with its supervisor)
    # the next call goes through the tree again, and on through the new supervisor
    assert Load(rt).one("c0", kind, idempotent=True).code == ""
    new = pid_of(rt, victim)
    assert wait_until(lambda: rt.engine.routes.get(target), timeout=5.0).pid == new


def test_open_and_close_run_right_after_the_runs_supervisor_restarts(runtime_factory) -> None:
    rt = echo_runtime(runtime_factory)
    rt.open_run("before")
    kill(pid_of(rt, "runs"))
    start = time.monotonic()
    rt.open_run("after")  # (the host's route to "runs" is the dead one: it asks again)
    rt.close_run("before")
    took = time.monotonic() - start
    assert took < 1.0, f"open and close took {took:.2f} s"
    assert rt.call("after", "echo_run", "k", "echo", {"x": 1}, 5)["echo"] == {"x": 1}
    assert health_node(rt.health(), "runs")["restarts"] == 1


def test_health_never_says_ready_for_a_dead_supervisor(runtime_factory) -> None:
    rt = echo_runtime(runtime_factory)
    rt.call("c0", "echo_run", "k", "echo", {}, 5)
    victim = pid_of(rt, "run:c0")
    # stop its parent so that it cannot notice the death: health must see it anyway
    parent = pid_of(rt, "runs")
    os.kill(parent, signal.SIGSTOP)
    try:
        kill(victim)
        wait_until(lambda: gone([victim]), timeout=10.0)
    finally:
        os.kill(parent, signal.SIGCONT)
    node = health_node(rt.health(), "run:c0")
    assert node is None or node["state"] != "ready", node
    healed = wait_until(
        lambda: (
            (health_node(rt.health(), "run:c0") or {}).get("state") == "ready"
            or rt.call("c0", "echo_run", "k", "echo", {}, 5)
        ),
        timeout=5.0,
    )
    assert healed


# --- the top of the tree: the host rebuilds it --------------------------------------------


def test_tree_watch_reports_the_first_death_at_once_and_nothing_after_stop() -> None:
    import subprocess
    import sys

    from tether.host.tree_watch import TreeWatch
    from tether.processes import proc_create_time

    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in "ab"]
    try:
        seen: list[tuple[str, int, float]] = []
        watched = {
            role: (p.pid, proc_create_time(p.pid)) for role, p in zip("ab", procs, strict=True)
        }
        watch = TreeWatch(watched, lambda role, pid: seen.append((role, pid, time.monotonic())))
        watch.start()
        killed = kill(procs[1].pid)
        wait_until(lambda: seen, timeout=10.0)
        assert [s[:2] for s in seen] == [("b", procs[1].pid)]
        assert seen[0][2] - killed < 0.1
        quiet: list = []
        other = TreeWatch({"a": watched["a"]}, lambda *a: quiet.append(a))
        other.start()
        other.stop()
        other.join(2.0)
        kill(procs[0].pid)
        procs[0].wait(5)
        assert quiet == []
    finally:
        for p in procs:
            p.kill()
            p.wait()


TOP = ["root", "admin", "logger"]


@pytest.mark.parametrize("victim", TOP)
def test_the_tree_is_rebuilt_when_its_top_dies_mid_load(runtime_factory, victim) -> None:
    rt = echo_runtime(runtime_factory)
    rt.open_run("c0")
    load = Load(rt).start()
    wait_until(lambda: load.recovered(0.0), timeout=5.0)
    old_admin = rt.admin_pid
    # a slow call in flight on the old tree: it must fail at once, not at its deadline
    slow: list = []
    sleeper = threading.Thread(target=lambda: slow.append(_slow_call(rt)))
    sleeper.start()
    wait_until(lambda: (health_node(rt.health(), "echo:slow") or {}).get("pending"), timeout=10.0)
    killed = kill(pid_of(rt, victim))
    sleeper.join(10)
    wait_until(lambda: load.recovered(killed), timeout=10.0)
    took = load.recovered(killed)
    time.sleep(0.3)
    outcomes = load.stop()
    check_outcomes(outcomes, {ErrorCode.RESOURCE_DIED, ErrorCode.RESTARTING})
    code, message, ended = slow[0]
    assert code == ErrorCode.RESTARTING, (code, message)
    assert message.startswith("the actor system's "), message
    assert "rebuilding its actor tree - call again" in message, message
    assert ended - killed < 1.0, f"the open call heard it {ended - killed:.2f} s after the kill"
    assert took < 10.0
    assert rt.admin_pid != old_admin
    health = rt.health()
    assert health["state"] == "ready" and health["restarts"] == 1, health
    assert health["last_error"].startswith("rebuilt in "), health["last_error"]
    # a run opened before works, and can be closed and opened again
    assert rt.call("c0", "echo_run", "k", "echo", {"x": 2}, 5)["echo"] == {"x": 2}
    rt.close_run("c0")
    rt.open_run("c0")
    assert rt.call("c0", "echo_run", "k", "echo", {"x": 3}, 5)["echo"] == {"x": 3}


def _slow_call(rt) -> tuple[str, str, float]:
    try:
        rt.call("c0", "echo", "slow", "sleep", {"seconds": 8}, 9)
    except ResourceError as exc:
        return exc.code, exc.message, time.monotonic()
    return "", "answered", time.monotonic()


def _answers_after_rebuild(rt) -> bool:
    """A call answers; while the tree is rebuilt it may hear, as the load's calls do, that
    its actor died with the old tree or that the tree is rebuilding (both say: call again)."""
    try:
        return bool(rt.call("c0", "echo_process", "k", "echo", {}, 5))
    except ResourceError as exc:
        if exc.code in (ErrorCode.RESOURCE_DIED, ErrorCode.RESTARTING):
            return False
        raise


def test_the_old_trees_processes_are_gone_after_a_rebuild(runtime_factory) -> None:
    rt = echo_runtime(runtime_factory)
    rt.call("c0", "echo_process", "k", "echo", {}, 5)
    rt.call("c0", "echo_run", "k", "echo", {}, 5)
    old = [p for p in psutil.Process(rt.admin_pid).children(recursive=True)]
    old.append(psutil.Process(rt.admin_pid))
    kill(rt.root_pid)
    wait_until(lambda: _answers_after_rebuild(rt), timeout=10.0)
    gone = wait_until(lambda: not [p for p in old if p.is_running() and p.status() != "zombie"])
    assert gone


def test_the_host_gives_up_after_too_many_rebuilds(runtime_factory, monkeypatch) -> None:
    import tether.host.healing as runtime_module

    monkeypatch.setattr(runtime_module, "MAX_REBUILDS", 1)
    rt = echo_runtime(runtime_factory)
    kill(rt.admin_pid)
    wait_until(lambda: rt.health()["restarts"] == 1, timeout=10.0)
    kill(rt.admin_pid)
    health = wait_until(lambda: (h := rt.health())["state"] == "failed" and h, timeout=10.0)
    assert "could not be rebuilt (1 rebuilds in 60 s)" in health["last_error"], health
    with pytest.raises(ResourceError) as info:
        rt.call("c0", "echo", "k", "echo", {}, 2)
    assert info.value.code == ErrorCode.UNAVAILABLE
    assert "shut this runtime down and start a new one" in info.value.message
