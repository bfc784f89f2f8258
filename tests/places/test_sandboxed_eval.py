"""eval in a sandbox place: a real ipykernel in bubblewrap, reached over ipc sockets bound
into the place, on the conversation's own layer; what one conversation's cell cannot do."""

from __future__ import annotations

import base64
import hashlib
import socket
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import health_node, wait_until
from tests.places.test_places import needs_sandbox
from tether.actors.kernel import kinds
from tether.tools.results import ToolResult

pytestmark = needs_sandbox
DESCRIPTION = "check what a sandboxed cell can do"


def ev(run: Any, code: str) -> ToolResult:
    return run.call("eval", {"code": code, "description": DESCRIPTION})


@pytest.fixture
def two_runs(runtime_factory: Any, tmp_path: Path) -> tuple[Any, Any, Path, Path, Any]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "notes.txt").write_text("A's notes\n")
    (b / "secret.txt").write_text("B's secret\n")
    rt = runtime_factory(kinds=kinds(spares=0))
    run_a = rt.open_run("a", workdir=a, place="sandbox")
    run_b = rt.open_run("b", workdir=b, place="sandbox")
    return run_a, run_b, a, b, rt


def test_a_sandboxed_cell_is_kept_in_its_place(two_runs: Any, tmp_path: Path) -> None:
    run_a, _, a, b, rt = two_runs
    with socket.socket() as tree_port:  # a TCP port of the host's, like thespian's
        tree_port.bind(("127.0.0.1", 0))
        tree_port.listen()
        port = tree_port.getsockname()[1]
        res = ev(
            run_a,
            "import os, socket\n"
            "def probe(what, f):\n"
            "    try: f(); print(what, 'OPEN')\n"
            "    except OSError as e: print(what, 'refused', type(e).__name__)\n"
            f"probe('secret', lambda: open({str(b / 'secret.txt')!r}).read())\n"
            f"print('state', sorted(os.listdir({str(rt.state_dir)!r})))\n"
            f"print('kernels', len(os.listdir({str(rt.state_dir / 'kernels')!r})))\n"
            f"probe('portfile', lambda: open({str(rt.port_file)!r}).read())\n"
            f"probe('loopback', lambda: socket.create_connection(('127.0.0.1', {port}), 2))\n"
            f"probe('outside', lambda: open({str(tmp_path / 'planted')!r}, 'w').write('x'))\n"
            "print('cap', open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
            "print('uid', os.getuid(), 'pids', sorted(int(p) for p in os.listdir('/proc') "
            "if p.isdigit())[:3])\n"
            f"probe('signal', lambda: os.kill({rt.admin_pid}, 0))\n"
            f"os.symlink({str(b / 'secret.txt')!r}, 'link.txt')\n"
            "probe('symlink', lambda: open('link.txt').read())\n"
            "open('mine.txt', 'w').write('written by A')\n",
        )
    assert not res.is_error, res.text
    assert "secret refused FileNotFoundError" in res.text
    # only the way down to its own kernel's directory and layer: no port file, no secret,
    # no other kernel's directory, no scratch or cache
    assert "state ['kernels', 'layers']" in res.text
    assert "kernels 1" in res.text
    assert "portfile refused FileNotFoundError" in res.text
    assert "loopback refused ConnectionRefusedError" in res.text
    assert not (tmp_path / "planted").exists()
    assert "signal refused ProcessLookupError" in res.text  # the tree's pids are not there
    assert "symlink refused FileNotFoundError" in res.text  # a link out leads nowhere
    assert "cap 0000000000000000" in res.text
    assert "uid 1000 pids [1, 2" in res.text
    assert (a / "mine.txt").read_text() == "written by A"
    node = health_node(rt.health(), "run:a/kernel:python")
    assert node is not None and node["extra"]["place"] == "sandbox (bubblewrap, network off)"
    assert node["place"] == node["extra"]["place"]


def test_the_bridge_and_shell_work_inside(two_runs: Any) -> None:
    run_a, *_ = two_runs
    res = ev(run_a, "text = tool('read', {'path': 'notes.txt'})\nprint(text)\n!id -u")
    assert not res.is_error, res.text
    assert "A's notes" in res.text and "1000" in res.text.split()


def _wheel(directory: Path, name: str) -> Path:
    """A minimal pure-Python wheel, built by hand (no build backend, no index)."""
    dist = f"{name}-1.0"
    files = {
        f"{name}.py": "VALUE = 'from the layer'\n",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}.dist-info/RECORD,,")
    files[f"{dist}.dist-info/RECORD"] = "\n".join(record) + "\n"
    wheel = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return wheel


def test_pip_installs_into_the_conversation_layer_only(two_runs: Any) -> None:
    run_a, run_b, a, _, _ = two_runs
    wheel = _wheel(a, "tetherlayerprobe")
    tether_site = Path(sys.prefix, "lib")
    before = sorted(p.name for p in tether_site.glob("python3*/site-packages/*"))
    res = ev(
        run_a,
        f"%pip install --no-index {wheel}\nimport tetherlayerprobe, sys\n"
        "print(tetherlayerprobe.VALUE, tetherlayerprobe.__file__.startswith(sys.prefix))",
    )
    assert not res.is_error, res.text
    assert "from the layer True" in res.text
    after = sorted(p.name for p in tether_site.glob("python3*/site-packages/*"))
    assert after == before and len(before) > 10  # tether's venv is untouched
    other = ev(run_b, "import importlib.util\nprint(importlib.util.find_spec('tetherlayerprobe'))")
    assert other.text.strip() == "None", other.text  # another conversation does not see it


