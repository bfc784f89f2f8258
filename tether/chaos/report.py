"""The chaos report: calls, faults, recoveries, latency per tool, violations; as text
for a person and as JSON for a machine (`tether chaos --json`)."""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from tether.chaos.faults import Fault, Recovery
from tether.chaos.invariants import INVARIANTS, Violation
from tether.chaos.workload import CallRecord
from tether.json_types import JSONObject


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..100) of `values`; 0.0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(math.ceil(q / 100.0 * len(ordered)), 1)
    return ordered[rank - 1]


class ClassRecovery(TypedDict):
    """How one fault class's kills recovered (see `recovery_by_class`)."""

    kills: int
    observed: int
    recovered: int
    p50_s: float
    max_s: float


class ToolStats(TypedDict):
    """One tool's calls in a chaos run (`Report.per_tool`)."""

    calls: int
    ok: int
    errors: dict[str, int]  # error code -> how many
    error_examples: dict[str, str]  # error code -> the start of one such error's text
    p50_ms: float
    p99_ms: float
    max_ms: float


def recovery_by_class(recoveries: Sequence[Recovery]) -> dict[str, ClassRecovery]:
    """Per fault class, how its kills recovered: `kills`, `observed` (a later call of what
    it took away was made), `recovered` (one answered again), and the p50 and max seconds
    until then (0.0 when none recovered). A fault class whose kills all healed in a second
    and one that took 15 s read apart here, not as one overall figure."""
    by_class: dict[str, list[Recovery]] = collections.defaultdict(list)
    for r in recoveries:
        by_class[r.fault.fault].append(r)
    out: dict[str, ClassRecovery] = {}
    for name, rs in sorted(by_class.items()):
        after = [r.after for r in rs if r.after is not None]
        out[name] = {
            "kills": len(rs),
            "observed": sum(1 for r in rs if r.tried),
            "recovered": len(after),
            "p50_s": round(percentile(after, 50), 3),
            "max_s": round(max(after, default=0.0), 3),
        }
    return out


class ReportJSON(TypedDict):
    """A chaos run's report as `tether chaos --json` prints it (`Report.to_json`)."""

    ok: bool
    seed: int
    runs: int
    seconds: float
    workspace: str
    exercised: list[str]
    not_exercised: dict[str, str]
    calls: int
    calls_per_s: float
    per_tool: dict[str, ToolStats]
    faults: list[JSONObject]  # each Fault's fields
    faults_by_class: dict[str, int]
    faults_skipped: list[str]
    recoveries: int
    kills: int
    kills_observed: int
    unrecovered: list[str]
    recovery_p50_s: float
    recovery_max_s: float
    recovery_by_class: dict[str, ClassRecovery]
    processes_seen: int
    violations: list[JSONObject]  # each Violation's fields
    notices: list[JSONObject]
    violations_by_invariant: dict[str, int]
    notes: list[str]


