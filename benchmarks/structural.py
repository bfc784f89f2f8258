"""Structural search vs the ast-grep CLI on the running Python's standard library.

    python benchmarks/structural.py [--patterns N] [--no-runtime]

The corpus is a copy of `sysconfig.get_paths()["stdlib"]` without `site-packages` and
`__pycache__` (real code no one here wrote, on every machine), so both tools scan exactly
the same files. For each pattern:

- CLI: `ast-grep run -p PAT -l python --json=compact DIR`, wall time of the process
  (after one untimed run that warms the OS page cache for both sides);
- cold: `ast_grep` through a real Run on a real Runtime (the parser pool's processes are
  already up; their parse caches are cleared before the call);
- warm: the same call again (second search in the same run, caches filled).

Targets (issue #25, tightening issue #4's 2x and 0.5x): equal counts (where they differ, the
reason is one the differential suite names); cold <= 0.8x the CLI; warm <= 0.1x the CLI.

members (issue #25): a member pattern searched in all the member rungs that read it
against its costliest single rung, on TypeScript's lib .d.ts files (target <= 1.5x).

Then (issue #17, not with --no-runtime):

- second: a fresh run (caches cleared) searches one pattern, waits 3 s, and searches
  another; the second is timed against the CLI (target <= 0.5x: the first search's
  background indexing warmed the rest of the language);
- multi: 8 runs search 8 different patterns at once; p50 and p99 of the per-search wall
  time, and the same for 8 CLI processes started at once;
- pathological: several `$$$` against long argument lists, code nested thousands of
  levels, a multi-megabyte line with many matches, and a sequence pattern on deeply nested
  and on very long blocks, each through ast_grep (it must end within its budget, a result
  or a budget error), while another run repeats a trivial search (target: each under
  0.5 s).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PATTERNS = [
    "print($A)",
    "isinstance($X, $T)",
    "$A.append($B)",
    "len($X) == 0",
    "raise $E($$$)",
    "self.$A = $A",
    "$X is None",
    "with open($$$A) as $F: $$$B",
    "super().__init__($$$)",
    "for $K, $V in $D.items(): $$$B",
]


def copy_corpus(dst: Path) -> tuple[int, int]:
    src = Path(sysconfig.get_paths()["stdlib"])
    shutil.copytree(
        src,
        dst,
        ignore=shutil.ignore_patterns("site-packages", "__pycache__", "*.pyc"),
        symlinks=True,
    )
    files = [p for p in dst.rglob("*") if p.suffix in (".py", ".pyi") and p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


CLI_HITS: dict[str, set[tuple[str, int]]] = {}


def cli(pattern: str, root: Path) -> tuple[int, float]:
    exe = shutil.which("ast-grep") or shutil.which("sg")
    if exe is None:
        raise SystemExit("ast-grep CLI not found: pip install ast-grep-cli")
    t = time.perf_counter()
    out = subprocess.run(
        [exe, "run", "-p", pattern, "-l", "python", "--json=compact", str(root)],
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - t
    hits = json.loads(out.stdout or b"[]")
    CLI_HITS[pattern] = {
        (str((root / h["file"]).resolve()), h["range"]["start"]["line"] + 1) for h in hits
    }
    return len(hits), wall


def explain(pattern: str, root: Path) -> list[str]:
    """Why the counts differ, match by match (untimed, in-process)."""
    from tether.structural.search import search_dir

    ours = {
        (str(Path(m["path"]).resolve()), m["start_line"]): m
        for m in search_dir(pattern, "python", str(root))
    }
    theirs = CLI_HITS.get(pattern, set())
    reasons: dict[str, int] = {}
    for key in sorted(set(ours) - theirs):
        data = Path(key[0]).read_bytes()
        try:
            data.decode("utf-8")
            why = (
                "a `\\` line continuation inside the match (SPEC: 'however it is wrapped')"
                if "\\\n" in ours[key]["text"]
                else "unexplained"
            )
        except UnicodeDecodeError:
            why = "file is not UTF-8 (the CLI skips it; we search its bytes)"
        reasons[why] = reasons.get(why, 0) + 1
    for _key in sorted(theirs - set(ours)):
        reasons["found only by the CLI"] = reasons.get("found only by the CLI", 0) + 1
    return [f"  {pattern}: +{n} {why}" for why, n in reasons.items()]


SECOND = ("print($A)", "isinstance($X, $T)")
MULTI = [
    "print($A)", "isinstance($X, $T)", "$A.append($B)", "len($X) == 0",
    "raise $E($$$)", "$X is None", "super().__init__($$$)", "self.$A = $A",
]  # fmt: skip


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_second(rt: Any, corpus: Path, handler: Any, clear: Any) -> None:
    """The second search of a fresh run, 3 s after its first, against the CLI."""
    clear()
    run = rt.open_run("bench-second", workdir=str(corpus))
    t = time.perf_counter()
    handler(run.context(), {"pattern": SECOND[0], "language": "python"})
    first = time.perf_counter() - t
    time.sleep(3.0)
    t = time.perf_counter()
    res = handler(run.context(), {"pattern": SECOND[1], "language": "python"})
    second = time.perf_counter() - t
    n_cli, t_cli = cli(SECOND[1], corpus)
    run.close()
    print(
        f"second search 3 s after the first: first {first:.2f} s, second {second:.2f} s "
        f"({res.data['total']} matches), CLI {t_cli:.2f} s ({n_cli}); second/CLI "
        f"{second / t_cli:.2f} (target <= 0.50)"
    )


def bench_multi(rt: Any, corpus: Path, handler: Any) -> None:
    """8 runs, 8 patterns at once: p50/p99 per search, and the CLI the same way."""
    runs = [rt.open_run(f"bench-multi-{i}", workdir=str(corpus)) for i in range(len(MULTI))]

    def ours(i: int) -> float:
        t = time.perf_counter()
        handler(runs[i].context(), {"pattern": MULTI[i], "language": "python"})
        return time.perf_counter() - t

    def theirs(i: int) -> float:
        return cli(MULTI[i], corpus)[1]

    for name, fn in (("tether", ours), ("CLI", theirs)):
        walls: list[float] = []
        for _ in range(3):  # three rounds of 8 at once
            with concurrent.futures.ThreadPoolExecutor(len(MULTI)) as pool:
                walls.extend(pool.map(fn, range(len(MULTI))))
        print(
            f"multi-run ({len(MULTI)} at once, 3 rounds) {name:6}: p50 {pct(walls, 0.5):.2f} s, "
            f"p99 {pct(walls, 0.99):.2f} s"
        )
    for run in runs:
        run.close()


def pathological_corpus(root: Path) -> dict[str, tuple[str, str, Path]]:
    """name -> (pattern, language, directory) of each pathological case."""
    cases: dict[str, tuple[str, str, Path]] = {}

    def case(name: str, pattern: str, lang: str, directory: str, files: dict[str, str]) -> None:
        d = root / directory
        d.mkdir(parents=True)
        for fname, text in files.items():
            (d / fname).write_text(text)
        cases[name] = (pattern, lang, d)

    args = ", ".join(["a"] * 80)
    case(
        "4 x $$$ on 80-argument calls", "f($$$A, a, $$$B, a, $$$C, c)", "python", "ellipses",
        {"calls.py": "c = 1\n" + f"f({args})\n" * 400},
    )  # fmt: skip
    case(
        "code nested 3000 calls deep", "g(g(g($X)))", "python", "deep",
        {"deep.py": "x = " + "g(" * 3000 + "1" + ")" * 3000 + "\n"},
    )  # fmt: skip
    case(
        "2 MB line, 300k matches", "h($X)", "python", "longline",
        {"line.py": "x = [" + "h(1), " * 300_000 + "]\n"},  # ~2 MB, one line
    )  # fmt: skip
    case(
        "sequence, 4000 blocks nested (js)", "a($X); b($Y);", "javascript", "deepseq",
        {"deep.js": "{ a(1); b(2); " * 4000 + "}" * 4000 + "\n"},
    )  # fmt: skip
    case(
        "sequence, one 12k-statement block (js)", "a($X); b($Y);", "javascript", "longblock",
        {"block.js": "function f() {" + " a(1); b(2); x();" * 4000 + "}\n"},
    )  # fmt: skip
    return cases


def bench_pathological(rt: Any, handler: Any, tmp: Path) -> None:
    """Each pathological search ends within its budget while another run's trivial search
    keeps answering."""
    from tether.actors.parser import POOL_KEYS
    from tether.structural.scan import shard_of

    work = tmp / "patho"
    cases = pathological_corpus(work)
    # a search of one file asks only the slot that owns it: the trivial search is made on
    # the pathological case's own slot, where it has to wait its turn
    trivial_files: dict[int, str] = {}
    for i in range(64):
        path = work / f"trivial{i}.py"
        path.write_text("def k(x):\n    return trivial_call(x)\n")
        trivial_files.setdefault(shard_of(str(path), len(POOL_KEYS)), path.name)
    slow_run = rt.open_run("bench-patho", workdir=str(work))
    fast_run = rt.open_run("bench-trivial", workdir=str(work))
    for name, (pattern, lang, where) in cases.items():
        slot = shard_of(str(next(where.iterdir())), len(POOL_KEYS))
        trivial = {"pattern": "trivial_call($X)", "language": "python"}
        trivial["path"] = trivial_files[slot]
        handler(fast_run.context(), trivial)
        args = {"pattern": pattern, "language": lang, "path": where.name}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            t = time.perf_counter()
            slow = pool.submit(handler, slow_run.context(), args)
            lat: list[float] = []
            while not slow.done():
                t1 = time.perf_counter()
                handler(fast_run.context(), trivial)
                lat.append(time.perf_counter() - t1)
                time.sleep(0.05)
            res = slow.result()
            took = time.perf_counter() - t
        outcome = res.text.splitlines()[0][:60]
        worst = max(lat) if lat else 0.0
        print(
            f"pathological {name:38}: {took:6.2f} s -> {outcome!r}; concurrent trivial "
            f"search: {len(lat)} calls, max {worst:.2f} s, p50 "
            f"{pct(lat, 0.5) if lat else 0.0:.2f} s (target < 0.50)"
        )
    slow_run.close()
    fast_run.close()


MEMBER_PATTERNS = ["readonly $F: $T;", "$M($$$P): $R;", "$F?: $T;"]


def bench_members() -> None:
    """A member pattern searched in every member rung that reads it (class, interface,
    object type) against the same search in one rung, on TypeScript's lib .d.ts files,
    warm (trees cached), in-process, best of 3. The one rung is the costliest single
    reading (the one with the most matches: each match costs its record), so the ratio is
    what trying the other rungs adds (target <= 1.5)."""
    import dataclasses

    from tether.structural.cache import ParseCache
    from tether.structural.pattern import compile_pattern
    from tether.structural.search import search_paths

    lib = Path(sys.prefix) / "lib" / "node_modules" / "typescript" / "lib"
    if not lib.is_dir():
        print(f"members: skipped ({lib} not found; scripts/install.sh puts typescript there)")
        return
    cache = ParseCache()

    def best(p: Any) -> tuple[float, int]:
        walls, total = [], 0
        for _ in range(3):
            t = time.perf_counter()
            results, _ = search_paths(p, str(lib), cache)
            walls.append(time.perf_counter() - t)
            total = sum(r.total for r in results)
        return min(walls), total

    for pattern in MEMBER_PATTERNS:
        compiled = compile_pattern(pattern, "typescript")
        search_paths(compiled, str(lib), cache)  # parse once (untimed)
        t_all, n_all = best(compiled)
        singles = [
            best(dataclasses.replace(v, alternatives=(), same_in=())) for v in compiled.variants
        ]
        t_one, n_one = max(singles)
        print(
            f"members {pattern:18}: {len(compiled.contexts)} rungs ({len(compiled.variants)} "
            f"readings) {t_all:.3f} s ({n_all} matches); costliest one rung {t_one:.3f} s "
            f"({n_one}); ratio {t_all / t_one:.2f} (target <= 1.50)"
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--patterns", type=int, default=len(PATTERNS))
    ap.add_argument("--no-runtime", action="store_true", help="in-process, one process")
    ap.add_argument(
        "--only",
        choices=["table", "second", "multi", "pathological", "members"],
        action="append",
        help="run only these parts (repeatable); default all",
    )
    opts = ap.parse_args()
    patterns = PATTERNS[: opts.patterns]
    if opts.only == ["members"]:
        bench_members()
        return 0

    from tether.actors.parser import POOL_KEYS
    from tether.messages.parser_ops import Clear, Stats

    tmp = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    corpus = tmp / "stdlib"
    nfiles, nbytes = copy_corpus(corpus)
    print(f"corpus: {nfiles} python files, {nbytes / 2**20:.1f} MiB ({corpus})")
    cli(patterns[0], corpus)  # warm the OS page cache for both sides (untimed)

    rt = None
    try:
        if opts.no_runtime:
            from tether.run import Run

            run = Run(workdir=corpus)
            pool = "in-process (1 process)"

            def clear() -> None:
                from tether.tools.structural import local_cache

                local_cache().clear()
        else:
            from tether.runtime import Runtime

            rt = Runtime.start()
            run = rt.open_run("bench", workdir=str(corpus))
            for key in POOL_KEYS:  # start the pool's processes (not part of a search)
                rt.call("bench", "parser", key, Stats(), None, 30)
            pool = f"parser pool of {len(POOL_KEYS)} actor processes"

            def clear() -> None:
                for key in POOL_KEYS:
                    rt.call("bench", "parser", key, Clear(), None, 30)

        from tether.tools.structural import specs

        handler = {s.name: s.handler for s in specs()}["ast_grep"]

        def ours(pattern: str) -> tuple[int, float]:
            t = time.perf_counter()
            res = handler(run.context(), {"pattern": pattern, "language": "python"})
            wall = time.perf_counter() - t
            if res.is_error:
                raise SystemExit(f"ast_grep failed on {pattern!r}: {res.text}")
            return int(res.data["total"]), wall

        print(f"tether: {pool}; machine: {os.cpu_count()} cores\n")
        parts = set(opts.only or ["table", "second", "multi", "pathological", "members"])
        if "members" in parts:
            bench_members()
        if rt is not None and "second" in parts:
            bench_second(rt, corpus, handler, clear)
        if rt is not None and "multi" in parts:
            bench_multi(rt, corpus, handler)
        if rt is not None and "pathological" in parts:
            bench_pathological(rt, handler, tmp)
        if "table" not in parts:
            return 0
        head = f"{'pattern':34} {'CLI n':>6} {'ours n':>6} {'CLI s':>6} {'cold s':>6} {'warm s':>6} {'cold/CLI':>8} {'warm/CLI':>8}"
        print(head)
        print("-" * len(head))
        rows = []
        for pattern in patterns:
            n_cli, t_cli = cli(pattern, corpus)
            clear()
            n_cold, t_cold = ours(pattern)
            n_warm, t_warm = ours(pattern)
            assert n_cold == n_warm
            rows.append((pattern, n_cli, n_cold, t_cli, t_cold, t_warm))
            flag = "" if n_cli == n_cold else "  <- counts differ"
            print(
                f"{pattern:34} {n_cli:6d} {n_cold:6d} {t_cli:6.2f} {t_cold:6.2f} {t_warm:6.2f} "
                f"{t_cold / t_cli:8.2f} {t_warm / t_cli:8.2f}{flag}"
            )
        notes = [line for r in rows if r[1] != r[2] for line in explain(r[0], corpus)]
        if notes:
            print("\ncount differences, explained:")
            print("\n".join(notes))
        cold = statistics.median(r[4] / r[3] for r in rows)
        warm = statistics.median(r[5] / r[3] for r in rows)
        equal = sum(1 for r in rows if r[1] == r[2])
        print(
            f"\nmedian cold/CLI {cold:.2f} (target <= 0.80), median warm/CLI {warm:.2f} "
            f"(target <= 0.10), equal counts {equal}/{len(rows)}"
        )
    finally:
        if rt is not None:
            rt.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
