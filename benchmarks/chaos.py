"""What faults cost: the chaos workload (tether.chaos, `tether chaos`) twice with the same
seed, first without faults and then with them, and the throughput of each.

    python benchmarks/chaos.py [--duration 60] [--runs 4] [--interval 2] [--seed N]
                               [--workdir examples/sample_project] [--json out.json]

Prints both reports and the ratio of calls/s with faults to without; exits 1 if either
run broke an invariant. The harness itself (workload, faults, checks) is tether.chaos.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tether.chaos import ChaosConfig, Report, run_chaos  # noqa: E402
from tether.chaos.faults import CLASSES  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample_project"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--interval", type=float, default=2.0, help="s between faults")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workdir", type=Path, default=SAMPLE)
    parser.add_argument("--json", type=Path, default=None, help="write both reports here")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)

    def chaos(faults: bool) -> Report:
        config = ChaosConfig(
            workdir=args.workdir,
            duration=args.duration,
            runs=args.runs,
            seed=seed,
            interval=args.interval,
            faults=CLASSES if faults else (),
        )
        return run_chaos(config)

    baseline = chaos(faults=False)
    print(f"--- without faults\n{baseline.text()}")
    faulted = chaos(faults=True)
    print(f"--- with a fault every {args.interval:g} s\n{faulted.text()}")
    base, hit = baseline.to_json(), faulted.to_json()
    ratio = hit["calls_per_s"] / base["calls_per_s"] if base["calls_per_s"] else 0.0
    print(
        f"calls/s without faults {base['calls_per_s']:.1f}, with {hit['calls_per_s']:.1f} "
        f"({ratio:.2f}x); violations {len(baseline.violations)} / {len(faulted.violations)}"
    )
    if args.json:
        args.json.write_text(json.dumps({"seed": seed, "baseline": base, "faults": hit}))
    return 0 if baseline.ok and faulted.ok else 1


if __name__ == "__main__":
    sys.exit(main())
