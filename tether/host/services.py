"""What a runtime runs beside its tree: the memory governor and the metrics endpoint.

Both start once, after the first boot, and outlive the tree's rebuilds: they reach the
tree only through the callbacks they are given (health, eviction), which always go to
the tree of the moment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from tether.capacity.governor import Governor
from tether.capacity.measure import Budget
from tether.capacity.policy import Settings
from tether.cgroups import Cgroup
from tether.health_node import HealthNode
from tether.host.boot import RuntimeStartError
from tether.json_types import JSONValue
from tether.kinds import KindSpec
from tether.metrics import Metrics

Health = Callable[[float], HealthNode]  # rt.health(timeout)


def keep_budget(
    capacity: tuple[Budget, Cgroup | None, Settings],
    health: Health,
    top_pids: Callable[[], list[int]],
    evict: Callable[[str, str], bool],
    kinds: Mapping[str, KindSpec],
    port_file: Path | None,
) -> Governor:
    """A governor keeping `capacity`'s budget, sampling now and on its own thread; its
    summary goes beside the port file (for `tether status`)."""
    budget, cgroup, settings = capacity
    status = port_file.with_suffix(".capacity") if port_file else None
    governor = Governor(
        budget,
        cgroup,
        settings,
        health=health,
        top_pids=top_pids,
        evict=evict,
        kind_configs={k: spec.config for k, spec in kinds.items()},
        status_file=status,
    )
    governor.sample()
    governor.start()
    return governor


def serve_metrics(
    port: int, health: Health, capacity: Callable[[], Mapping[str, JSONValue]]
) -> Metrics:
    """Prometheus metrics on 127.0.0.1:`port` (0: a free one); RuntimeStartError if the
    port cannot be had."""
    metrics = Metrics(health, capacity)
    try:
        metrics.serve(port)
    except OSError as exc:
        metrics.close()
        raise RuntimeStartError(
            f"cannot serve metrics on 127.0.0.1:{port} ({exc}); pick another port or "
            "pass metrics_port=0 for a free one"
        ) from exc
    return metrics
