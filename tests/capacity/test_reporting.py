"""Capacity as operators see it: metrics, `tether status`, the summary beside the port file."""

from __future__ import annotations

import json
import urllib.request

from tether.actors.echo import KINDS as ECHO_KINDS
from tether.health_view import render_capacity, render_tree, status_main


def test_metrics_and_status_show_the_budget(runtime_factory, capsys):
    rt = runtime_factory(kinds=ECHO_KINDS, metrics_port=0, memory_budget=2 * 2**30)
    rt.call("", "echo_process", "k", "echo", {})
    rt.governor.sample()
    body = urllib.request.urlopen(f"http://127.0.0.1:{rt.metrics.port}/metrics", timeout=5).read()
    series = dict(
        line.rsplit(" ", 1) for line in body.decode().splitlines() if not line.startswith("#")
    )
    assert float(series["tether_memory_budget_bytes"]) == 2 * 2**30
    assert float(series['tether_memory_bytes{kind="echo_process"}']) > 2**20
    assert 0 < float(series["tether_memory_used_bytes"]) < 2 * 2**30
    assert float(series["tether_conversations_fit"]) >= 1
    # the governor keeps its summary beside the port file, for another process's status
    kept = rt.port_file.with_suffix(".capacity")  # (shutdown forgets the port file's path)
    summary = json.loads(kept.read_text())
    assert summary["budget"] == 2 * 2**30 and summary["budget_source"] == f"memory_budget={2**31}"
    assert status_main(rt.admin_port) == 0
    out = capsys.readouterr().out
    assert "capacity: " in out and "of 2048.0 MiB used" in out and "echo_process" in out
    rt.shutdown()
    assert not kept.exists()


def test_render_capacity():
    cap = {
        "budget": 4 * 2**30,
        "budget_source": "0.8 of physical memory",
        "used": 3 * 2**30,
        "used_source": "cgroup v1 /sys/fs/cgroup/memory/t",
        "reserved": 100 * 2**20,
        "free": 924 * 2**20,
        "by_kind": {"kernel": {"bytes": 2**30, "count": 9}, "tree": {"bytes": 2**28, "count": 12}},
        "conversations": 9,
        "average_conversation": 341 * 2**20,
        "fit": 2,
        "evictions": {"language_server": 3},
        "refusals": 1,
    }
    text = render_capacity(cap)
    assert text.splitlines() == [
        "capacity: 3072.0 MiB of 4096.0 MiB used (cgroup v1 /sys/fs/cgroup/memory/t; budget: "
        "0.8 of physical memory), 100.0 MiB reserved, 924.0 MiB free",
        "  9 conversations, average 341.0 MiB: 2 more fit",
        "  by kind: kernel 1024.0 MiB (9), tree 256.0 MiB (12)",
        "  evictions: language_server 3; refused: 1",
    ]
    drawn = render_tree({"name": "root", "capacity": cap}).splitlines()
    assert drawn[0].startswith("root") and drawn[1:] == text.splitlines()
