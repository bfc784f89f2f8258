"""The prefix place for real: a Debian root made by mmdebstrap (cached, built by
scripts/install.sh), entered through bubblewrap, with the workspace at /srv/ws inside. A
real ipykernel (the root's own, Debian's python3-ipykernel) on the root's Python, reached
over ipc sockets in the place's exchange directory."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.places.test_host_killed import kill_9_leaves_nothing
from tests.places.test_places import needs_sandbox
from tests.vibe.test_vibe import output, spawn
from tether import cgroups
from tether.actors.kernel import kinds
from tether.actors.vibe import KINDS as VIBE_KINDS
from tether.places import Limits, Place, PlaceError, wrap
from tether.places.rootfs import MARKER, debian_root, rootfs_place
from tether.tools.vibe_workers import CommandBackend, VibeConfig

try:
    ROOT: Path | None = debian_root()
    WHY = ""
except PlaceError as exc:
    ROOT, WHY = None, str(exc)
pytestmark = [needs_sandbox, pytest.mark.skipif(ROOT is None, reason=WHY)]
DESCRIPTION = "run a cell in the Debian prefix place"


def ev(run: Any, code: str) -> Any:
    return run.call("eval", {"code": code, "description": DESCRIPTION})


@pytest.fixture
def prefix_run(runtime_factory: Any, tmp_path: Path) -> tuple[Any, Path, Any]:
    assert ROOT is not None
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.txt").write_text("from the host\n")
    rt = runtime_factory(kinds=kinds(spares=0))
    place = rootfs_place(ROOT, {str(ws): "/srv/ws"}, rt.state_dir / "kernels" / "px")
    return rt.open_run("px", workdir=ws, place=place), ws, rt


def test_a_python_cell_runs_on_the_roots_own_python_and_ipykernel(prefix_run: Any) -> None:
    run, ws, rt = prefix_run
    res = ev(
        run,
        "import sys, os, ipykernel\n"
        "print(sys.executable, os.getcwd(), ipykernel.__file__.split('/')[4])\n"
        "print(open('/etc/debian_version').read().split('.')[0], open('data.txt').read())\n"
        f"print(os.path.exists({str(rt.state_dir)!r}), os.path.exists({str(ws)!r}))\n"
        "_ = open('made.txt', 'w').write('inside')",
    )
    assert not res.is_error, res.text
    assert res.text.split() == [
        "/usr/bin/python3",  # the root's, not the host's interpreter
        "/srv/ws",  # the workspace, mapped
        "dist-packages",  # Debian's ipykernel, installed in the root
        "12",
        "from",
        "the",
        "host",
        "False",  # no state dir (port file, secret) inside
        "False",  # the workspace is at its inside path only
    ], res.text
    assert (ws / "made.txt").read_text() == "inside"
    again = ev(run, "print(sys.version_info[:2] == (3, 11))")  # the same kernel's state
    assert again.text.strip() == "True", again.text


def test_a_shell_command_runs_in_the_root(prefix_run: Any) -> None:
    run, _, _ = prefix_run
    res = ev(run, "!head -1 /etc/os-release; id -u; ls /srv/ws; cat /proc/1/cmdline | tr '\\0' ' '")
    assert not res.is_error, res.text
    lines = res.text.splitlines()
    assert lines[0] == 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"', res.text
    assert lines[1:3] == ["1000", "data.txt"], res.text
    assert "bwrap" in lines[3].split()[0], res.text  # (its own pid namespace: bwrap is pid 1)


def test_a_worker_runs_its_shell_command_in_the_root(runtime_factory: Any, tmp_path: Path) -> None:
    assert ROOT is not None
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(Path(__file__).parent.parent / "vibe" / "worker.py", ws / "worker.py")
    rt = runtime_factory(kinds=VIBE_KINDS)
    place = rootfs_place(ROOT, {str(ws): "/srv/ws"}, rt.state_dir / "kernels" / "px")
    backend = CommandBackend(["python3", str(ws / "worker.py")])  # (the root's python3)
    config = VibeConfig(backends={"fast": backend})
    run = rt.open_run("w", workdir=ws, vibe=True, vibe_config=config, place=place)
    wid = spawn(run, "write out.txt done\nsh id -u; head -1 /etc/os-release; pwd")
    text = wait_until(lambda: (lambda o: o if "exit 0" in o else None)(output(run, wid)), 30)
    assert "1000" in text.split() and "/srv/ws" in text.split(), text
    assert 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"' in text, text
    assert (ws / "out.txt").read_text() == "done\n"


@pytest.mark.skipif(bool(cgroups.missing(Limits())), reason="no cgroup is delegated here")
def test_a_fork_bomb_in_the_root_meets_its_place_pids_limit(tmp_path: Path) -> None:
    assert ROOT is not None
    place = rootfs_place(ROOT, {str(tmp_path): "/srv/ws"}, tmp_path / "px", Limits(pids=40))
    bomb = (
        "import subprocess\nprocs = []\n"
        "try:\n    for _ in range(200): procs.append(subprocess.Popen(['sleep', '30']))\n"
        "except OSError as e: print('refused after', len(procs))\n"
        "for p in procs: p.kill()\n"
    )
    wrapped = wrap(place, ["python3", "-c", bomb], cwd=str(tmp_path), group="px-pids")
    try:
        done = subprocess.run(wrapped.argv, env=wrapped.env, capture_output=True, timeout=60)
        out = done.stdout.decode()
        assert "refused after" in out, (out, done.stderr)
        assert 30 <= int(out.split()[2]) < 40, out
        assert wrapped.cgroup is not None and "refused new processes" in wrapped.exit_reason()
    finally:
        wrapped.release()


def test_a_kernel_without_an_exchange_dir_says_what_to_map(
    runtime_factory: Any, tmp_path: Path
) -> None:
    assert ROOT is not None
    rt = runtime_factory(kinds=kinds(spares=0))
    plain = Place.prefix(["bwrap", "--ro-bind", str(ROOT), "/", "--"], {str(tmp_path): "/srv/ws"})
    res = ev(rt.open_run("nx", workdir=tmp_path, place=plain), "1")
    assert res.is_error and "mapped into its environment" in res.text, res.text
    assert f"{rt.state_dir}/kernels/px" in res.text, res.text


def test_a_prefix_that_cannot_enter_is_refused_at_open(
    runtime_factory: Any, tmp_path: Path
) -> None:
    assert ROOT is not None
    broken = ["bwrap", "--ro-bind", str(ROOT), "/", "--bind", str(tmp_path), "/nowhere/ws", "--"]
    rt = runtime_factory(kinds=kinds(spares=0))
    with pytest.raises(PlaceError, match="does not enter its environment here") as err:
        rt.open_run("bad", workdir=tmp_path, place=Place.prefix(broken, {str(tmp_path): "/ws"}))
    assert "Can't mkdir parents for /nowhere/ws" in str(err.value), err.value


def test_a_missing_root_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PlaceError, match=r"not built .*python -m tether.places.rootfs build"):
        debian_root(tmp_path)
    (tmp_path / "debian-bookworm-python3-ipykernel/etc").mkdir(parents=True)  # (unfinished)
    with pytest.raises(PlaceError, match=f"has no {MARKER}"):
        debian_root(tmp_path)


def test_a_mapping_the_root_cannot_mount_is_refused(tmp_path: Path) -> None:
    assert ROOT is not None
    with pytest.raises(PlaceError, match="one level beneath a directory the root has"):
        rootfs_place(ROOT, {str(tmp_path): "/nowhere/ws"}, tmp_path / "x")


HOST = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    {hold_a_start}
    from tether.actors.echo import KINDS as ECHO_KINDS
    from tether.actors.kernel import kinds
    from tether.places.rootfs import debian_root, rootfs_place
    from tether.runtime import Runtime
    state = Path({state!r})
    rt = Runtime.start(kinds=[*kinds(spares=0), *ECHO_KINDS], state_dir=state)
    {call_the_held}
    place = rootfs_place(debian_root(), {{{work!r}: "/srv/ws"}}, state / "kernels" / "px")
    run = rt.open_run("k", workdir={work!r}, place=place)
    res = run.call("eval", {{"code": "import subprocess\\n"
        "p = subprocess.Popen(['sleep', '307.75'], start_new_session=True)\\nprint('up')",
        "description": "start a child that would outlive us"}})
    print(res.text, flush=True)
    sys.stdin.read()
    """
)


def test_kill_9_of_the_host_leaves_no_process_in_the_prefix_environment(tmp_path: Path) -> None:
    assert ROOT is not None
    work = tmp_path / "work"
    work.mkdir()
    kill_9_leaves_nothing(HOST, work, "307.75", under=ROOT, running=2)  # the sleep, its bwrap
