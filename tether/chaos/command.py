"""`tether chaos`: the chaos harness as a command (see tether.chaos)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tether.chaos.faults import CLASSES
from tether.chaos.harness import ChaosConfig, run_chaos
from tether.chaos.workload import OPS
from tether.runtime import RuntimeStartError

DESCRIPTION = """\
Run a mixed workload of tool calls from several conversations against DIR while faults
are injected (language servers, parser actors, run actors, supervisors, the top of the
tree, kernels, debug adapters and vibe workers killed; replies delayed and dropped), and
check the invariants: every call answered within its deadline with no other call's reply,
no partial write, no orphan process, no tier violation, nothing written outside the
working directory. Prints a report (calls, faults, recoveries, p50/p99 per tool,
violations); exits 1 on any violation.

DIR is never changed: by default the harness works on a scratch copy of it (in the
system's temporary directory, removed at the end); with --in-place it works in DIR itself
but writes only in a folder of its own there (tether-chaos-<id>/, removed at the end).
The project's own files are only read."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tether chaos",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--workdir",
        required=True,
        type=Path,
        metavar="DIR",
        help="the project to point the load at (copied unless --in-place)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds of load and faults (default 60)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=4,
        metavar="N",
        help="conversations calling tools (default 4), plus a read-only guard",
    )
    parser.add_argument("--seed", type=int, help="replay a run's random choices (default: fresh)")
    parser.add_argument(
        "--interval",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds between faults (default 2)",
    )
    parser.add_argument(
        "--faults",
        default=",".join(CLASSES),
        metavar="LIST",
        help=f"fault classes to inject, comma-separated (default all: "
        f"{','.join(CLASSES)}; 'none' for a baseline)",
    )
    parser.add_argument(
        "--ops",
        default=",".join(OPS),
        metavar="LIST",
        help=f"operations of the workload (default all: {','.join(OPS)})",
    )
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="work in DIR itself (writing only in a folder of its own)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the scratch files afterwards (their path is printed)",
    )
    parser.add_argument(
        "--no-guard",
        action="store_true",
        help="without the read-only guard conversation (tier checks)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON on stdout (progress stays on stderr)",
    )
    return parser  # fmt: skip


def _list(text: str) -> list[str]:
    return [] if text.strip() == "none" else [p.strip() for p in text.split(",") if p.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = ChaosConfig(
            workdir=args.workdir,
            duration=args.duration,
            runs=args.runs,
            seed=args.seed,
            interval=args.interval,
            faults=_list(args.faults),
            ops=_list(args.ops),
            in_place=args.in_place,
            keep=args.keep,
            guard=not args.no_guard,
        )
        if not args.workdir.is_dir():
            raise ValueError(f"--workdir {str(args.workdir)!r} is not a directory")
    except ValueError as exc:
        parser.error(str(exc))
    try:
        report = run_chaos(config)
    except RuntimeStartError as exc:
        print(f"tether chaos: the runtime did not start: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