@dataclass
class Report:
    seed: int
    runs: int
    seconds: float  # how long the load ran
    where: str  # the workspace, in words
    exercised: list[str]  # the workload's operations
    not_exercised: dict[str, str]  # operation -> why (a component missing here)
    calls: list[CallRecord]
    faults: list[Fault]
    skipped_faults: list[str]
    recoveries: list[Recovery]
    violations: list[Violation]
    notices: list[Violation] = field(default_factory=list)
    processes_seen: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def per_tool(self) -> dict[str, ToolStats]:
        by_tool: dict[str, list[CallRecord]] = collections.defaultdict(list)
        for call in self.calls:
            by_tool[call.tool].append(call)
        return {
            tool: {
                "calls": len(calls),
                "ok": sum(c.ok for c in calls),
                "errors": dict(collections.Counter(c.code for c in calls if not c.ok)),
                "error_examples": {c.code: c.error for c in calls if not c.ok},
                "p50_ms": round(1000 * percentile([c.took for c in calls], 50), 1),
                "p99_ms": round(1000 * percentile([c.took for c in calls], 99), 1),
                "max_ms": round(1000 * max(c.took for c in calls), 1),
            }
            for tool, calls in sorted(by_tool.items())
        }

    def recovered(self) -> list[float]:
        return [r.after for r in self.recoveries if r.after is not None]

    def unrecovered(self) -> list[str]:
        """Faults after which what they took away was called, and never answered."""
        return [r.fault.target for r in self.recoveries if r.after is None and r.tried]

    def to_json(self) -> ReportJSON:
        recovered = self.recovered()
        return {
            "ok": self.ok,
            "seed": self.seed,
            "runs": self.runs,
            "seconds": round(self.seconds, 2),
            "workspace": self.where,
            "exercised": self.exercised,
            "not_exercised": self.not_exercised,
            "calls": len(self.calls),
            "calls_per_s": round(len(self.calls) / self.seconds, 2) if self.seconds else 0.0,
            "per_tool": self.per_tool(),
            "faults": [vars(f) | {"affects": list(f.affects)} for f in self.faults],
            "faults_by_class": dict(collections.Counter(f.fault for f in self.faults)),
            "faults_skipped": self.skipped_faults,
            "recoveries": len(recovered),
            "kills": len(self.recoveries),
            "kills_observed": sum(1 for r in self.recoveries if r.tried),
            "unrecovered": self.unrecovered(),
            "recovery_p50_s": round(percentile(recovered, 50), 3),
            "recovery_max_s": round(max(recovered, default=0.0), 3),
            "recovery_by_class": recovery_by_class(self.recoveries),
            "processes_seen": self.processes_seen,
            "violations": [vars(v) for v in self.violations],
            "notices": [vars(v) for v in self.notices],
            "violations_by_invariant": {
                name: sum(v.invariant == name for v in self.violations) for name in INVARIANTS
            },
            "notes": self.notes,
        }

    def text(self) -> str:
        data = self.to_json()
        lines = [
            f"tether chaos: {data['runs']} conversations for {data['seconds']:.1f} s "
            f"(seed {self.seed}), {self.where}",
            f"calls: {data['calls']} ({data['calls_per_s']:.1f}/s)",
        ]
        width = max((len(t) for t in data["per_tool"]), default=4)
        for tool, row in data["per_tool"].items():
            errors = ", ".join(f"{code} {n}" for code, n in sorted(row["errors"].items()))
            lines.append(
                f"  {tool:<{width}} {row['calls']:>6} calls  p50 {row['p50_ms']:>8.1f} ms  "
                f"p99 {row['p99_ms']:>8.1f} ms  ok {row['ok']}"
                + (f"  ({errors})" if errors else "")
            )
        by_class = ", ".join(f"{k} {n}" for k, n in sorted(data["faults_by_class"].items()))
        lines.append(f"faults injected: {len(self.faults)} ({by_class or 'none'})")
        if self.skipped_faults:
            lines.append(f"  not injected (target gone or refused): {len(self.skipped_faults)}")
        lines.append(
            f"recoveries: {data['recoveries']} of {data['kills_observed']} kills seen by a later "
            f"call answered again (p50 {data['recovery_p50_s']:.2f} s, max "
            f"{data['recovery_max_s']:.2f} s); {data['kills']} kills in all"
        )
        for name, healed in data["recovery_by_class"].items():
            lines.append(
                f"  {name}: {healed['recovered']} of {healed['observed']} seen "
                f"({healed['kills']} kills), p50 {healed['p50_s']:.2f} s, "
                f"max {healed['max_s']:.2f} s"
            )
        if data["unrecovered"]:
            lines.append(
                "  not answered again before the end (not a violation by itself): "
                + ", ".join(data["unrecovered"][:8])
            )
        for op, why in self.not_exercised.items():
            lines.append(f"not exercised: {op} ({why})")
        lines.extend(self.notes)
        lines.append(f"processes seen: {self.processes_seen}")
        for detail, count in collections.Counter(n.detail for n in self.notices).items():
            lines.append(f"notice ({count}x, not an invariant violation): {detail}")
        if self.violations:
            lines.append(f"VIOLATIONS: {len(self.violations)}")
            lines.extend(f"  {v.line()}" for v in self.violations[:50])
            if len(self.violations) > 50:
                lines.append(f"  ... and {len(self.violations) - 50} more (--json lists all)")
        else:
            lines.append("violations: none")
        return "\n".join(lines)
