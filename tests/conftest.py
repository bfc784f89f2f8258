"""Shared fixtures: a started `Runtime` that is always shut down and leaves no orphans.

    def test_something(runtime):             # a fresh Runtime (every kind + echo)
        runtime.call("r", "echo", "k", "echo", {}, 5)

    def test_other(runtime_factory):         # several, or with custom kinds
        rt = runtime_factory(kinds=[...])

After the test, the fixture shuts the runtime down and asserts that no process it started
is still alive (psutil). `wait_until(predicate, timeout)` is the bounded poll to wait with.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# the census (on only with TETHER_CENSUS set: which tests start a real server, kernel or
# adapter) and the longest-module-first order for the xdist workers
pytest_plugins = ["tests.component_census", "tests.module_order"]


# the longest pause between two polls: a predicate often walks the tree's health (psutil
# over every process), and the suite is CPU-bound, so a long wait polls less often
POLL_CAP = 0.1


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> Any:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout` s.
    The first pause is `interval`; each next one is half again as long, up to POLL_CAP (or
    `interval`, if that is longer)."""
    deadline = time.monotonic() + timeout
    cap = max(interval, POLL_CAP)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate}")
        time.sleep(interval)
        interval = min(interval * 1.5, cap)


def gone(pids: list[int]) -> bool:
    """Every pid has exited (or is a zombie awaiting its parent). A pid may exit between
    any two psutil calls, so each lookup is guarded: a vanished process counts as gone."""
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def health_node(health: dict, name: str) -> dict | None:
    """The node named `name` (as rt.health() names actors) in a health tree, or None."""
    if health.get("name") == name:
        return health
    for child in health.get("children", []):
        found = health_node(child, name)
        if found:
            return found
    return None


def in_flight(rt: Any, name: str, timeout: float = 3.0) -> dict:
    """Wait (bounded) until the actor `name` holds a call, as its health reports it."""
    return wait_until(
        lambda: (health_node(rt.health(), name) or {}).get("pending", 0) >= 1, timeout=timeout
    )


def runtime_processes(rt: Any) -> list[psutil.Process]:
    """Every live process of a runtime: thespian's admin, the actors, their subprocesses."""
    return rt.processes()


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    from tether.processes import still_running

    return [p for p in procs if still_running(p)]


def described(procs: list[psutil.Process]) -> list[str]:
    """pid, state, parent and title (what ps shows) of each of `procs` still there: what a
    test that expected them gone says of them."""
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            title = " ".join(" ".join(proc.cmdline()).split())  # (a title is padded)
            out.append(f"{proc.pid} {proc.status()} (parent {proc.ppid()}): {title}")
    return out


def state_dir_processes(state_dir: Path) -> list[psutil.Process]:
    """Every live process of the runtimes whose port files are in `state_dir`, found the way
    a runtime finds its own (`rt.processes()`: tether.host.accounting.ProcessAccount, the
    admin's session and descendants, and whatever carries the token) from what each port
    file records: for a runtime in another process that cannot be asked (a host the test
    kills; its port file stays)."""
    from tether.host.accounting import Admin, ProcessAccount
    from tether.host.portfile import port_files, read_port_file

    found: dict[int, psutil.Process] = {}
    for path in port_files(state_dir):
        rec = read_port_file(path)
        account = ProcessAccount(str(rec["token"]))
        account.admin = Admin(
            pid=int(rec["admin_pid"]),
            create_time=float(rec["admin_create_time"]),
            sid=int(rec["admin_sid"]),
            root_pid=int(rec["root_pid"]),
        )
        found.update((p.pid, p) for p in account.processes())
    return alive(list(found.values()))


def shutdown_without_orphans(rt: Any, timeout: float = 10.0) -> None:
    """Shut `rt` down; fail if any of its processes is alive 5 s later (the check
    `tether chaos` makes too: Runtime.left_behind)."""
    if rt.closed:
        return
    procs = rt.processes()
    assert procs, "a running runtime has at least its admin process"
    rt.shutdown(timeout=timeout)
    left = rt.left_behind(procs, wait=5.0)
    assert not left, f"orphans after shutdown: {[(p.pid, p.cmdline()) for p in left]}"


@pytest.fixture(scope="session")
def tether_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tether-state")
    os.environ["TETHER_STATE_DIR"] = str(path)
    return path


def start_options(state_dir: Path, /, **kwargs: Any) -> dict[str, Any]:
    """Runtime.start's options for a test: its state dir (unless it gives one) and, unless
    it names its kinds, every production kind plus the echo kinds tests talk to."""
    from tether.runtime import RESOURCE_KIND_MODULES

    kwargs.setdefault("state_dir", state_dir)
    if "kinds" not in kwargs:
        kwargs.setdefault("kind_modules", [*RESOURCE_KIND_MODULES, "tether.actors.echo"])
    return kwargs


@pytest.fixture
def runtime_factory(tether_state_dir: Path) -> Iterator[Callable[..., Any]]:
    from tether.runtime import Runtime

    started: list[Any] = []

    def make(**kwargs: Any) -> Any:
        rt = Runtime.start(**start_options(tether_state_dir, **kwargs))
        started.append(rt)
        return rt

    yield make
    for rt in started:
        shutdown_without_orphans(rt)


@pytest.fixture
def runtime(runtime_factory: Callable[..., Any]) -> Any:
    return runtime_factory()


