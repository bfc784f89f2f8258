"""The thespian patches (tether.host.thespian_patches): the guard that refuses an untested thespian,
and each loop patch measured by its effect in real actor processes, so that a patch that is
still "installed" but no longer works fails here. (Loopback only: test_processes.py.)"""

from __future__ import annotations

import errno
import os
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tether.runtime  # noqa: F401  (applies the patches at import)
from tests.runtime.loop_probes import CHUNK, data_stack_room, eventpoll_fd_numbers, eventpoll_fds
from tether.host import thespian_check, thespian_patches
from tether.host.thespian_check import ALLOW_UNTESTED_ENV, ThespianPatchError, check_thespian
from tether.host.thespian_patches import _in_fresh_stack_chunk, _PollSelector
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.processes import processes_with_token

ROOT = Path(__file__).resolve().parents[2]

PROBE = KindSpec(
    "probe", "tests.runtime.actors:ProbeActor", Scope.SHARED, ChildSpec(Restart.TRANSIENT)
)
PROBE_RUN = KindSpec(
    "probe_run", "tests.runtime.actors:ProbeActor", Scope.RUN, ChildSpec(Restart.TRANSIENT)
)


# --- the guard ---------------------------------------------------------------------------


def test_the_installed_thespian_passes_the_guard() -> None:
    check_thespian()  # what the suite runs on is what TESTED_THESPIAN says


def test_an_untested_thespian_is_refused_with_what_to_do(monkeypatch) -> None:
    monkeypatch.delenv(ALLOW_UNTESTED_ENV, raising=False)
    with pytest.raises(ThespianPatchError) as info:
        check_thespian("4.1.0")
    message = str(info.value)
    assert message.startswith("tether cannot patch thespian 4.1.0: that version was never tested")
    assert "tested on thespian 4.0.1 only" in message
    assert "pip install 'thespian==4.0.1'" in message
    assert f"with {ALLOW_UNTESTED_ENV}=1, then add '4.1.0' to TESTED_THESPIAN" in message


def test_an_untested_thespian_may_be_re_verified_on_purpose(monkeypatch) -> None:
    monkeypatch.setenv(ALLOW_UNTESTED_ENV, "1")
    check_thespian("4.1.0")  # the shape checks still ran, and passed


def _loop_without_selectors(self, handler):  # type: ignore[no-untyped-def]
    return handler


def _send_with_sendall(self, intent):  # type: ignore[no-untyped-def]
    intent.socket.sendall(intent.serMsg)  # bytes AuthSocket.send would not see


@pytest.mark.parametrize(
    "module, name, value, problem",
    [
        ("thespian.system.transport.IPBase", "IPActorAddress", None, "IPActorAddress is gone"),
        ("thespian.system.actorManager.ActorManager", "run", None, "ActorManager.run is gone"),
        ("thespian.system.multiprocCommon", "MultiProcManager", None, "no longer run ActorManager.run"),
        ("thespian.system.transport.TCPTransport", "selectors", None, "no longer imports `selectors`"),
        ("thespian.system.transport.TCPTransport.TCPTransport", "_runWithExpiry", _loop_without_selectors, "no longer waits with selectors.DefaultSelector()"),
        ("thespian.system.transport.TCPTransport.TCPTransport", "_acceptNewIncoming", None, "TCPTransport._acceptNewIncoming is gone"),
        ("thespian.system.transport.TCPTransport.TCPTransport", "_next_XMIT_2", _send_with_sendall, "moves bytes with ['sendall']"),
        ("thespian.system.transport.TCPTransport", "ReceiveBuffer", object, "no longer parses `_size`"),
        ("thespian.system.logdirector", "setProcName", None, "logdirector.setProcName is gone"),
        ("thespian.system.multiprocCommon", "startChild", _send_with_sendall, "startChild no longer calls `setProcName`"),
    ],
)  # fmt: skip
def test_a_changed_internal_is_refused_not_an_attribute_error_later(
    monkeypatch, module, name, value, problem
) -> None:
    import importlib

    mod_name, _, cls_name = module.rpartition(".")
    try:
        target = importlib.import_module(module)
    except ModuleNotFoundError:
        target = getattr(importlib.import_module(mod_name), cls_name)
    if value is None:
        monkeypatch.delattr(target, name)
    else:
        monkeypatch.setattr(target, name, value)
    with pytest.raises(ThespianPatchError, match="tether cannot patch thespian 4.0.1: ") as info:
        check_thespian()
    assert problem in str(info.value)
    assert "pip install 'thespian==4.0.1'" in str(info.value)


def test_a_module_that_no_longer_imports_is_refused(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "thespian.system.multiprocCommon", None)  # import fails
    with pytest.raises(ThespianPatchError) as info:
        check_thespian()
    assert "module thespian.system.multiprocCommon does not import" in str(info.value)


