"""Prometheus metrics: scraped over HTTP and parsed with the client library's own parser."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import psutil
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import wait_until


def scrape(port: int) -> dict[str, list]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(samples: list, name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]
    assert found, f"no sample {name}{labels} in {samples}"
    return sum(found)


def test_a_scrape_shows_calls_latency_errors_and_the_tree(runtime_factory, tmp_path) -> None:
    rt = runtime_factory(metrics_port=0)
    (tmp_path / "m.py").write_text("print(1)\n")
    run = rt.open_run("metrics", workdir=str(tmp_path))
    assert not run.call("read", {"path": "m.py"}).is_error
    assert run.call("read", {"path": "nope.py"}).is_error
    assert not run.call("ast_grep", {"pattern": "print($A)", "language": "python"}).is_error
    run.call("no_such_tool", {})
    got = scrape(rt.metrics.port)

    calls = got["tether_tool_calls"]
    assert value(calls, "tether_tool_calls_total", tool="read", outcome="ok") == 1
    assert value(calls, "tether_tool_calls_total", tool="read", outcome="error") == 1
    assert value(calls, "tether_tool_calls_total", tool="ast_grep", outcome="ok") == 1
    assert value(calls, "tether_tool_calls_total", tool="(unknown)") == 1
    assert value(got["tether_tool_errors"], "tether_tool_errors_total") == 2
    latency = got["tether_tool_call_seconds"]
    assert value(latency, "tether_tool_call_seconds_count", tool="read") == 2
    assert value(latency, "tether_tool_call_seconds_bucket", tool="ast_grep", le="+Inf") == 1

    assert value(got["tether_tree_up"], "tether_tree_up") == 1
    actors = got["tether_actors"]
    assert value(actors, "tether_actors", kind="parser", state="ready") >= 1
    assert value(actors, "tether_actors", kind="root") == 1
    assert (
        value(got["tether_resident_memory_bytes"], "tether_resident_memory_bytes", kind="parser")
        > 1e6
    )
    assert "tether_actor_restarts" in got


def test_a_restart_shows_in_the_scrape(runtime_factory) -> None:
    rt = runtime_factory(metrics_port=0)
    rt._call("r", "echo_process", "k", "echo", {}, 5)
    before = value(
        scrape(rt.metrics.port)["tether_actor_restarts"],
        "tether_actor_restarts",
        kind="echo_process",
    )
    rt.inject("crash_actor", "echo_process:k")
    wait_until(
        lambda: (
            value(
                scrape(rt.metrics.port)["tether_actor_restarts"],
                "tether_actor_restarts",
                kind="echo_process",
            )
            == before + 1
        ),
        timeout=10.0,
    )


def test_a_metrics_port_in_use_is_refused_with_what_to_do(runtime_factory) -> None:
    from tether.runtime import RuntimeStartError

    rt = runtime_factory(metrics_port=0)
    try:
        runtime_factory(metrics_port=rt.metrics.port)
    except RuntimeStartError as exc:
        assert "pick another port" in str(exc)
    else:
        raise AssertionError("a second runtime took a metrics port in use")


def test_tether_serve_serves_metrics_until_sigterm_and_leaves_nothing(tmp_path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tether.cli", "serve", "--metrics-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TETHER_STATE_DIR": str(tmp_path)},
    )
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        metrics_line = next(line for line in lines if "metrics on" in line)
        port = int(metrics_line.rsplit(":", 1)[1].split("/")[0])
        assert value(scrape(port)["tether_tree_up"], "tether_tree_up") == 1
        tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert tree, "no actor processes under tether serve"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        wait_until(
            lambda: (
                not [
                    p
                    for p in tree
                    if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                ]
            ),
            timeout=15.0,
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