# --- one runtime for a module's tests --------------------------------------------------
# A test that kills, injects faults into, restarts, shuts down or counts the processes of
# the tree, sets kinds or options of its own, or reads the tree's initial state takes the
# `runtime`/`runtime_factory` fixtures above. A test a fresh tree proves nothing for takes
# `shared`: the module's runtime (`shared_tree`, a module fixture a test module may
# override with its kinds), with run ids of its own, its runs closed at its end.

HEALTHY_STATES = frozenset({"ready", "busy"})


def tree_problems(health: dict, prefix: str = "") -> list[str]:
    """What keeps a shared tree from serving the next test as a fresh one would: a node
    not ready, restarted (the root's restarts are the host's rebuilds), holding a call,
    or a run of the test with run ids starting with `prefix` still open."""
    found: list[str] = []

    def walk(node: dict) -> None:
        name = node.get("name", "?")
        if node.get("state") not in HEALTHY_STATES:
            found.append(f"{name}: {node.get('state')} ({node.get('last_error') or 'no error'})")
        if node.get("restarts"):
            found.append(f"{name}: restarted {node['restarts']} times ({node.get('last_error')})")
        if node.get("pending"):
            found.append(f"{name}: {node['pending']} calls open")
        if prefix and name.startswith(f"run:{prefix}"):
            found.append(f"{name}: its run was closed, it is still there")
        for child in node.get("children", []):
            walk(child)

    walk(health)
    return found


class SharedTest:
    """One test's view of the module's runtime: `rt`, and run ids no other test uses
    (`run_id(name)`, `open_run(name, ...)`, `call(name, ...)`); its runs are closed when
    the test ends."""

    def __init__(self, rt: Any, prefix: str) -> None:
        self.rt = rt
        self.prefix = prefix
        self.run_ids: list[str] = []
        self.runs: list[Any] = []

    def run_id(self, name: str) -> str:
        run_id = f"{self.prefix}{name}"
        if run_id not in self.run_ids:
            self.run_ids.append(run_id)
        return run_id

    def open_run(self, name: str, **options: Any) -> Any:
        run = self.rt.open_run(self.run_id(name), **options)
        self.runs.append(run)
        return run

    def call(self, run: str, *call: Any, **options: Any) -> Any:
        """`Runtime.call` in this test's run `run` (named as for `run_id`)."""
        return self.rt.call(self.run_id(run), *call, **options)

    def close(self) -> None:
        for run in self.runs:
            run.close()
        for run_id in self.run_ids:
            self.rt.close_run(run_id)


class SharedTree:
    """A runtime shared by the tests of one module. Each test starts on a healthy tree
    (`tree_problems` finds nothing); a test that leaves it otherwise (a node failed or
    restarted, a call still open, a run not gone) fails in its teardown, saying what it
    left, and the next test gets a new runtime: one test's fault never reaches another."""

    def __init__(self, state_dir: Path, **start: Any) -> None:
        self.start = start_options(state_dir, **start)
        self.rt: Any = None
        self.tests = 0
        self.last = "the runtime's start"  # the test that had it last
        self.settle: Callable[[Any], None] = lambda rt: None  # e.g. wait for a spare

    def runtime(self) -> Any:
        from tether.runtime import Runtime

        if self.rt is None or self.rt.closed:
            self.rt = Runtime.start(**self.start)
            self.settle(self.rt)
        return self.rt

    def problems(self, prefix: str = "", timeout: float = 15.0) -> list[str]:
        """What is wrong with the tree, after waiting (bounded) for it to settle."""
        try:
            wait_until(lambda: not tree_problems(self.rt.health(), prefix), timeout, 0.1)
            return []
        except AssertionError:  # (still unsettled: say what)
            return tree_problems(self.rt.health(), prefix)

    def test(self, name: str) -> Iterator[SharedTest]:
        rt = self.runtime()
        found = self.problems()
        if found:  # (a fault that showed only after the last test's end: not this test's)
            self.replace()
            raise AssertionError(f"{self.last} left the shared runtime unhealthy: {found}")
        self.tests += 1
        self.last = name
        view = SharedTest(rt, f"t{self.tests}-")
        yield view
        if rt.closed:
            self.rt = None
            raise AssertionError("a test on the shared runtime shut it down: use `runtime`")
        try:
            view.close()
            found = self.problems(view.prefix)
        except Exception:  # a tree that cannot close a run or answer health serves no one
            self.replace()
            raise
        if found:
            self.replace()
            raise AssertionError(f"the test left the shared runtime unhealthy: {found}")
        self.settle(rt)

    def replace(self) -> None:
        rt, self.rt = self.rt, None
        shutdown_without_orphans(rt)

    def close(self) -> None:
        if self.rt is not None:
            shutdown_without_orphans(self.rt)


@pytest.fixture(scope="module")
def shared_tree(tether_state_dir: Path) -> Iterator[SharedTree]:
    """The module's runtime (every kind + echo); override it for other kinds."""
    tree = SharedTree(tether_state_dir)
    yield tree
    tree.close()


@pytest.fixture
def shared(shared_tree: SharedTree, request: pytest.FixtureRequest) -> Iterator[SharedTest]:
    """The module's runtime, healthy, with run ids of this test's own (SharedTree)."""
    yield from shared_tree.test(request.node.nodeid)
