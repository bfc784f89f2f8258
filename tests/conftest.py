"""Shared fixtures: a started `Runtime` that is always shut down and leaves no orphans.

    def test_something(runtime):             # a fresh Runtime (every kind + echo)
        runtime.call("r", "echo", "k", "echo", {}, 5)

    def test_other(runtime_factory):         # several, or with custom kinds
        rt = runtime_factory(kinds=[...])

After the test, the fixture shuts the runtime down and asserts that no process it started
is still alive (psutil). `wait_until(predicate, timeout)` is the bounded poll to wait with.
"""

from __future__ import annotations

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


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> Any:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate}")
        time.sleep(interval)


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


@pytest.fixture
def runtime_factory(tether_state_dir: Path) -> Iterator[Callable[..., Any]]:
    from tether.runtime import RESOURCE_KIND_MODULES, Runtime

    started: list[Any] = []

    def make(**kwargs: Any) -> Any:
        kwargs.setdefault("state_dir", tether_state_dir)
        if "kinds" not in kwargs:  # every production kind plus the echo kinds tests talk to
            kwargs.setdefault("kind_modules", [*RESOURCE_KIND_MODULES, "tether.actors.echo"])
        rt = Runtime.start(**kwargs)
        started.append(rt)
        return rt

    yield make
    for rt in started:
        shutdown_without_orphans(rt)


@pytest.fixture
def runtime(runtime_factory: Callable[..., Any]) -> Any:
    return runtime_factory()
