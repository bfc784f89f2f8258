"""The relay (tether.places.relay): what listens on loopback TCP inside a sandbox (Deno's
Jupyter kernel, `dlv dap`) is reached through a Unix socket bound into the place, never by
opening the host's loopback. Real Deno, real delve and Go, real bubblewrap."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gone, health_node, wait_until
from tests.debug.conftest import GO_PROGRAM, need
from tests.debug.support import ok, session_pids
from tests.places.test_places import needs_sandbox
from tether.actors.kernel import kinds
from tether.debug import adapters
from tether.kernels.launch import KernelUnavailable, deno_binary
from tether.places import relay

pytestmark = needs_sandbox

# a TCP echo server on loopback that says when it listens, then serves one client
ECHO = """
import socket, sys
server = socket.create_server(('127.0.0.1', int(sys.argv[1])))
print('listening', flush=True)
conn, _ = server.accept()
while data := conn.recv(4096):
    conn.sendall(data.upper())
conn.close()
"""


def test_the_relay_copies_both_ways_and_ends_with_its_command(tmp_path: Path) -> None:
    """On the host, no place: a client on the Unix socket reaches the TCP port behind it, a
    half-close is passed on, and the relay exits with its command's status."""
    with socket.socket() as probe:  # a free port (then released for the echo server)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = str(tmp_path / "r.sock")
    echo = [sys.executable, "-c", ECHO + "sys.exit(7)", str(port)]
    proc = subprocess.Popen(
        relay.argv(sys.executable, [(path, port)], echo), stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "listening\n"  # (the relay bound its socket before)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(path)
        client.sendall(b"through the relay")
        client.shutdown(socket.SHUT_WR)
        got = b""
        while data := client.recv(4096):
            got += data
    assert got == b"THROUGH THE RELAY"
    assert proc.wait(10) == 7
    assert not os.path.exists(path)  # (its socket removed as it ended)


def test_a_relay_client_before_the_port_listens_is_closed(tmp_path: Path) -> None:
    path = str(tmp_path / "r.sock")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # (bound, not listening: connect is refused)
        proc = subprocess.Popen(
            relay.argv(sys.executable, [(path, port)], [sys.executable, "-c", "input()"]),
            stdin=subprocess.PIPE,
        )
        try:
            assert wait_until(lambda: os.path.exists(path), 10)
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(path)
                client.settimeout(10)
                assert client.recv(10) == b""  # closed: the client's reconnect tries again
        finally:
            proc.communicate(b"\n", timeout=10)


def _deno_or_skip() -> None:
    try:
        deno_binary()
    except KernelUnavailable as exc:
        pytest.skip(str(exc))


def test_javascript_eval_in_a_sandbox_with_the_bridge(runtime_factory: Any, tmp_path: Path) -> None:
    _deno_or_skip()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "notes.txt").write_text("A's notes\n")
    (b / "secret.txt").write_text("B's secret\n")
    rt = runtime_factory(kinds=kinds(spares=0))
    run = rt.open_run("js", workdir=a, place="sandbox")
    with socket.socket() as tree_port:  # a host loopback port, like thespian's
        tree_port.bind(("127.0.0.1", 0))
        tree_port.listen()
        port = tree_port.getsockname()[1]
        res = run.call(
            "eval",
            {
                "language": "javascript",
                "code": (
                    "const notes = await tool('read', {path: 'notes.txt'});\n"
                    "console.log('bridge:', notes.trim());\n"
                    "const probe = async (what, f) => { try { await f(); console.log(what, 'OPEN') }"
                    " catch (e) { console.log(what, 'refused', e.name) } };\n"
                    f"await probe('secret', () => Deno.readTextFile({str(b / 'secret.txt')!r}));\n"
                    f"await probe('loopback', () => Deno.connect({{hostname: '127.0.0.1', port: {port}}}));\n"
                    "console.log('uid', Deno.uid());\n"
                    "6 * 7"
                ),
                "description": "read notes through the bridge and probe the sandbox",
            },
        )
    assert not res.is_error, res.text
    assert "bridge: 1\tA's notes" in res.text or "bridge: A's notes" in res.text, res.text
    assert "secret refused NotFound" in res.text, res.text
    assert "loopback refused ConnectionRefused" in res.text, res.text
    assert "uid 1000" in res.text and "42" in res.text, res.text
    node = health_node(rt.health(), "run:js/kernel:javascript")
    assert node is not None and node["place"] == "sandbox (bubblewrap, network off)", node
    # the host reached it through the relay's sockets in the kernel's own directory
    kernel_dirs = list((rt.state_dir / "kernels").glob("*-ja-*"))
    sockets = [p.name for d in kernel_dirs for p in d.iterdir() if p.is_socket()]
    assert len([s for s in sockets if s.startswith("r-")]) == 5, sockets
    again = run.call(
        "eval",
        {
            "language": "javascript",
            "code": "40 + 2",
            "description": "a second cell on the same kernel",
        },
    )
    assert not again.is_error and "42" in again.text, again.text
    run.close()


def test_delve_in_a_sandbox_stops_at_a_breakpoint(runtime: Any, tmp_path: Path) -> None:
    need("delve")
    if not shutil.which("go"):
        pytest.skip("go is not installed (delve builds the package with it)")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "secret.txt").write_text("B's secret")
    (a / "go.mod").write_text("module example.com/demo\n\ngo 1.19\n")
    (a / "main.go").write_text(GO_PROGRAM)
    run = runtime.open_run("go-box", workdir=str(a), place="sandbox")
    listed = ok(run, {"op": "adapters"})
    delve = next(r for r in listed.data["adapters"] if r["adapter"] == "delve")
    assert delve["usable"], delve
    ok(run, {"op": "breakpoints", "file": "main.go", "lines": [6]})
    res = ok(run, {"op": "launch", "program": ".", "wait": 120})
    assert res.text.startswith("stopped at main.go:6 (breakpoint)"), res.text
    assert "a (int) = 1" in res.text, res.text
    pids = session_pids(runtime, "go-box")
    assert len(pids) >= 2, pids  # the relay, dlv (and the program it built)
    node = health_node(runtime.health(), "run:go-box/debug_session:session")
    assert node is not None and node["place"] == "sandbox (bubblewrap, network off)", node
    done = ok(run, {"op": "continue"})
    assert done.data["outcome"] == "exited" and done.data["exit_code"] == 0, done.text
    assert "hello 3" in done.text, done.text  # the program's output, through dlv's stdout
    # the run's own go build cache (not the host's shared one) kept the build for the next
    caches = list((runtime.state_dir / "scratch").glob("*-dbg-caches-*/go-build"))
    assert len(caches) == 1 and any(caches[0].iterdir()), caches
    again = ok(run, {"op": "launch", "program": ".", "wait": 120})
    assert again.text.startswith("stopped at main.go:6 (breakpoint)"), again.text
    run.close()
    assert wait_until(lambda: gone(pids), 10)
    assert wait_until(lambda: not caches[0].exists(), 10)  # (removed with the session)


def test_delve_in_a_state_dir_too_deep_for_its_socket_is_refused_saying_so(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    with pytest.raises(ValueError, match="too deep for one .* point TETHER_STATE_DIR"):
        adapters.relayed_argv(adapters.BY_NAME["delve"], "dlv", deep)
    assert not (deep / "relay.py").exists()
