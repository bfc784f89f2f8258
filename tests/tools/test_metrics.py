"""Prometheus metrics: scraped over HTTP and parsed with the client library's own parser."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request

import pytest
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
    assert "tether_actor_restarts" in got and "tether_tree_rebuilds" in got
    assert value(got["tether_build_info"], "tether_build_info", version="0.1.0") == 1
    assert value(got["process_resident_memory_bytes"], "process_resident_memory_bytes") > 1e6
    assert not [n for f in got.values() for n in (s.name for s in f) if n.endswith("_created")]
    buckets = [s.labels["le"] for s in latency if s.name.endswith("_bucket")]
    assert buckets[0] == "0.0001"  # a 0.4 ms read lands in a bucket of its own, not in 1 ms


def test_a_restart_shows_in_the_scrape(runtime_factory) -> None:
    rt = runtime_factory(metrics_port=0)
    rt.call("r", "echo_process", "k", "echo", {}, 5)
    before = value(
        scrape(rt.metrics.port)["tether_actor_restarts"],
        "tether_actor_restarts_total",
        kind="echo_process",
    )
    rt.inject("crash_actor", "echo_process:k")
    wait_until(
        lambda: (
            value(
                scrape(rt.metrics.port)["tether_actor_restarts"],
                "tether_actor_restarts_total",
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


def test_the_exposition_passes_promtool(runtime_factory, tmp_path) -> None:
    """Prometheus's own linter: names, units, counters ending in _total, help texts."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install -y prometheus)")
    rt = runtime_factory(metrics_port=0)
    (tmp_path / "m.py").write_text("print(1)\n")
    run = rt.open_run("lint", workdir=str(tmp_path))
    assert not run.call("read", {"path": "m.py"}).is_error
    with urllib.request.urlopen(f"http://127.0.0.1:{rt.metrics.port}/metrics", timeout=10) as r:
        text = r.read()
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
    assert b"tether_tool_calls_total" in text
