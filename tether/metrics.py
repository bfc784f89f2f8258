"""Prometheus metrics of one runtime, on a loopback HTTP endpoint (prometheus_client).

    rt = Runtime.start(metrics_port=9464)      # or: tether serve --metrics-port 9464
    curl -s 127.0.0.1:9464/metrics

Two sources. Tool calls are counted as they finish (`Run.call` reports each to
`Runtime.metrics`): calls by tool and outcome, latency by tool, errors by code. The actor
tree is read when a scrape arrives (one bounded `health()`): actors by kind and state,
restarts by kind, resident memory by kind. The memory budget comes from the runtime's
governor (`rt.capacity()`, tether.capacity): budget, used, reserved, bytes by kind, how
many more conversations fit, evictions and refusals. Each runtime has its own registry,
so several runtimes in one process never mix their series.
"""

from __future__ import annotations

import contextlib
import platform
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client import Counter as CallCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import start_http_server

from tether.health_node import HealthNode
from tether.json_types import JSONObject, JSONValue
from tether.tools.results import ToolResult

SCRAPE_HEALTH_TIMEOUT = 2.0  # a scrape never waits longer on the tree than this
# from 100 us: a read answers in ~0.4 ms, so a first bucket of 1 ms would hold every read
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1, 2.5, 5, 10, 30, 60, 300,
)  # fmt: skip

# No `_created` twin per series: Prometheus does not use it, and it doubles every series.
disable_created_metrics()


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

    def __init__(self, health: Callable[[float], HealthNode]):
        self._health = health
        # A counter never goes down, but the tree reports restarts per live actor (an actor
        # that went took its count with it): so the collector adds each actor's increases.
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._restarts: Counter[str] = Counter()

    def _count_restarts(self, tree: HealthNode) -> None:
        with self._lock:
            for node in _walk(tree):
                if node is tree:  # the root's restarts are the tree's rebuilds
                    continue
                name, now = str(node.get("name", "")), int(node.get("restarts", 0) or 0)
                self._restarts[str(node.get("kind", ""))] += max(0, now - self._seen.get(name, 0))
                self._seen[name] = now

    def collect(self) -> Iterator[Metric]:
        actors = GaugeMetricFamily(
            "tether_actors", "Actors of the tree by kind and state", labels=["kind", "state"]
        )
        restarts = CounterMetricFamily(
            "tether_actor_restarts", "Actor restarts seen, by kind", labels=["kind"]
        )
        rebuilds = CounterMetricFamily(
            "tether_tree_rebuilds", "Rebuilds of the tree's top (admin, logger, root) by the host"
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
        self._count_restarts(tree)
        rebuilds.add_metric([], int(tree.get("restarts", 0) or 0))
        states: Counter[tuple[str, str]] = Counter()
        rss: Counter[str] = Counter()
        for node in _walk(tree):
            kind = str(node.get("kind", ""))
            states[(kind, str(node.get("state", "")))] += 1
            rss[kind] += sum(int(p.get("rss", 0) or 0) for p in node.get("pids", []))
        for (kind, state), n in sorted(states.items()):
            actors.add_metric([kind, state], n)
        with self._lock:
            for kind, n in sorted(self._restarts.items()):
                restarts.add_metric([kind], n)
        for kind, n in sorted(rss.items()):
            memory.add_metric([kind], n)
        yield from (up, actors, restarts, rebuilds, memory)


class BuildInfo:
    """`tether_build_info{version,python} 1`: which build answers (the Prometheus idiom)."""

    def collect(self) -> Iterator[Metric]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ours = version("tether")
        except PackageNotFoundError:
            ours = "unknown"
        info = GaugeMetricFamily(
            "tether_build_info", "The tether build serving", labels=["version", "python"]
        )
        info.add_metric([ours, platform.python_version()], 1)
        yield info


class CapacityCollector:
    """The governor's summary at scrape time (no tree query: it keeps its last sample)."""

    def __init__(self, capacity: Callable[[], Mapping[str, JSONValue]]):
        self._capacity = capacity

    def collect(self) -> Iterator[Metric]:
        try:
            cap = self._capacity()
        except Exception:  # noqa: BLE001 - a scrape of a runtime shutting down: no series
            return
        for name, key, text in (
            ("tether_memory_budget_bytes", "budget", "The tree's memory budget"),
            ("tether_memory_used_bytes", "used", "The tree's charge, as the OOM killer counts"),
            ("tether_memory_reserved_bytes", "reserved", "Held for resources starting"),
            ("tether_conversations", "conversations", "Open conversations (runs)"),
            ("tether_conversations_fit", "fit", "More conversations of the average size that fit"),
        ):
            gauge = GaugeMetricFamily(name, text)
            gauge.add_metric([], _figure(cap.get(key)))
            yield gauge
        # (counts since the runtime started: counters, so a rate() over them means something)
        refusals = CounterMetricFamily(
            "tether_capacity_refusals", "Calls refused with a capacity error"
        )
        refusals.add_metric([], _figure(cap.get("refusals")))
        yield refusals
        by_kind = GaugeMetricFamily(
            "tether_memory_bytes", "Memory (PSS) held by kind", labels=["kind"]
        )
        for kind, held in sorted(_table(cap.get("by_kind")).items()):
            by_kind.add_metric([kind], _figure(_table(held).get("bytes")))
        evictions = CounterMetricFamily(
            "tether_capacity_evictions", "Resources stopped to keep the budget", labels=["kind"]
        )
        for kind, n in sorted(_table(cap.get("evictions")).items()):
            evictions.add_metric([kind], _figure(n))
        yield from (by_kind, evictions)


def _figure(value: JSONValue) -> float:
    """A number of the governor's summary (absent: 0); TypeError if it is not one."""
    if isinstance(value, int | float | str):  # (what float() takes; a bool is an int)
        return float(value or 0)
    if value is None:
        return 0.0
    raise TypeError(f"not a number: {value!r}")


def _table(value: JSONValue) -> JSONObject:
    """An object of the governor's summary (absent: empty); TypeError if it is not one."""
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    raise TypeError(f"not an object: {value!r}")


def _walk(node: HealthNode) -> Iterator[HealthNode]:
    yield node
    for child in node.get("children", []):
        yield from _walk(child)


class Metrics:
    """One runtime's series and the HTTP endpoint that serves them."""

    def __init__(
        self,
        health: Callable[[float], HealthNode],
        capacity: Callable[[], Mapping[str, JSONValue]] | None = None,
    ):
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
        self.registry.register(BuildInfo())  # type: ignore[arg-type]
        ProcessCollector(registry=self.registry)  # the host process: CPU, memory, fds
        if capacity is not None:
            self.registry.register(CapacityCollector(capacity))  # type: ignore[arg-type]
        self._server: WSGIServer | None = None
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
