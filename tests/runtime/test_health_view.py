"""`tether status --port N`: the health tree of a runtime in another process, drawn as a tree."""

from __future__ import annotations

import io
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import health_node, wait_until
from tether.health_view import render_tree, status_main, top_main

ROOT = Path(__file__).resolve().parents[2]

TREE = {
    "name": "root",
    "state": "ready",
    "uptime": 2.0,
    "pids": [],
    "admin_port": 4242,
    "children": [
        {
            "name": "runs",
            "state": "ready",
            "uptime": 1.0,
            "pids": [],
            "children": [
                {"name": "run:a", "state": "ready", "uptime": 1.0, "pids": [], "children": []},
            ],
        },
        {
            "name": "supervisor:echo",
            "state": "ready",
            "uptime": 1.0,
            "pids": [],
            "children": [
                {
                    "name": "echo:k",
                    "state": "failed",
                    "uptime": 0.0,
                    "restarts": 5,
                    "pending": 2,
                    "last_error": "gave up on echo:k after 5 restarts in 60 s",
                    "pids": [{"pid": 7, "rss": 2**20, "cpu": 3.0, "alive": True}],
                    "children": [],
                },
            ],
        },
    ],
}


def test_render_tree_draws_branches_and_failures() -> None:
    lines = render_tree(TREE).splitlines()
    assert lines[0] == "tether runtime on 127.0.0.1:4242"
    assert lines[1].startswith("root  [ready]  up 2.0s")
    assert lines[2].startswith("├── runs  [ready]")
    assert lines[3].startswith("│   └── run:a  [ready]")
    assert lines[4].startswith("└── supervisor:echo  [ready]")
    assert (
        lines[5]
        == "    └── echo:k  [failedX]  up 0.0s  restarts 5  pending 2  pids 7 (1.0 MiB, 3%)"
    )
    assert lines[6].strip() == "error: gave up on echo:k after 5 restarts in 60 s"


def test_status_of_a_runtime_in_another_process(runtime) -> None:
    runtime.call("r1", "echo_process", "k", "echo", {}, 5)
    runtime.call("r1", "echo_run", "k", "echo", {}, 5)  # a run kind starts the run's actor
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tether.cli import main; sys.exit(main(['status', '--port', '{runtime.admin_port}']))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith(f"tether runtime on 127.0.0.1:{runtime.admin_port}\nroot  [ready]")
    assert "├── runs  [ready]" in out and "│   └── run:r1  [ready]" in out
    assert "echo_process:k  [ready]" in out
    assert runtime.call("r1", "echo_process", "k", "echo", {"still": 1}, 5)["echo"] == {"still": 1}


def test_status_in_process(runtime) -> None:
    runtime.call("r1", "echo", "k", "echo", {}, 5)  # (a kind's supervisor starts with its call)
    out = io.StringIO()
    assert status_main(runtime.admin_port, out=out) == 0
    assert "supervisor:echo" in out.getvalue()


def test_status_of_nothing_says_what_to_check(capsys) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert status_main(port) == 1
    assert capsys.readouterr().err == (
        f"tether status: nothing listens on 127.0.0.1:{port}; is the runtime running? "
        "(its admin port is Runtime.admin_port, also in its port file)\n"
    )


def test_status_needs_the_runtimes_secret_from_its_own_port_file(runtime, capsys) -> None:
    # every connection into the tree must prove the runtime's secret: without the port
    # file status cannot join, and one another user could have written is not trusted
    port_file = runtime.port_file
    saved = port_file.read_bytes()
    port_file.unlink()
    try:
        assert status_main(runtime.admin_port) == 1
        assert f"no port file {port_file}" in capsys.readouterr().err
        port_file.write_bytes(saved)
        port_file.chmod(0o666)
        assert status_main(runtime.admin_port) == 1
        assert "was not written by you" in capsys.readouterr().err
    finally:
        port_file.write_bytes(saved)
        port_file.chmod(0o600)
    assert status_main(runtime.admin_port, out=io.StringIO()) == 0


def test_top_of_a_runtime_in_another_process_draws_frames_of_every_actor(runtime) -> None:
    runtime.call("r1", "echo_process", "k", "echo", {}, 5)
    runtime.inject("crash_actor", "echo_process:k")
    wait_until(lambda: health_node(runtime.health(), "echo_process:k")["restarts"] == 1)
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tether.cli import main; "
        f"sys.exit(main(['top', '--port', '{runtime.admin_port}', '--count', '2', "
        "'--interval', '0.1']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    frames = done.stdout.split("tether top  ")[1:]
    assert len(frames) == 2, done.stdout
    assert "\x1b[" not in done.stdout  # a pipe gets frames one after another, no escapes
    for frame in frames:
        assert frame.startswith(f"127.0.0.1:{runtime.admin_port}")
        header, _, table = frame.split("\n", 2)
        assert "1 restarts" in header
        rows = table.splitlines()
        assert rows[0].split() == [
            "actor", "state", "up", "restarts", "pending", "rss", "cpu", "place"
        ]  # fmt: skip
        echo = next(r for r in rows if r.strip().startswith("echo_process:k"))
        assert echo.split()[1:2] == ["ready"] and echo.split()[3] == "1"
        assert echo.startswith("    ")  # under its supervisor, under the root


def test_top_of_nothing_shows_why_in_each_frame() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = io.StringIO()
    assert top_main(port, interval=0.01, count=2, out=out) == 0
    assert out.getvalue().count(f"nothing listens on 127.0.0.1:{port}") == 2
