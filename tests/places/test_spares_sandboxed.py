"""A sandboxed run's kernel started ahead, at open (`eval.prepare(run, start_kernels=True)`):
the place's spare. A pool's spare cannot serve a sandbox (its workspace is bound and its
run's cgroup joined when bwrap starts), so the run's own kernel is started for its place,
charged to the tree like any kernel (its usage record), and its first cell finds it started.
Real bubblewrap and ipykernel."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.conftest import health_node, wait_until
from tests.places.test_places import needs_sandbox
from tether.actors.kernel import kinds
from tether.tools import eval as eval_tool

pytestmark = needs_sandbox
DESCRIPTION = "time the first cell of this conversation"


def first_cell(run: Any) -> float:
    began = time.perf_counter()
    res = run.call("eval", {"code": "import os; print(os.getpid())", "description": DESCRIPTION})
    assert not res.is_error, res.text
    return time.perf_counter() - began


def kernel_node(rt: Any, run_id: str) -> dict[str, Any]:
    node = health_node(rt.health(), f"run:{run_id}/kernel:python")
    assert node is not None, rt.health()
    return node


def pool(rt: Any) -> dict[str, Any]:
    return dict(rt.call("", "kernel_pool", "python", "pool_status", {}, 10))


def test_a_sandboxed_kernel_started_ahead_serves_the_first_cell(
    runtime_factory: Any, tmp_path: Path
) -> None:
    rt = runtime_factory(kinds=kinds(spares=1))
    assert wait_until(lambda: pool(rt)["ready"] == 1, 60)  # a host spare, ready
    ahead = rt.open_run("ahead", workdir=tmp_path, place="sandbox")
    eval_tool.prepare(ahead, start_kernels=True)
    before = kernel_node(rt, "ahead")
    extra = before["extra"]
    assert extra["place"].startswith("sandbox") and extra["kernels_started"] == 1, before
    assert before["usage"]["bytes"] > 10 * 2**20, before["usage"]  # charged like any kernel
    assert before["usage"]["holds_state"] is True, before["usage"]
    warm = first_cell(ahead)
    after = kernel_node(rt, "ahead")
    assert after["extra"]["kernels_started"] == 1, after
    assert after["extra"]["kernel_pid"] == extra["kernel_pid"], after  # the same kernel
    assert pool(rt)["taken"] == 0  # (a host spare never serves a sandbox)
    cold_run = rt.open_run("cold", workdir=tmp_path, place="sandbox")
    cold = first_cell(cold_run)
    assert kernel_node(rt, "cold")["extra"]["kernels_started"] == 1
    # the cold one starts bwrap, its layer and ipykernel (1.5-6 s here); the warm one is a
    # round trip (15-50 ms here under load): a wide margin, not a benchmark
    assert warm * 5 < cold, (warm, cold)