def test_importing_the_runtime_refuses_an_untested_thespian() -> None:
    fake = (
        "import importlib.metadata as m; real = m.version; "
        "m.version = lambda name: '4.9.9' if name == 'thespian' else real(name); "
        "import tether.runtime"
    )
    env = {k: v for k, v in os.environ.items() if k != ALLOW_UNTESTED_ENV}
    done = subprocess.run(
        [sys.executable, "-c", fake], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "ThespianPatchError: tether cannot patch thespian 4.9.9" in done.stderr


# --- poll(2) instead of a new epoll per loop turn ----------------------------------------


def _thespian_processes(rt) -> list[int]:
    """The admin and every actor process (forks of this one, not the subprocesses they exec)."""
    execed = {p.pid for p in processes_with_token(rt._token)}
    return [p.pid for p in rt._account.tree_processes() if p.pid not in execed]


def test_actor_processes_wait_with_poll_not_epoll(runtime_factory) -> None:
    # Unpatched, every turn of thespian's loop makes an epoll and holds it while it waits,
    # so an idle actor process always shows one in /proc/<pid>/fd. (The tree is forked from
    # this process: an epoll it holds already, e.g. a zmq context of an earlier test, is in
    # every actor at the same descriptor, and is not the loop's.)
    inherited = eventpoll_fd_numbers(os.getpid())
    runtime = runtime_factory()
    for i in range(50):
        runtime.call("r", "echo", "k", "echo", {"i": i}, 5)
        runtime.call("r", "echo_run", "k", "echo", {"i": i}, 5)
    pids = _thespian_processes(runtime)
    assert len(pids) >= 6  # admin, root, supervisors, the run, its actor, echo
    for _ in range(20):
        held = {pid: n for pid in pids if (n := eventpoll_fds(pid, inherited))}
        assert held == {}, f"thespian processes waiting on an epoll: {held}"
        time.sleep(0.01)


def test_the_epoll_probe_sees_an_epoll() -> None:
    before = eventpoll_fds(os.getpid())
    sel = selectors.EpollSelector()
    try:
        assert eventpoll_fds(os.getpid()) == before + 1
    finally:
        sel.close()


def test_poll_selector_reports_readable() -> None:
    a, b = socket.socketpair()
    with a, b:
        sel = _PollSelector()
        sel.register(a.fileno(), selectors.EVENT_READ)
        assert sel.select(0) == []
        b.send(b"x")
        assert [(key.fd, ev) for key, ev in sel.select(0)] == [(a.fileno(), selectors.EVENT_READ)]
        sel.close()


def test_poll_selector_fails_on_a_closed_fd_like_epoll() -> None:
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    sel = _PollSelector()
    sel.register(r, selectors.EVENT_READ)
    with pytest.raises(OSError) as exc:
        sel.select(0)
    assert exc.value.errno == errno.EBADF


# --- a fresh frame-stack chunk per actor process -----------------------------------------


def test_actor_handlers_run_in_a_fresh_frame_stack_chunk(runtime_factory) -> None:
    # More room than a 16 KiB chunk can hold: the handler runs in the trampoline's chunk, so
    # a message's calls never cross into a new one (an mmap/munmap pair per crossing).
    # Unpatched, the room is whatever the actor's ancestry left in a 16 KiB chunk.
    rt = runtime_factory(kinds=[PROBE, PROBE_RUN])
    for kind in ("probe", "probe_run"):
        for _ in range(2):  # through the supervisor or the run, then direct
            got = rt.call("r", kind, "k", "stack_room", {}, 5)
            assert got["pid"] != os.getpid()
            assert got["room"] > CHUNK + 4096, (kind, got)


def _room_at_depth(depth: int) -> int:
    return data_stack_room() if depth == 0 else _room_at_depth(depth - 1)


def test_the_stack_probe_sees_chunk_ends_and_the_trampoline() -> None:
    rooms = [_room_at_depth(d) for d in range(0, 520, 4)]  # ~70 KiB of frames: crosses chunks
    assert min(rooms) < 1024
    assert _in_fresh_stack_chunk(data_stack_room) > CHUNK + 8192


def test_apply_is_idempotent_and_keeps_one_wrapper() -> None:
    from thespian.system.actorManager import ActorManager

    run = ActorManager.run
    thespian_patches.apply()
    assert ActorManager.run is run


def test_setup_cfg_pins_a_tested_thespian() -> None:
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    requires = cfg["options"]["install_requires"].split()
    pins = [r for r in requires if r.startswith("thespian")]
    assert pins == [f"thespian=={thespian_check.TESTED_THESPIAN[-1]}"]