def test_the_project_venv_is_the_kernel_interpreter(runtime_factory: Any, tmp_path: Path) -> None:
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], check=True
    )
    site = next((tmp_path / ".venv" / "lib").glob("python3*/site-packages"))
    (site / "projectonly.py").write_text("WHERE = 'the project venv'\n")
    rt = runtime_factory(kinds=kinds(spares=0))
    run = rt.open_run("p", workdir=tmp_path, place="sandbox")
    res = ev(run, "import projectonly, ipykernel\nprint(projectonly.WHERE)")
    assert not res.is_error, res.text
    assert "the project venv" in res.text
    assert sorted(p.name for p in site.iterdir()) == ["projectonly.py"] or "_virtualenv" in str(
        list(site.iterdir())
    )  # nothing installed into the project to get a kernel


# --- limits: what one conversation's cell cannot take from the others ---------------------
def test_limits_end_the_offending_cell_with_a_clear_result(
    runtime_factory: Any, tmp_path: Path
) -> None:
    from tether import cgroups
    from tether.places import Limits, Place

    limits = Limits(memory_mb=256, pids=48, tmp_mb=16)
    rt = runtime_factory(kinds=kinds(spares=0))
    run = rt.open_run("lim", workdir=tmp_path, place=Place.sandbox(limits=limits))
    filler = ev(
        run,
        "with open('/tmp/fill', 'wb') as f:\n"
        "    for _ in range(100): f.write(bytes(2**20)); f.flush()",
    )
    assert filler.is_error and "No space left on device" in filler.text, filler.text
    if cgroups.missing(limits):
        pytest.skip("no cgroup is delegated here: memory and pids limits are not enforced")
    bomb = ev(
        run,
        "import subprocess\nprocs = []\n"
        "try:\n    for _ in range(200): procs.append(subprocess.Popen(['sleep', '30']))\n"
        "finally:\n    [p.kill() for p in procs]",
    )
    assert bomb.is_error and "Resource temporarily unavailable" in bomb.text, bomb.text
    assert "refused new processes: it holds 48 at most" in bomb.text, bomb.text
    hog = ev(run, "x = bytearray(1024 * 2**20)")
    assert hog.is_error, hog.text
    assert "went over its place's memory limit (256 MiB)" in hog.text, hog.text
    assert "was killed by signal 9" in hog.text, hog.text
    after = ev(run, "print('still here')")  # the next cell: a fresh kernel, same place
    assert "still here" in after.text and "data are lost" in after.text, after.text


@pytest.mark.parametrize("spares", [0, 1])
def test_pip_on_the_host_installs_into_the_layer_too(
    runtime_factory: Any, tmp_path: Path, spares: int
) -> None:
    """The host place keeps %pip out of tether's venv as well (a spare kernel runs on a
    layer handed over with it); pip will not uninstall what lies outside the layer."""
    rt = runtime_factory(kinds=kinds(spares=spares))
    if spares:  # a started spare, so the first cell takes it
        status = lambda: rt.call("", "kernel_pool", "python", "pool_status", {}, 10)  # noqa: E731
        wait_until(lambda: status()["ready"] >= 1, 60)
    run = rt.open_run("h", workdir=tmp_path)
    wheel = _wheel(tmp_path, "tetherhostprobe")
    tether_site = Path(sys.prefix, "lib")
    before = sorted(p.name for p in tether_site.glob("python3*/site-packages/*"))
    res = ev(
        run,
        f"%pip install --no-index {wheel}\nimport tetherhostprobe, sys\n"
        "print(tetherhostprobe.__file__.startswith(sys.prefix), sys.prefix != sys.base_prefix)\n"
        "%pip uninstall -y msgpack",
    )
    assert "True True" in res.text, res.text
    assert "outside environment" in res.text, res.text
    after = sorted(p.name for p in tether_site.glob("python3*/site-packages/*"))
    assert after == before and "msgpack" in " ".join(after)
    if spares:
        assert rt.call("", "kernel_pool", "python", "pool_status", {}, 10)["taken"] == 1


def test_a_sandboxed_kernel_can_be_started_at_open_run(two_runs: Any) -> None:
    from tether.tools import eval as eval_tool

    run_a, _, _, _, rt = two_runs
    eval_tool.prepare(run_a, start_kernels=True)
    node = health_node(rt.health(), "run:a/kernel:python")
    assert node is not None and node["extra"]["kernel_ready"], node
    res = ev(run_a, "print('first')")
    assert res.text.strip() == "first", res.text


def test_a_place_that_cannot_start_is_refused_at_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.places import PlaceError
    from tether.run import Run

    monkeypatch.setenv("PATH", str(tmp_path))  # (no bwrap on it)
    with pytest.raises(PlaceError, match="needs bubblewrap and `bwrap` is not on PATH"):
        Run(workdir=tmp_path, place="sandbox")
