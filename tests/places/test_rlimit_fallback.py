"""The rlimit fallback of a sandbox's limits, where no cgroup is delegated (forced here with
TETHER_PLACE_RLIMITS_ONLY=1 on a machine that has one): real bubblewrap, real prlimit,
real ipykernel. What an rlimit cannot hold is asserted too (tether.cgroups.rlimit_argv)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.places.test_places import needs_sandbox
from tether import cgroups
from tether.actors.kernel import kinds
from tether.places import Limits, Place, wrap

pytestmark = needs_sandbox
SYSTEM_PYTHON = "/usr/bin/python3"
FORKS = (
    "import subprocess\nprocs = []\n"
    "try:\n    for _ in range(80): procs.append(subprocess.Popen(['sleep', '30']))\n"
    "except OSError as e: print('refused after', len(procs), e.errno)\n"
    "else: print('not refused', len(procs))\n"
    "for p in procs: p.kill()\n"
)


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cgroups.RLIMITS_ONLY_ENV, "1")


def _run(work: Path, code: str, limits: Limits, user: list[str] | None = None) -> Any:
    return _spawn(work, [sys.executable, "-c", code], limits, user)


def _spawn(work: Path, argv: list[str], limits: Limits, user: list[str] | None = None) -> Any:
    wrapped = wrap(
        Place.sandbox(limits=limits), argv, cwd=str(work), workspace=str(work), group="rlimit-test"
    )
    assert wrapped.rlimits and wrapped.cgroup is None
    command = wrapped.argv
    if user:  # (root's 0700 home holds the runtime's Python: not there for nobody)
        command = _without_binds_under(command, "/root/")
    done = subprocess.run(
        [*(user or []), *command], env=wrapped.env, capture_output=True, text=True, timeout=60
    )
    return wrapped, done


def _without_binds_under(argv: list[str], prefix: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--ro-bind" and argv[i + 1].startswith(prefix):
            i += 3
            continue
        out.append(argv[i])
        i += 1
    return out


def test_the_fallback_sets_each_rlimit_inside_the_sandbox(forced: None, tmp_path: Path) -> None:
    limits = Limits(memory_mb=64, pids=40, tmp_mb=16)
    _, done = _run(tmp_path, "print(open('/proc/self/limits').read())", limits)
    table = done.stdout.splitlines()[1:]  # (fixed width: the name, then the soft limit)
    rows = {line[:26].strip(): line[26:].split()[0] for line in table if line.strip()}
    assert rows["Max data size"] == str(64 * 2**20), done.stdout
    assert rows["Max processes"] == "40", done.stdout
    assert rows["Max file size"] == str(16 * 2**20), done.stdout
    assert rows["Max cpu time"] == "unlimited", done.stdout  # (a weight is no rlimit)


def test_memory_past_the_rlimit_fails_the_allocation(forced: None, tmp_path: Path) -> None:
    code = "try: x = bytearray(400 * 2**20)\nexcept MemoryError: print('MemoryError')\n"
    _, done = _run(tmp_path, code + "print('alive')", Limits(memory_mb=64))
    assert done.stdout.split() == ["MemoryError", "alive"], (done.stdout, done.stderr)


def test_a_file_past_the_rlimit_is_cut_short(forced: None, tmp_path: Path) -> None:
    # Python ignores SIGXFSZ (it sets SIG_IGN at start-up): its write fails with EFBIG
    code = "f = open('big', 'wb')\nfor _ in range(32): f.write(bytes(2**20)); f.flush()\n"
    _, done = _run(tmp_path, code, Limits(tmp_mb=16))
    assert "[Errno 27] File too large" in done.stderr, done.stderr
    assert (tmp_path / "big").stat().st_size == 16 * 2**20


def test_a_writer_killed_by_the_file_rlimit_is_said(forced: None, tmp_path: Path) -> None:
    argv = ["/bin/sh", "-c", "head -c 33554432 /dev/zero > big"]
    wrapped, done = _spawn(tmp_path, argv, Limits(tmp_mb=16))
    code = wrapped.returncode(done.returncode)
    assert code == -signal.SIGXFSZ, (done.returncode, done.stderr)
    assert "file size limit (16 MiB, an rlimit)" in wrapped.exit_reason(code)
    assert wrapped.exit_reason(-signal.SIGKILL) == ""  # (no rlimit kills with SIGKILL)
    assert (tmp_path / "big").stat().st_size == 16 * 2**20


@pytest.fixture
def plain_workspace() -> Any:
    """A workspace a plain user (nobody) may use, outside root's 0700 pytest dirs."""
    work = Path(tempfile.mkdtemp(prefix="tether-rlimit-"))
    work.chmod(0o777)
    yield work
    shutil.rmtree(work, ignore_errors=True)


def test_a_fork_bomb_meets_nproc_as_a_plain_user(forced: None, plain_workspace: Path) -> None:
    # (RLIMIT_NPROC counts per uid per user namespace: the sandbox's own processes only,
    # although nobody has other processes outside it)
    user = (
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.getuid() == 0 else []
    )
    _, done = _spawn(plain_workspace, [SYSTEM_PYTHON, "-c", FORKS], Limits(pids=40), user)
    assert "refused after" in done.stdout, (done.stdout, done.stderr)
    assert 30 <= int(done.stdout.split()[2]) < 40, done.stdout


@pytest.mark.skipif(os.getuid() != 0, reason="the gap is root's: as a plain user NPROC holds")
def test_nproc_does_not_hold_for_a_sandbox_started_by_root(forced: None, tmp_path: Path) -> None:
    """The kernel exempts uid 0's user from RLIMIT_NPROC, and a sandbox started by root
    maps its uid to root outside: the documented gap (a cgroup's pids limit holds)."""
    _, done = _run(tmp_path, FORKS, Limits(pids=40))
    assert "not refused 80" in done.stdout, (done.stdout, done.stderr)


def test_a_sandboxed_cell_past_the_memory_rlimit_keeps_its_kernel(
    forced: None, runtime_factory: Any, tmp_path: Path
) -> None:
    rt = runtime_factory(kinds=kinds(spares=0))
    run = rt.open_run("rl", workdir=tmp_path, place=Place.sandbox(limits=Limits(memory_mb=512)))
    first = run.call(
        "eval", {"code": "kept = 41", "description": "keep a value in the kernel state"}
    )
    assert not first.is_error, first.text
    hog = run.call(
        "eval",
        {
            "code": "x = bytearray(2048 * 2**20)",
            "description": "allocate more memory than the limit",
        },
    )
    assert hog.is_error and "MemoryError" in hog.text, hog.text
    after = run.call(
        "eval", {"code": "print(kept + 1)", "description": "read the value kept before it"}
    )
    assert after.text.strip() == "42", after.text  # (the same kernel: an rlimit kills nothing)
