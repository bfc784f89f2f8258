"""The start probe of a language server (rust-analyzer's `--version`: a rustup proxy may sit on
PATH with nothing behind it) runs as the actor's watched subprocess, never inside a message
handler: health is answered while it runs, and its failure or its deadline make the server
unavailable with the probe's own words. The binaries are small scripts put first on PATH
(the real lookup, spawn and supervision paths run); the one that passes execs a real server."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from conftest import gone, health_node, wait_until
from lsp_support import need

import tether.actors.language_server as ls_actor
from tether.lsp.servers import BY_NAME, make_key, resolve
from tether.messages.calls import ErrorCode, ResourceError

KINDS = ["tether.actors.language_server"]


def _fake_rust_analyzer(tmp_path: Path, monkeypatch, on_version: str, otherwise: str) -> Path:
    """A `rust-analyzer` first on PATH (set before the runtime starts: its actors inherit
    it); returns the workspace root (with Cargo.toml) to key the server on."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "rust-analyzer"
    fake.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then\n{on_version}\nfi\n{otherwise}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "Cargo.toml").write_text("[package]\nname = 'x'\n")
    return root.resolve()


def _call_in_background(rt, key: str, timeout: float) -> dict:
    out: dict = {}

    def call() -> None:
        try:
            out["reply"] = rt.call("r", "language_server", key, "status", {}, timeout)
        except ResourceError as exc:
            out["error"] = exc

    threading.Thread(target=call, daemon=True).start()
    return out


def test_health_is_answered_while_the_start_probe_runs(runtime_factory, tmp_path, monkeypatch):
    pidfile = tmp_path / "probe.pid"
    root = _fake_rust_analyzer(
        tmp_path, monkeypatch, f"echo $$ > {pidfile}; exec sleep 30", "exit 1"
    )
    rt = runtime_factory(kind_modules=KINDS)
    key = make_key("rust-analyzer", root)
    _call_in_background(rt, key, 3.0)
    name = f"language_server:{key}"
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=10.0)
    timings = []
    for _ in range(3):
        start = time.monotonic()
        node = health_node(rt.health(timeout=2.0), name)
        timings.append(time.monotonic() - start)
        assert node is not None and "extra" in node, f"the actor did not answer: {node}"
        assert node["extra"]["lsp_state"] == "probing"
        assert int(pidfile.read_text()) in [p["pid"] for p in node["pids"]]
    assert min(timings) < 0.2, timings  # was 2-3 s: the probe ran inside on_start


def test_a_probe_that_fails_makes_the_server_unavailable_in_its_words(
    runtime_factory, tmp_path, monkeypatch
):
    root = _fake_rust_analyzer(
        tmp_path,
        monkeypatch,
        "echo \"error: Unknown binary 'rust-analyzer' in official toolchain\" >&2; exit 1",
        "exit 1",
    )
    rt = runtime_factory(kind_modules=KINDS)
    key = make_key("rust-analyzer", root)
    fake = tmp_path / "bin" / "rust-analyzer"
    expected = (
        f"rust-analyzer: binary rust-analyzer found at {fake} but does not run "
        "(rust-analyzer --version: error: Unknown binary 'rust-analyzer' in official toolchain)"
    )
    for _ in range(2):  # given up on, not restarted: the second call hears the same
        with pytest.raises(ResourceError) as info:
            rt.call("r", "language_server", key, "status", {}, 10.0)
        assert info.value.code == ErrorCode.UNAVAILABLE
        assert expected in info.value.message
    node = health_node(rt.health(), f"language_server:{key}")
    assert node is not None and node["state"] == "failed" and node["restarts"] == 0


def test_a_probe_that_never_answers_is_killed_at_its_deadline(
    runtime_factory, tmp_path, monkeypatch
):
    monkeypatch.setattr(ls_actor, "PROBE_TIMEOUT", 0.5)  # the actors fork from this process
    pidfile = tmp_path / "probe.pid"
    root = _fake_rust_analyzer(
        tmp_path, monkeypatch, f"echo $$ > {pidfile}; exec sleep 30", "exit 1"
    )
    rt = runtime_factory(kind_modules=KINDS)
    key = make_key("rust-analyzer", root)
    with pytest.raises(ResourceError) as info:
        rt.call("r", "language_server", key, "status", {}, 10.0)
    assert info.value.code == ErrorCode.UNAVAILABLE
    assert info.value.message.endswith("(rust-analyzer --version: no answer within 0.5 s)")
    probe = int(pidfile.read_text())
    wait_until(lambda: gone([probe]))


@need("basedpyright-langserver")
def test_a_probe_that_passes_starts_the_server(runtime_factory, tmp_path, monkeypatch):
    root = _fake_rust_analyzer(
        tmp_path,
        monkeypatch,
        "echo 'rust-analyzer 1.0.0'; exit 0",
        "exec basedpyright-langserver --stdio",  # a real server behind the name
    )
    rt = runtime_factory(kind_modules=KINDS)
    key = make_key("rust-analyzer", root)
    status = rt.call("r", "language_server", key, "status", {}, 30.0)
    assert status["state"] == "ready"
    assert status["binary"] == str(tmp_path / "bin" / "rust-analyzer")


def test_the_host_resolves_a_server_without_running_its_probe(tmp_path, monkeypatch):
    # the host used to run `rust-analyzer --version` itself, outside the tree
    ran = tmp_path / "ran"
    root = _fake_rust_analyzer(tmp_path, monkeypatch, f"touch {ran}; exit 1", "exit 1")
    res = resolve(BY_NAME["rust-analyzer"], root / "src" / "main.rs", root)
    assert res.usable and res.binary == str(tmp_path / "bin" / "rust-analyzer")
    assert not ran.exists()  # the actor's probe decides, under the tree


def test_a_broken_binary_the_host_found_is_refused_by_the_actor_in_its_words(
    runtime_factory, tmp_path, monkeypatch
):
    root = _fake_rust_analyzer(
        tmp_path, monkeypatch, "echo 'error: no rust-analyzer here' >&2; exit 1", "exit 1"
    )
    (root / "src").mkdir()
    (root / "src" / "main.rs").write_text("fn main() {}\n")
    rt = runtime_factory(kind_modules=KINDS)
    run = rt.open_run("conv-probe", workdir=str(root))
    res = run.call("lsp", {"action": "hover", "file": "src/main.rs", "line": 1, "symbol": "main"})
    assert res.is_error and "rust-analyzer --version: error: no rust-analyzer here" in res.text
