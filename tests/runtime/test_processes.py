"""Thespian's traps, measured on real processes: loopback only, no orphans, no collisions."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from subprocess import PIPE

import psutil
import pytest

from tests.conftest import alive, described, runtime_processes, wait_until
from tether import processes
from tether.host.boot import admin_sessions_started
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.processes import (
    carries_token,
    children,
    descendants,
    kill_tree,
    owner_pidfds,
    process_info,
    processes_with_token,
    session_processes,
    title_tree_process,
    tree_process_name,
    tree_process_title,
)
from tether.runtime import KindLoadError, Runtime, RuntimeStartError, load_kinds

ROOT = Path(__file__).resolve().parents[2]
AS_ROOT = pytest.mark.skipif(
    os.getuid() != 0, reason="making a file another user's (chown) needs the tests to run as root"
)


ECHO = ["tether.actors.echo"]  # (the kinds a test of the tree's own processes calls)


@pytest.fixture
def runtime(runtime_factory):
    """A fresh tree of the echo kinds: what these tests call (every other kind's supervisor
    would be booted and stopped for nothing). A test of the whole tree asks for it."""
    return runtime_factory(kind_modules=ECHO)


def listening(proc: psutil.Process) -> list:
    try:
        return [c for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    except psutil.NoSuchProcess:
        return []


def test_every_listening_socket_is_on_loopback(runtime_factory) -> None:
    runtime = runtime_factory()  # (every kind's supervisor: every socket the tree opens)
    runtime.call("r1", "echo", "k", "echo", {}, 5)
    runtime.call("r1", "echo_run", "k", "echo", {}, 5)
    sockets = [c for p in [psutil.Process(), *runtime_processes(runtime)] for c in listening(p)]
    assert len(sockets) >= 6  # admin, root, supervisors, run, actors, the host's endpoint
    assert {c.laddr.ip for c in sockets} == {"127.0.0.1"}
    assert any(c.laddr.port == runtime.admin_port for c in sockets)


def _host_endpoint_ips() -> set[str]:
    """The listening addresses of an endpoint thespian's TCP transport opens in this process
    (the one a host talks to its actor system through), closed again at once."""
    from thespian.system.transport import ExternalInterfaceTransportInit
    from thespian.system.transport.TCPTransport import TCPTransport

    before = {(c.laddr.ip, c.laddr.port) for c in listening(psutil.Process())}
    endpoint = TCPTransport(ExternalInterfaceTransportInit(), {"Admin Port": 1900}, None, None)
    try:
        now = {(c.laddr.ip, c.laddr.port) for c in listening(psutil.Process())}
    finally:
        endpoint.close()
    return {ip for ip, _ in now - before}


def test_the_loopback_check_would_catch_a_socket_on_every_interface(monkeypatch) -> None:
    # the control for the test above: with the patch undone, thespian binds 0.0.0.0 and the
    # same listening-socket check sees it
    from thespian.system.transport import IPBase

    assert _host_endpoint_ips() == {"127.0.0.1"}
    monkeypatch.setattr(
        IPBase.IPActorAddress, "__init__", IPBase.IPActorAddress.__init__.__wrapped__
    )
    assert _host_endpoint_ips() == {"0.0.0.0"}


def test_runtimes_started_in_parallel_never_collide(runtime_factory) -> None:
    runtimes: list[Runtime] = []
    failures: list[BaseException] = []

    def start() -> None:
        try:
            runtimes.append(runtime_factory(kind_modules=ECHO))
        except BaseException as exc:  # noqa: BLE001 - shown by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert failures == []
    assert len({rt.admin_port for rt in runtimes}) == 3
    pids = [rt.call("r", "echo", "k", "pid", {}, 5)["pid"] for rt in runtimes]
    assert len(set(pids)) == 3


def test_a_boot_whose_admin_never_answers_is_cleaned_up_and_retried(
    monkeypatch, runtime_factory
) -> None:
    # the admin comes up, then thespian says it is not usable (what a wedged or killed admin
    # looks like): the start kills that admin and its session, and boots on another port
    from thespian.actors import InvalidActorAddress

    import tether.host.boot as runtime_module

    real = runtime_module.ActorSystem
    first: dict = {}

    def flaky(*args, **kwargs):
        system = real(*args, **kwargs)
        if not first:
            first["port"] = kwargs["capabilities"]["Admin Port"]
            first["sid"] = os.getsid(_listener(first["port"]))
            raise InvalidActorAddress(first["port"], "not a valid or useable ActorSystem Admin")
        return system

    monkeypatch.setattr(runtime_module, "ActorSystem", flaky)
    rt = runtime_factory(kind_modules=ECHO)
    assert rt.admin_port != first["port"]
    assert rt.call("r", "echo", "k", "echo", {"x": 1}, 5)["echo"] == {"x": 1}
    wait_until(lambda: not session_processes(first["sid"], 0.0), timeout=5.0)  # nothing left of it
    assert session_processes(os.getsid(rt.admin_pid), 0.0)  # and the new one untouched


def test_a_failed_boot_never_touches_another_session(runtime, runtime_factory) -> None:
    # the clean-up of a failed boot finds its admins by this process's own zombie children
    # (thespian's setsid intermediates) made during that boot: never another runtime's
    other = os.getsid(runtime.admin_pid)
    rt = runtime_factory(kind_modules=ECHO)
    mine = admin_sessions_started(rt._children_before_boot)
    assert [sid for sid, _ in mine] == [os.getsid(rt.admin_pid)]
    assert other not in {sid for sid, _ in mine}


def test_an_actor_whose_parent_dies_before_its_start_dies_too(runtime) -> None:
    # a supervisor killed between creating a child and sending it Start (a shutdown race)
    # must not leave the child running: it has no watchdog yet, so the kernel ends it
    from tests.runtime.actors import Spawner

    spawner = runtime._asys.createActor(Spawner)
    parent = runtime._asys.ask(spawner, "spawn", 5.0)
    child = wait_until(lambda: psutil.Process(parent).children(), timeout=5.0)[0]
    os.kill(parent, signal.SIGKILL)
    wait_until(lambda: not alive([child]), timeout=10.0)  # however slowly it was starting


def _listener(port: int) -> int:
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            return int(conn.pid)
    raise AssertionError(f"nothing listens on {port}")


def test_pinned_admin_port_in_use_is_a_clear_error(runtime, tether_state_dir) -> None:
    with pytest.raises(
        RuntimeStartError,
        match=f"admin port {runtime.admin_port} is already in use on 127.0.0.1; pick another port",
    ):
        Runtime.start(admin_port=runtime.admin_port, state_dir=tether_state_dir)


def test_pinned_admin_port(runtime_factory) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rt = runtime_factory(admin_port=port, kind_modules=ECHO)
    assert rt.admin_port == port
    assert rt.call("r", "echo", "k", "echo", {"a": 1}, 5)["echo"] == {"a": 1}


# a parent that forks from a second thread too (which lives on): the kernel lists a child
# under the thread that forked it
FAMILY = """
import os, subprocess, sys, threading, time
sleep = [sys.executable, "-c", "import time; time.sleep(30)"]
inner = [sys.executable, "-c", f"import subprocess, time; subprocess.Popen({sleep!r}); time.sleep(30)"]
kids = [subprocess.Popen(inner)]
threading.Thread(target=lambda: (kids.append(subprocess.Popen(sleep)), time.sleep(30))).start()
print("up", flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("kernel_lists", [True, False], ids=["kernel-list", "psutil-scan"])
def test_children_and_descendants_are_what_psutils_scan_finds(kernel_lists, monkeypatch) -> None:
    monkeypatch.setattr(processes, "_KERNEL_LISTS_CHILDREN", kernel_lists)
    top = subprocess.Popen([sys.executable, "-c", FAMILY], stdout=subprocess.PIPE, text=True)
    try:
        assert top.stdout is not None and top.stdout.readline() == "up\n"
        # (the inner one's child and the thread's come a moment later)
        want = wait_until(
            lambda: len(found := psutil.Process(top.pid).children(recursive=True)) == 3 and found
        )
        assert sorted(p.pid for p in descendants(top.pid)) == sorted(p.pid for p in want)
        kids = {p.pid for p in psutil.Process(top.pid).children()}
        assert len(kids) == 2 and {p.pid for p in children(top.pid)} == kids
        assert descendants(top.pid)[0].pid in kids  # (parents before their children)
    finally:
        kill_tree(top.pid, grace=0)
    assert descendants(top.pid) == [] and children(top.pid) == []


def test_health_says_how_busy_a_process_was_since_it_last_asked() -> None:
    busy, idle = (
        subprocess.Popen([sys.executable, "-c", f"print(1, flush=True)\n{code}"], stdout=PIPE)
        for code in ("while True: pass", "import time; time.sleep(30)")
    )
    try:
        for proc in (busy, idle):  # (started: the first ask starts the count)
            assert proc.stdout is not None and proc.stdout.readline() == b"1\n"
            process_info(proc.pid)
        wait_until(lambda: psutil.Process(busy.pid).cpu_times().user > 0.3)
        # (a fresh psutil.Process said 0.0 for both; how much of a core the busy one had
        # depends on the machine's load: some)
        assert process_info(busy.pid)["cpu"] > 5.0 and process_info(idle.pid)["cpu"] < 5.0
    finally:
        for proc in (busy, idle):
            proc.kill()
            proc.wait()
    assert not process_info(busy.pid)["alive"]


def test_no_orphans_after_shutdown(runtime_factory) -> None:
    rt = runtime_factory()
    for run in ("a", "b"):
        rt.call(run, "echo_run", "k", "echo", {}, 5)
    rt.call("a", "echo_process", "k", "echo", {}, 5)
    procs = runtime_processes(rt)
    assert len(procs) >= 10
    rt.shutdown()
    assert alive(procs) == []  # shutdown() itself waits: nothing is left when it returns


def test_port_file_is_written_and_removed(runtime_factory, tether_state_dir) -> None:
    rt = runtime_factory(kind_modules=ECHO)
    data = json.loads((tether_state_dir / f"{rt.admin_port}.json").read_text())
    assert data["host_pid"] == os.getpid() and data["admin_pid"] == rt.admin_pid
    rt.shutdown()
    assert not (tether_state_dir / f"{rt.admin_port}.json").exists()


HOST = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, {root!r})
    from tether.runtime import Runtime
    rt = Runtime.start(state_dir={state!r}, kind_modules=["tether.actors.echo"])
    rt.call("a", "echo_process", "k", "echo", {{}}, 10)
    rt.call("a", "echo_run", "k", "echo", {{}}, 10)
    pids = []
    def walk(node):
        pids.extend(p["pid"] for p in node["pids"])
        for c in node["children"]:
            walk(c)
    walk(rt.health())
    print(json.dumps({{"pids": pids, "port": rt.admin_port}}), flush=True)
    time.sleep(600)
    """
)


@pytest.mark.slow
def test_no_orphans_after_sigkill_of_the_host(tmp_path) -> None:
    script = HOST.format(root=str(ROOT), state=str(tmp_path))
    host = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = host.stdout.readline()
        info = json.loads(line)
        procs = [psutil.Process(p) for p in set(info["pids"]) if p != host.pid]
        assert len(procs) >= 8
        os.kill(host.pid, signal.SIGKILL)
        host.wait(5)
        start = time.monotonic()
        try:
            wait_until(lambda: not alive(procs), timeout=5.0)
        except AssertionError:
            left = described(alive(procs))
            raise AssertionError(f"alive 5 s after the host's SIGKILL: {left}") from None
        assert time.monotonic() - start < 3.0
        assert Runtime.reap_stale(tmp_path) == [info["port"]]  # the port file of the dead host
        assert list(tmp_path.glob("*.json")) == []
    finally:
        if host.poll() is None:
            host.kill()


def _dead_host_record(port: int, proc: subprocess.Popen, token: str) -> dict:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return {
        "admin_port": port,
        "host_pid": dead.pid,
        "host_create_time": 1.0,
        "admin_pid": proc.pid,
        "admin_create_time": psutil.Process(proc.pid).create_time(),
        "admin_sid": os.getsid(proc.pid),
        "token": token,
    }


def test_reap_stale_kills_what_a_dead_host_left(tmp_path) -> None:
    token = "0123456789ab"
    env = {**os.environ, "TETHER_RUNTIME_TOKEN": token}
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        record = _dead_host_record(12345, leftover, token)
        (tmp_path / "12345.json").write_text(json.dumps(record))
        assert Runtime.reap_stale(tmp_path) == [12345]
        assert leftover.wait(5) is not None
        assert not (tmp_path / "12345.json").exists()
    finally:
        if leftover.poll() is None:
            leftover.kill()


def test_reap_stale_kills_a_forked_tree_process_it_can_prove(tmp_path) -> None:
    # thespian's processes are forked, not exec'd: their environ and cmdline are the
    # host's, and the name they give themselves at fork is the proof
    token = "ba9876543210"
    os.environ["TETHER_RUNTIME_TOKEN"] = token
    try:
        pid = os.fork()
        if pid == 0:  # the child: a stand-in for an admin whose host died
            title_tree_process("tether: admin")  # titled as thespian's admin is
            time.sleep(60)
            os._exit(0)
    finally:
        os.environ.pop("TETHER_RUNTIME_TOKEN")
    try:
        child = psutil.Process(pid)
        wait_until(lambda: child.cmdline()[:1] == ["tether: admin"], timeout=5.0)
        assert child.name() == f"tether-{token[:8]}"  # the title kept the name: the proof
        record = {
            "admin_port": 12345,
            "host_pid": 999999999,
            "host_create_time": 1.0,
            "admin_pid": pid,
            "admin_create_time": child.create_time(),
            "token": token,
        }
        (tmp_path / "12345.json").write_text(json.dumps(record))
        assert Runtime.reap_stale(tmp_path) == [12345]
        wait_until(lambda: not alive([child]), timeout=5.0)
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):  # (the reaper's wait may have reaped it)
            os.waitpid(pid, 0)


def test_a_planted_port_file_gets_no_unrelated_process_killed(tmp_path, tether_state_dir) -> None:
    # a port file naming a process the runtime never started - right pid, right start
    # time, even its session - must not get it killed: it carries no token of ours
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        for name, token in (("12345", "0123456789ab"), ("12346", ""), ("12347", None)):
            record = _dead_host_record(int(name), bystander, token)
            (tether_state_dir / f"{name}.json").write_text(json.dumps(record))
        rt = Runtime.start(state_dir=tether_state_dir, kinds=[])  # reaps at start
        rt.shutdown()
        assert bystander.poll() is None
        assert not list(tether_state_dir.glob("1234?.json"))  # the claims are gone
    finally:
        bystander.kill()
        bystander.wait()


def test_the_runtime_directory_is_private(tmp_path) -> None:
    state = tmp_path / "state"
    rt = Runtime.start(state_dir=state, kinds=[])
    try:
        assert state.stat().st_mode & 0o777 == 0o700
        assert rt.port_file is not None and rt.port_file.stat().st_mode & 0o777 == 0o600
    finally:
        rt.shutdown()
    state.chmod(0o755)  # left open (an older tether made it 0755): closed again
    Runtime.start(state_dir=state, kinds=[]).shutdown()
    assert state.stat().st_mode & 0o777 == 0o700
    link = tmp_path / "link"
    link.symlink_to(state)
    with pytest.raises(RuntimeStartError, match="is a symlink"):
        Runtime.start(state_dir=link, kinds=[])


@AS_ROOT
def test_a_runtime_directory_of_another_user_is_refused(tmp_path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, 65534, 65534)  # nobody's (the tests run as root)
    with pytest.raises(RuntimeStartError, match="belongs to uid 65534"):
        Runtime.start(state_dir=foreign, kinds=[])


@AS_ROOT
def test_port_files_written_by_someone_else_are_ignored(tmp_path) -> None:
    token = "0123456789ab"
    env = {**os.environ, "TETHER_RUNTIME_TOKEN": token}
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        path = tmp_path / "12345.json"
        path.write_text(json.dumps(_dead_host_record(12345, leftover, token)))
        os.chown(path, 65534, 65534)
        assert Runtime.reap_stale(tmp_path) == []
        os.chown(path, os.getuid(), os.getgid())
        path.chmod(0o666)
        assert Runtime.reap_stale(tmp_path) == []
        assert leftover.poll() is None and path.exists()
    finally:
        leftover.kill()
        leftover.wait()


def test_reap_stale_leaves_live_hosts_alone(runtime, tether_state_dir) -> None:
    assert Runtime.reap_stale(tether_state_dir) == []
    assert runtime.call("r", "echo", "k", "echo", {}, 5)["key"] == "k"


def test_owned_process_dies_with_its_actor_even_when_the_actor_is_sigkilled(runtime) -> None:
    info = runtime.call("r", "echo_process", "k", "pid", {}, 5)
    child = psutil.Process(info["pid"])
    os.kill(info["actor_pid"], signal.SIGKILL)
    wait_until(lambda: not alive([child]), timeout=10.0)


def test_release_kills_a_tree_that_ignores_sigterm_without_waiting_on_it(runtime_factory) -> None:
    # release runs in the actor's exit handler: it used to give SIGTERM 0.5 s, then wait up
    # to 1 s more, holding the actor's exit (and the host's news of it) that long
    stubborn = KindSpec(
        "stubborn",
        "tests.runtime.actors:StubbornProcessActor",
        Scope.SHARED,
        ChildSpec(Restart.TRANSIENT),
    )
    rt = runtime_factory(kinds=[stubborn])
    got = rt.call("r", "stubborn", "k", "release", {}, 10)
    assert got["seconds"] < 0.2, got
    procs = []
    for pid in got["pids"]:
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(pid))
    wait_until(lambda: not alive(procs), timeout=10.0)  # the subprocess and its child


def _fds_of(rt, run: str) -> int:
    info = rt.call(run, "echo_run", "k", "pid", {}, 10)
    return psutil.Process(info["actor_pid"]).num_fds()


def test_fds_of_new_actors_do_not_grow_with_their_siblings(runtime) -> None:
    first = _fds_of(runtime, "run-0")
    for i in range(1, 16):
        last = _fds_of(runtime, f"run-{i}")
    assert last <= first + 2, (first, last)  # without the fix: +3 fds per earlier run
    assert last < 40


def _pidfds(pid: int) -> int:
    fd_dir, found = Path(f"/proc/{pid}/fd"), 0
    for fd in os.listdir(fd_dir):
        with contextlib.suppress(FileNotFoundError):  # (the listing's own, closed since)
            found += os.readlink(fd_dir / fd) == "anon_inode:[pidfd]"
    return found


def test_owner_pidfds_are_the_processes_meant_or_none() -> None:
    me = psutil.Process()
    fds = owner_pidfds(os.getppid(), me.pid, me.create_time())
    assert fds is not None and len(fds) == 2
    for fd in fds:
        os.close(fd)
    # a host pid now held by another process (its create time differs), a parent that is
    # not ours, a host that is gone: each is "gone", never a pidfd on the wrong process
    assert owner_pidfds(os.getppid(), me.pid, me.create_time() - 60) is None
    assert owner_pidfds(me.pid, me.pid, me.create_time()) is None
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert owner_pidfds(os.getppid(), gone.pid, 0.0) is None
    assert _pidfds(me.pid) == 0  # (none left open)


def test_an_idle_actor_is_not_woken_to_check_on_its_owners(runtime) -> None:
    """The watchdog is pidfds in the actor's watch, not a timer: an idle supervisor is not
    woken four times a second (as it was) to look whether the host and its parent live.
    It holds its own two pidfds, and none inherited from its parent actor."""
    runtime.call("r1", "echo", "k", "echo", {}, 5)
    runtime.governor.stop()  # (its samples wake every actor: not what is measured here)
    titled = ["tether:", "supervisor", "echo"]
    (sup,) = [p for p in runtime_processes(runtime) if " ".join(p.cmdline()).split() == titled]
    assert _pidfds(sup.pid) == 2
    before = sup.num_ctx_switches().voluntary
    time.sleep(1.5)  # (a window to count wakes in, not a wait for a state)
    assert sup.num_ctx_switches().voluntary - before <= 2  # a timer at 0.25 s: >= 6


def test_kind_modules_that_do_not_exist_are_skipped() -> None:
    kinds = load_kinds(["tether.actors.echo", "tether.actors.not_written_yet"])
    assert {k.kind for k in kinds} == {"echo", "echo_process", "echo_run"}


def test_kind_module_that_fails_to_import_is_a_clear_error(tmp_path, monkeypatch) -> None:
    (tmp_path / "broken_kinds.py").write_text("import not_a_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        KindLoadError,
        match="resource kind module 'broken_kinds' failed to import: No module named 'not_a_module_anywhere'",
    ):
        load_kinds(["broken_kinds"])


def test_runtime_cannot_be_built_directly() -> None:
    with pytest.raises(
        TypeError, match=r"build a Runtime with Runtime.start\(...\), not Runtime\(...\)"
    ):
        Runtime()


def test_death_of_thespians_admin_takes_its_tree_down_and_the_host_builds_another(
    runtime,
) -> None:
    runtime.call("r", "echo_process", "k", "echo", {}, 5)
    procs = runtime_processes(runtime)
    os.kill(runtime.admin_pid, signal.SIGKILL)
    wait_until(lambda: not alive(procs), timeout=5.0)
    assert runtime.call("r", "echo_process", "k", "echo", {"n": 1}, 5)["echo"] == {"n": 1}
    assert runtime.admin_pid not in {p.pid for p in procs}


def _fd_targets(pid: int) -> list[str]:
    out = []
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return out


def test_the_tree_does_not_inherit_the_hosts_descriptors(runtime_factory, tmp_path) -> None:
    # forked without exec, the admin and every actor used to hold the host's files and
    # sockets: a port the host closed stayed bound by the tree
    import socket

    with open(tmp_path / "host-only.txt", "w") as hostfile, socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        inode = os.fstat(listener.fileno()).st_ino
        rt = runtime_factory(kind_modules=["tether.actors.echo"])
        rt.call("r1", "echo", "k", "echo", {}, 10)
        rt.call("r1", "echo_run", "k", "echo", {}, 10)
        procs = runtime_processes(rt)
        assert len(procs) >= 5  # the admin, the logger, the root, supervisors, the actors
        for proc in procs:
            held = _fd_targets(proc.pid)
            assert hostfile.name not in held, (proc.pid, proc.name())
            assert f"socket:[{inode}]" not in held, (proc.pid, proc.name())
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))  # closed here, so closed everywhere
    assert rt.call("r1", "echo", "k", "echo", {}, 10)  # the tree works without them


def test_the_token_variable_is_named_in_one_place() -> None:
    spelled = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "tether").rglob("*.py")
        if "TETHER_RUNTIME_TOKEN" in p.read_text()
    ]
    assert spelled == ["tether/processes.py"], spelled  # the rest use TOKEN_ENV


def test_a_process_started_dying_with_us_dies_when_its_starter_is_sigkilled(tmp_path) -> None:
    # the starter is SIGKILLed, so nothing of ours can kill the child: only the kernel's
    # parent-death signal (set by setpriv, or a preexec_fn where there is none) does
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from tether.processes import popen_dying_with_us;"
            "p = popen_dying_with_us(['sleep', '600']); print(p.pid, flush=True);"
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    assert starter.stdout is not None
    child = psutil.Process(int(starter.stdout.readline()))
    wait_until(lambda: child.name() == "sleep", timeout=10.0)  # (setpriv has exec'd it)
    starter.kill()
    starter.wait()
    wait_until(lambda: not alive([child]), timeout=10.0)


def test_popen_dying_with_us_finds_programs_as_popen_does(tmp_path) -> None:
    from tether.processes import popen_dying_with_us

    with pytest.raises(FileNotFoundError, match="no-such-program-here"):
        popen_dying_with_us(["no-such-program-here"])
    with pytest.raises(FileNotFoundError):
        popen_dying_with_us(["./missing.sh"], cwd=str(tmp_path))
    script = tmp_path / "hello.sh"
    script.write_text('#!/bin/sh\necho hello "$1"\n')
    script.chmod(0o755)
    relative = popen_dying_with_us(
        ["./hello.sh", "there"], cwd=str(tmp_path), stdout=subprocess.PIPE
    )
    assert relative.communicate(timeout=10)[0] == b"hello there\n"
    on_path = popen_dying_with_us(
        ["hello.sh", "path"], env={"PATH": str(tmp_path)}, stdout=subprocess.PIPE
    )
    assert on_path.communicate(timeout=10)[0] == b"hello path\n"


SAMPLE = ROOT / "examples" / "sample_project"


def _title(pid: int) -> str:
    """What `ps ax` shows for `pid`: its command line, a title padded with empty arguments."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ").decode()


