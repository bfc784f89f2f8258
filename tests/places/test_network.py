"""A sandbox with network on (slirp4netns): it reaches what the machine reaches through its
normal routes, and never the host's loopback, the tree's abstract sockets or a metadata
address; with network off, none of it. Real bubblewrap and slirp4netns, real listeners."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import wait_until
from tests.lsp.lsp_support import copy_project
from tests.places.test_places import needs_sandbox
from tether.actors.kernel import kinds
from tether.places import Place, PlaceError, egress, wrap
from tether.places.egress import NEEDED
from tether.processes import kill_tree, popen_dying_with_us, still_running

pytestmark = needs_sandbox
ROOT = Path(__file__).resolve().parents[2]
MISSING = [name for name, _ in NEEDED if not shutil.which(name)]
needs_egress = pytest.mark.skipif(
    bool(MISSING), reason=f"network on needs {MISSING} (scripts/install.sh installs them)"
)

# each argument host:port (or @name, an abstract Unix socket); one line out per argument
PROBE = """
import socket, sys
for arg in sys.argv[1:]:
    host, _, port = arg.rpartition(':')
    try:
        if arg.startswith('@'):
            s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect('\\0' + arg[1:])
        else:
            socket.create_connection((host, int(port)), 5).close()
        print(arg, 'OPEN')
    except OSError as e:
        print(arg, 'refused', type(e).__name__)
