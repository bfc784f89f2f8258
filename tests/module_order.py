"""Longest test modules first, so two xdist workers finish together.

`--dist loadfile` hands a worker one module at a time, in collection order (with
`--no-loadscope-reorder`; xdist's own reorder is by test count, which put the one-test,
minute-long demo module last, alone on one core). This plugin sorts the collected items
by the seconds each module took in a recorded run (`module_seconds.json` beside it), the
longest first (longest-processing-time scheduling); a module not in the record counts as
the median one. Order within a module is kept.

Record a run's figures: `bash scripts/test.sh --junitxml=/tmp/j.xml`, then
`python -m tests.module_order /tmp/j.xml`.
"""

from __future__ import annotations

import json
import statistics
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

RECORD = Path(__file__).with_name("module_seconds.json")


def _recorded() -> dict[str, float]:
    try:
        data = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = _recorded()
    if not seconds:
        return
    default = statistics.median(seconds.values())
    position = {id(item): index for index, item in enumerate(items)}

    def key(item: pytest.Item) -> tuple[float, int]:
        module = item.nodeid.split("::", 1)[0]
        return (-seconds.get(module, default), position[id(item)])

    items.sort(key=key)


def record(junit_xml: str) -> dict[str, float]:
    """Seconds per test module (its tests' times summed) from a junit XML report."""
    per_module: dict[str, float] = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname is "tests.lsp.test_x" or "tests.lsp.test_x.TestClass": cut at the module
        while module and not module[-1].startswith("test_"):
            module.pop()
        if not module:
            continue
        path = "/".join(module) + ".py"
        per_module[path] = per_module.get(path, 0.0) + float(case.get("time", 0.0))
    return {path: round(s, 1) for path, s in sorted(per_module.items())}


if __name__ == "__main__":
    figures = record(sys.argv[1])
    RECORD.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"{len(figures)} modules, {sum(figures.values()):.0f} s in all -> {RECORD}")