@pytest.mark.parametrize(
    ("kind", "key", "title"),
    [
        ("supervisor", "language_server", "tether: supervisor language_server"),
        ("language_server", "basedpyright:/w", "tether: language_server basedpyright:/w"),
        ("run", "conv-1", "tether: run conv-1"),
        ("root", "", "tether: root"),
    ],
)
def test_tree_process_title(kind: str, key: str, title: str) -> None:
    assert tree_process_title(kind, key) == title


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("basedpyright-langserver"), reason="needs basedpyright")
def test_each_tree_process_is_titled_by_what_it_is_and_keeps_its_proof(
    runtime_factory, tmp_path
) -> None:
    work = tmp_path / "project"
    shutil.copytree(SAMPLE, work)
    rt = runtime_factory()
    run = rt.open_run("titles", workdir=work)
    hover = {"action": "hover", "file": "inventory/models.py", "line": 7, "symbol": "Item"}
    assert not run.call("lsp", hover).is_error
    assert rt.call("titles", "echo", "k1", "echo", {}, 10)
    titles: dict[str, str] = {}

    def walk(node: dict) -> None:
        if node["kind"] == "root":  # [the admin, the root]
            titles["admin"], titles["root"] = (_title(p["pid"]) for p in node["pids"][:2])
        else:  # [the actor, what it owns]
            titles[node["name"]] = _title(node["pids"][0]["pid"])
            assert titles[node["name"]] == tree_process_title(node["kind"], node["key"])
        for child in node["children"]:
            walk(child)

    walk(rt.health())
    server = f"language_server:basedpyright:{work.resolve()}"
    assert titles[server] == f"tether: language_server basedpyright:{work.resolve()}"
    assert titles["supervisor:language_server"] == "tether: supervisor language_server"
    assert titles["run:titles"] == "tether: run titles"
    assert titles["echo:k1"] == "tether: echo k1"
    assert (titles["admin"], titles["root"]) == ("tether: admin", "tether: root")
    execed = {p.pid: " ".join(p.cmdline()) for p in processes_with_token(rt._token)}
    assert any("basedpyright" in cmd for cmd in execed.values()), "a server keeps its argv"
    forked = [p for p in rt.processes() if p.pid not in execed]
    assert "tether: logger" in [_title(p.pid) for p in forked]
    for proc in forked:  # the next start's reaper can still prove each one is ours
        assert _title(proc.pid).startswith("tether: "), (proc.pid, proc.cmdline())
        assert proc.name() == tree_process_name(rt._token), (proc.pid, _title(proc.pid))
        assert carries_token(proc, rt._token)
