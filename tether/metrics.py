"""Prometheus metrics of one runtime, on a loopback HTTP endpoint (prometheus_client).

    rt = Runtime.start(metrics_port=9464)      # or: tether serve --metrics-port 9464
    curl -s 127.0.0.1:9464/metrics

Two sources. Tool calls are counted as they finish (`Run.call` reports each to
`Runtime.metrics`): calls by tool and outcome, latency by tool, errors by code. The actor
tree is read when a scrape arrives (one bounded `health()`): actors by kind and state,
restarts by kind, resident memory by kind. Each runtime has its own registry, so several
runtimes in one process never mix their series.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client import Counter as CallCounter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import start_http_server

from tether.tools.results import ToolResult

SCRAPE_HEALTH_TIMEOUT = 2.0  # a scrape never waits longer on the tree than this
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


def outcome(result: ToolResult) -> str:
    """ "ok", or the error's code (a resource error's code, a refusal's reason, "error")."""
    if not result.is_error:
        return "ok"
    data = result.data if isinstance(result.data, Mapping) else {}
    if data.get("code"):
        return str(data["code"])
    if data.get("refused"):
        return f"refused_{data['refused']}"
    return "error"


class TreeCollector:
    """Reads the actor tree at scrape time (a custom prometheus collector)."""

    def __init__(self, health: Callable[[float], dict[str, Any]]):
        self._health = health

    def collect(self) -> Iterator[Metric]:
        actors = GaugeMetricFamily(
            "tether_actors", "Actors of the tree by kind and state", labels=["kind", "state"]
        )
        restarts = GaugeMetricFamily(
            "tether_actor_restarts", "Restarts of the live actors, by kind", labels=["kind"]
        )
        memory = GaugeMetricFamily(
            "tether_resident_memory_bytes",
            "Resident memory of the actors and the processes they own, by kind",
            labels=["kind"],
        )
        up = GaugeMetricFamily("tether_tree_up", "1 if the actor tree answered the scrape")
        try:
            tree = self._health(SCRAPE_HEALTH_TIMEOUT)
        except Exception:  # noqa: BLE001 - a scrape reports the tree as down, never raises
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        states: Counter[tuple[str, str]] = Counter()
        restart_counts: Counter[str] = Counter()
        rss: Counter[str] = Counter()
        for node in _walk(tree):
            kind = str(node.get("kind", ""))
            states[(kind, str(node.get("state", "")))] += 1
            restart_counts[kind] += int(node.get("restarts", 0) or 0)
            rss[kind] += sum(int(p.get("rss", 0) or 0) for p in node.get("pids", []))
        for (kind, state), n in sorted(states.items()):
            actors.add_metric([kind, state], n)
        for kind, n in sorted(restart_counts.items()):
            restarts.add_metric([kind], n)
        for kind, n in sorted(rss.items()):
            memory.add_metric([kind], n)
        yield from (up, actors, restarts, memory)


def _walk(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for child in node.get("children", []):
        yield from _walk(child)


class Metrics:
    """One runtime's series and the HTTP endpoint that serves them."""

    def __init__(self, health: Callable[[float], dict[str, Any]]):
        self.registry = CollectorRegistry()
        self.calls = CallCounter(
            "tether_tool_calls",
            "Tool calls by tool and outcome (ok or the error's code)",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.errors = CallCounter(
            "tether_tool_errors", "Failed tool calls by code", ["code"], registry=self.registry
        )
        self.latency = Histogram(
            "tether_tool_call_seconds",
            "Tool call latency by tool",
            ["tool"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(TreeCollector(health))  # type: ignore[arg-type]
        self._server: Any = None
        self.port = 0

    def observe(self, tool: str, seconds: float, result: ToolResult) -> None:
        """A tool call finished (`Run.call`)."""
        what = outcome(result)
        self.calls.labels(tool, what).inc()
        if what != "ok":
            self.errors.labels(what).inc()
        self.latency.labels(tool).observe(seconds)

    def serve(self, port: int) -> int:
        """Serve /metrics on 127.0.0.1:`port` (0: a free port); returns the port."""
        self._server, _ = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        self.port = int(self._server.server_port)
        return self.port

    def close(self) -> None:
        if self._server is not None:
            with contextlib.suppress(Exception):
                self._server.shutdown()
                self._server.server_close()
            self._server = None