"""


def _outside_address() -> str:
    """An IPv4 address of this machine's that is not loopback (a listener there stands
    for a service elsewhere on the network)."""
    for addrs in psutil.net_if_addrs().values():
        for addr in addrs:
            if addr.family == socket.AF_INET and not addr.address.startswith("127."):
                return str(addr.address)
    pytest.skip("this machine has no non-loopback IPv4 address to listen on")


@contextlib.contextmanager
def _listeners() -> Iterator[dict[str, str]]:
    """A TCP listener on loopback (like thespian's ports), one on the outside address, an
    abstract Unix socket (like the call channels): the probe targets, by what they are."""
    with (
        socket.socket() as loop,
        socket.socket() as outside,
        socket.socket(socket.AF_UNIX) as abstract,
    ):
        loop.bind(("127.0.0.1", 0))
        outside.bind((_outside_address(), 0))
        name = f"tether-net-test-{os.getpid()}"
        abstract.bind("\0" + name)
        for s in (loop, outside, abstract):
            s.listen()
        lport = loop.getsockname()[1]
        yield {
            "loopback": f"127.0.0.1:{lport}",
            "gateway": f"10.0.2.2:{lport}",  # slirp4netns's gateway: the host's loopback if allowed
            "outside": "{}:{}".format(*outside.getsockname()),
            "abstract": f"@{name}",
        }


def _probe_in(place: Place | None, workspace: Path, targets: list[str]) -> dict[str, str]:
    argv = [sys.executable, "-c", PROBE, *targets]
    if place is None:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    else:
        w = wrap(place, argv, cwd=str(workspace), workspace=str(workspace))
        done = subprocess.run(
            w.argv, env=w.env, cwd=w.cwd, capture_output=True, text=True, timeout=60, check=False
        )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # (slirp4netns's talk is not the program's output)
    return dict(line.split(" ", 1) for line in done.stdout.splitlines())


@needs_egress
def test_network_on_reaches_outside_but_not_the_tree(tmp_path: Path) -> None:
    with _listeners() as at:
        targets = [at["loopback"], at["outside"], at["abstract"], at["gateway"]]
        on = _probe_in(Place.sandbox(network=True), tmp_path, [*targets, "169.254.169.254:80"])
        off = _probe_in(Place.sandbox(), tmp_path, [at["outside"]])
        host = _probe_in(None, tmp_path, targets[:3])
    assert host == {t: "OPEN" for t in targets[:3]}  # (the differential: all there outside)
    assert on[at["outside"]] == "OPEN"
    assert on[at["loopback"]] == "refused ConnectionRefusedError"  # its own, empty loopback
    assert on[at["abstract"]] == "refused ConnectionRefusedError"
    assert on[at["gateway"]].startswith("refused"), on  # --disable-host-loopback
    assert on["169.254.169.254:80"] == "refused OSError", on  # unreachable: no route
    assert off[at["outside"]] == "refused OSError", off  # network off: no route at all


@needs_egress
def test_network_on_reaches_the_package_mirror(tmp_path: Path) -> None:
    """The normal route out, by name (DNS through slirp4netns): what the host reaches."""
    target = "pypi.org:443"
    host = _probe_in(None, tmp_path, [target])
    if host[target] != "OPEN":
        pytest.skip(f"this machine itself does not reach {target}: {host[target]}")
    assert _probe_in(Place.sandbox(network=True), tmp_path, [target]) == {target: "OPEN"}
    off = _probe_in(Place.sandbox(), tmp_path, [target])
    assert off[target].startswith("refused"), off


@needs_egress
def test_a_network_on_cell_reaches_outside_not_the_tree(
    runtime_factory: Any, tmp_path: Path
) -> None:
    """A real ipykernel in a network-on sandbox: the outside listener, not the runtime's
    own admin port nor one of its call channels (both reachable from the host)."""
    rt = runtime_factory(kinds=kinds(spares=0))
    run = rt.open_run("net", workdir=tmp_path, place=Place.sandbox(network=True))
    first = run.call("eval", {"code": "1 + 1", "description": "start the kernel with a first cell"})
    assert not first.is_error, first.text
    channels = _call_channels()
    assert channels, "the runtime has no call channel to probe"
    ports = _tree_ports(rt.admin_pid)
    assert rt.admin_port in ports, ports
    with _listeners() as at:
        targets = [at["outside"], f"127.0.0.1:{rt.admin_port}", f"@{channels[0]}"]
        host = _probe_in(None, tmp_path, targets)
        ip = at["outside"].rpartition(":")[0]
        # every TCP port the tree listens on (thespian's, one per actor process), at each
        # address a sandbox could try: its loopback, slirp4netns's gateway, the host's
        tree = [f"{a}:{p}" for p in ports for a in ("127.0.0.1", "10.0.2.2", ip)]
        res = run.call(
            "eval",
            {
                "code": f"import sys; sys.argv = ['probe', *{[*targets, *tree]!r}]\n{PROBE}",
                "description": "probe what the network reaches from this cell",
            },
        )
    assert not res.is_error, res.text
    assert host == {t: "OPEN" for t in targets}
    assert f"{targets[0]} OPEN" in res.text
    assert f"{targets[1]} refused ConnectionRefusedError" in res.text
    assert f"{targets[2]} refused ConnectionRefusedError" in res.text
    assert all(f"{t} refused" in res.text for t in tree), res.text
    assert res.text.count(" OPEN") == 1, res.text  # (the outside listener only)


def _tree_ports(admin_pid: int) -> set[int]:
    """The TCP ports the actor tree listens on: this process, the admin, their children."""
    pids: set[int] = set()
    for root in (psutil.Process(), psutil.Process(admin_pid)):
        pids |= {root.pid, *(p.pid for p in root.children(recursive=True))}
    return {
        c.laddr.port
        for c in psutil.net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    }


def _call_channels() -> list[str]:
    """The abstract Unix addresses this test process's runtime's call channels listen on
    (/proc/net/unix flag 00010000: accepting connections)."""
    mine = f"@tether-calls-{os.getpid()}-"
    with open("/proc/net/unix") as table:
        rows = [line.split() for line in table]
    return sorted({r[-1][1:] for r in rows if r[-1].startswith(mine) and r[3] == "00010000"})


def test_network_on_without_its_programs_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only = tmp_path / "bin"  # bubblewrap (and the `true` it is probed with), nothing else
    only.mkdir()
    for name in ("bwrap", "true"):
        found = shutil.which(name)
        assert found
        (only / name).symlink_to(found)
    monkeypatch.setenv("PATH", str(only))
    with pytest.raises(PlaceError) as err:
        wrap(Place.sandbox(network=True), [sys.executable], cwd=str(tmp_path))
    assert "not on PATH: slirp4netns, nsenter, ip." in str(err.value)
    assert "apt-get install slirp4netns util-linux iproute2" in str(err.value)


@needs_egress
def test_network_on_as_a_plain_user(tmp_path: Path) -> None:
    """As a plain user (nobody, when the tests run as root): slirp4netns opens /dev/net/tun
    as that user. Where the machine lets every user open it (0666, stock Debian) the
    sandbox reaches the outside listener; where not, the place refuses saying so."""
    user = (
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.getuid() == 0 else []
    )
    if user and not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is needed to become a plain user")
    workspace = Path(tempfile.mkdtemp(prefix="tether-net-user-", dir="/tmp"))
    os.chmod(workspace, 0o777)  # (root's pytest dirs are 0700)
    tun_open = os.stat("/dev/net/tun").st_mode & 0o006 == 0o006 or not user
    code = (
        f"import sys, subprocess; sys.path.insert(0, {str(ROOT)!r})\n"
        "from tether.places import Place, PlaceError, wrap\n"
        "try:\n"
        f"    w = wrap(Place.sandbox(network=True), [sys.executable, '-c', {PROBE!r}, "
        "sys.argv[1]], cwd=sys.argv[2], workspace=sys.argv[2])\n"
        "except PlaceError as e:\n"
        "    print('REFUSED', e); raise SystemExit\n"
        "done = subprocess.run(w.argv, env=w.env, cwd=w.cwd, capture_output=True, text=True)\n"
        "print(done.stdout, done.stderr)\n"
    )
    try:
        with _listeners() as at:
            done = subprocess.run(
                [*user, "/usr/bin/python3", "-c", code, at["outside"], str(workspace)],
                env={**os.environ, "TETHER_STATE_DIR": str(workspace / "state")},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            outside = at["outside"]
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    if tun_open:
        assert f"{outside} OPEN" in done.stdout, done.stdout
    else:
        assert done.stdout.startswith("REFUSED a sandbox with network on needs /dev/net/tun")
        assert "may not open it: mode 0" in done.stdout, done.stdout
        assert "chmod 0666 /dev/net/tun" in done.stdout, done.stdout


@needs_egress
@pytest.mark.parametrize("victim", ["bwrap", "slirp4netns"])
def test_a_killed_network_on_sandbox_leaves_no_process(tmp_path: Path, victim: str) -> None:
    """SIGKILL of bwrap (what its owner spawned) ends the sandbox and so slirp4netns (its
    exit-fd closes); SIGKILL of slirp4netns leaves the sandbox running, offline."""
    w = wrap(
        Place.sandbox(network=True),
        ["/bin/sh", "-c", "sleep 300 & sleep 300 & wait"],
        cwd=str(tmp_path),
        workspace=str(tmp_path),
    )
    proc = popen_dying_with_us(w.argv, env=w.env, cwd=w.cwd, start_new_session=True)
    try:

        def started() -> list[psutil.Process] | None:
            tree = psutil.Process(proc.pid).children(recursive=True)
            names = [p.name() for p in tree]
            return tree if names.count("sleep") == 2 and "slirp4netns" in names else None

        tree = wait_until(started, 20)
        assert tree, "the sandbox and its slirp4netns did not start"
        slirp = next(p for p in tree if p.name() == "slirp4netns")
        os.kill(proc.pid if victim == "bwrap" else slirp.pid, signal.SIGKILL)
        if victim == "bwrap":
            proc.wait(10)
            assert wait_until(lambda: not [p for p in tree if still_running(p)], 10), tree
        else:
            assert wait_until(lambda: not still_running(slirp), 10)
            assert proc.poll() is None  # (the program runs on without a network)
    finally:
        kill_tree(proc.pid, grace=0.0)
        proc.wait(10)


@needs_egress
@pytest.mark.skipif(shutil.which("basedpyright-langserver") is None, reason="basedpyright")
def test_a_language_server_speaks_lsp_in_a_network_on_sandbox(runtime: Any, tmp_path: Path) -> None:
    """Its stdout is its LSP stream: nothing of slirp4netns's may land in it."""
    root = copy_project("python", tmp_path / "py")
    run = runtime.open_run("lsp-net", workdir=root, place=Place.sandbox(network=True))
    args = {"action": "hover", "file": "shapes/report.py", "line": 4, "symbol": "total_area"}
    hover = run.call("lsp", args)
    assert not hover.is_error and hover.data["hover"], hover.text
    status = run.call("lsp", {"action": "status"})
    assert status.data["running"][0]["place"] == "sandbox (bubblewrap, network on)", status.data


@needs_egress
def test_a_host_resolver_on_loopback_is_replaced_by_slirps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host whose /etc/resolv.conf names 127.0.0.53 (systemd-resolved): inside, that is
    the sandbox's own loopback, so the sandbox gets slirp4netns's forwarder (10.0.2.3),
    which asks the host's real resolver. Names resolve, as on the host."""
    host_file = tmp_path / "resolv.conf"
    host_file.write_text("nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n")
    monkeypatch.setattr(egress, "RESOLV_CONF", str(host_file))
    code = (
        "import socket; print(open('/etc/resolv.conf').read().split('\\n')[:2]); "
        "print(socket.getaddrinfo('pypi.org', 443)[0][4][0])"
    )
    w = wrap(
        Place.sandbox(network=True),
        [sys.executable, "-c", code],
        cwd=str(tmp_path),
        workspace=str(tmp_path),
    )
    done = subprocess.run(w.argv, env=w.env, capture_output=True, text=True, timeout=60)
    try:
        on_host = socket.getaddrinfo("pypi.org", 443)[0][4][0]
    except OSError as exc:
        pytest.skip(f"this machine does not resolve pypi.org itself: {exc}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['nameserver 10.0.2.3', 'options edns0 trust-ad']",
        on_host,
    ], done.stdout
    assert egress.resolver() != []  # (and with the machine's own file, whatever it names)
    monkeypatch.setattr(egress, "RESOLV_CONF", "/etc/resolv.conf")
    mine = Path("/etc/resolv.conf").read_text()
    assert (egress.resolver() == []) == ("nameserver 127." not in mine), mine
