"""The chaos harness: conversations calling tools while faults are injected, checked
against the invariants of DESIGN.md (`tether chaos --duration S --workdir DIR`).

    from tether.chaos import ChaosConfig, run_chaos
    report = run_chaos(ChaosConfig(workdir=Path("checkout"), duration=60, runs=4))
    print(report.text()); assert report.ok

scratch: where it writes, and its self-checking files. invariants: the checks, pure.
workload: the conversations and what each call must answer. faults: what is injected and
what it took away. report: calls, faults, recoveries, latency, violations. harness: one
run. command: `tether chaos`.
"""

from tether.chaos.harness import ChaosConfig, run_chaos
from tether.chaos.report import Report

__all__ = ["ChaosConfig", "Report", "run_chaos"]
