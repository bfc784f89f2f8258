"""Fair, bounded search (issue #17, problem 3): budgets, memoised `$$$`, cheap candidate
walks and positions, and a parser pool that keeps answering other runs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tether.messages.parser_ops import Search, Stats
from tether.structural import ops
from tether.structural.budget import Budget, BudgetExceeded
from tether.structural.cache import ParseCache
from tether.structural.search import Positions, search_source

FOUR_RUNS = "f($$$A, a, $$$B, a, $$$C, c)"  # no match: `c` is never an argument


def _args(n: int) -> str:
    return "f(" + ", ".join(["a"] * n) + ")\n"


def _steps(pattern: str, code: str) -> int:
    budget = Budget(seconds=600, steps=10**12, node_steps=10**12)
    search_in(pattern, code, budget)
    return budget.steps


def search_in(pattern: str, code: str, budget: Budget) -> list[Any]:
    from tether.structural.languages import get_parser
    from tether.structural.pattern import compile_pattern
    from tether.structural.query import CandidateQuery
    from tether.structural.search import find_in_tree

    p = compile_pattern(pattern, "python")
    src = code.encode()
    tree = get_parser("python").parse(src)
    return find_in_tree(p, CandidateQuery(p), tree.root_node, src, budget)


def test_several_ellipses_backtrack_in_polynomial_steps() -> None:
    # unmemoised, each `$$$` multiplied the work by the list length (exponential in the
    # number of runs); remembered failed states make doubling the list ~4x the steps
    small = _steps(FOUR_RUNS, "c = 1\n" + _args(20))
    big = _steps(FOUR_RUNS, "c = 1\n" + _args(40))
    assert big < 6 * small, (small, big)
    assert big < 200_000


def test_backtracking_still_finds_the_match_it_needs() -> None:
    # lazy `$$$A` first takes nothing; `a, c` then fails at `x`, so it must backtrack
    got = search_source("f($$$A, a, c, $$$B)", "f(a, x, a, c, y)\n", "python")
    assert [m["captures"] for m in got] == [{"A": "a, x", "B": "y"}]


def test_a_candidate_past_its_step_allowance_is_a_sentence_naming_where() -> None:
    budget = Budget(seconds=600, node_steps=20_000)
    budget.where = "big.py"
    with pytest.raises(BudgetExceeded) as err:
        search_in(FOUR_RUNS, "c = 1\n" + _args(200), budget)
    msg = str(err.value)
    assert "big.py:2" in msg and "more specific" in msg and "`$$$`" in msg


def test_a_search_past_its_time_is_stopped_with_what_to_narrow(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text("c = 1\n" + _args(60) * 400)
    t = time.monotonic()
    with pytest.raises(BudgetExceeded) as err:
        ops.op_search(
            ParseCache(),
            Search(root=str(tmp_path), lang="python", pattern=FOUR_RUNS, budget_s=0.3),
        )
    assert time.monotonic() - t < 5.0  # the budget is checked every few thousand steps
    assert "0.3 s" in str(err.value) and "smaller `path`" in str(err.value)


def test_a_cancelled_budget_stops_at_the_next_check() -> None:
    budget = Budget()
    budget.cancel("the run closed")
    with pytest.raises(BudgetExceeded, match="cancelled \\(the run closed\\)"):
        search_in("f($X)", "f(1)\n" * 5000, budget)


def test_the_budget_lets_a_scheduler_in_many_times_within_one_candidate() -> None:
    # a job's generator yields only between candidates; one candidate of 80 arguments is
    # ~85k matcher steps, so the slot's scheduler gets in through the budget's checks
    lines: list[int] = []
    budget = Budget(seconds=600, node_steps=10**9)
    budget.pause = lambda: lines.append(budget.line)
    search_in(FOUR_RUNS, "c = 1\n" + _args(80), budget)
    assert budget.steps > 50_000
    assert len([line for line in lines if line == 2]) >= budget.steps // 4096 // 2, lines


def test_comparing_a_repeated_metavariable_is_budgeted_work() -> None:
    # `$A == $A` compares two whole subtrees: 40k node pairs here, all in one candidate
    side = "f(" + ", ".join(str(i) for i in range(20_000)) + ")"
    budget = Budget(seconds=600, node_steps=10**9)
    pauses: list[int] = []
    budget.pause = lambda: pauses.append(budget.steps)
    assert len(search_in("$A == $A", f"x = {side} == {side}\n", budget)) == 1
    assert budget.steps > 40_000 and len(pauses) >= 5, (budget.steps, len(pauses))
    with pytest.raises(BudgetExceeded, match="more than 10,000 steps"):
        search_in("$A == $A", f"x = {side} == {side}\n", Budget(node_steps=10_000))


def test_a_search_keeps_only_the_matches_it_shows_and_counts_them_all(tmp_path: Path) -> None:
    code = "x = [" + "h(g(h(1))), " * 3000 + "]\n" + "h(2)\n" * 100
    (tmp_path / "a.py").write_text(code)
    every = search_source("h($X)", code, "python")
    got = ops.op_search(
        ParseCache(), Search(root=str(tmp_path), lang="python", pattern="h($X)", limit=7)
    )
    assert got.total == len(every) == 6100
    shown = [(m.start_line, m.start_col, m.text) for m in got.matches]
    assert shown == [(m["start_line"], m["start_col"], m["text"]) for m in every[:7]]


def test_candidates_in_deep_code_cost_no_parent_walks() -> None:
    # `Node.parent` walks down from the root: per candidate, depth x nesting. Thousands of
    # levels of nesting, every level a candidate: the cursor walk keeps it linear-ish.
    def timed(depth: int) -> float:
        code = "x = " + "g(" * depth + "1" + ")" * depth + "\n"
        t = time.perf_counter()
        got = search_source("g(g($X))", code, "python")
        assert len(got) == depth - 1
        return time.perf_counter() - t

    # the best of three each: one 6 ms sample beside a scheduler stall made a 43x ratio in CI
    small, big = min(timed(250) for _ in range(3)), min(timed(1000) for _ in range(3))
    assert big < 3.0
    assert big < 40 * small, (small, big)  # 4x the depth: not 16x (or worse)


@pytest.mark.parametrize(
    "code",
    [
        lambda n: "{ a(1); b(2); " * n + "}" * n + "\n",  # nested n blocks deep
        lambda n: "function f() {" + " a(1); b(2); x();" * n + "}\n",  # one block, 3n long
    ],
    ids=["deep", "long-block"],
)
def test_sequence_patterns_cost_no_parent_walks_nor_sibling_lists_per_candidate(
    code: Any,
) -> None:
    # A sequence was tried per candidate first node: its parent (`Node.parent` walks down
    # from the root: the depth) and all its siblings (the block's length) each time -
    # quadratic in both cases (8x the code took 64x: 11 s for a 12,000-statement block).
    # Tried per parent instead, each parent's children listed once: linear.
    from tether.structural.languages import get_parser
    from tether.structural.pattern import compile_pattern
    from tether.structural.query import CandidateQuery
    from tether.structural.search import find_in_tree

    p = compile_pattern("a($X); b($Y);", "javascript")
    assert p.is_sequence

    def best_of_5(n: int) -> float:  # (5: a full run's other workers load both cores)
        src = code(n).encode()
        tree = get_parser("javascript").parse(src)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            got = find_in_tree(p, CandidateQuery(p), tree.root_node, src)
            times.append(time.perf_counter() - t)
            assert len(got) == n
        return min(times)

    small, big = best_of_5(500), best_of_5(4000)
    # 8x the code: ~8x, where it was ~64x; half of that is the bound (a full run here once
    # measured 25.2x with the best of 3: 10 ms, then 256 ms)
    assert big < 32 * small, (small, big)
    assert big < 5.0


def test_positions_on_a_huge_line_are_computed_in_one_pass() -> None:
    line = ("f(1); " * 200_000).encode()  # 1.2 MB on one line, 200k offsets
    pos = Positions(line)
    t = time.perf_counter()
    last = (0, 0)
    for k in range(0, 200_000, 7):
        last = pos(k * 6)
    assert last == (1, (200_000 - 1) // 7 * 7 * 6 + 1)
    assert time.perf_counter() - t < 2.0  # from the line start each time: minutes


def test_positions_answer_out_of_order_and_across_lines() -> None:
    src = "ab\né€x\n\nz".encode()
    pos = Positions(src)
    assert pos(src.index(b"x")) == (2, 3)
    assert pos(0) == (1, 1)
    assert pos(src.index(b"z")) == (4, 1)
    assert pos(src.index(b"\xe2")) == (2, 2)
    assert pos(len(src)) == (4, 2)


def test_a_binary_file_named_py_is_skipped_and_counted(tmp_path: Path) -> None:
    (tmp_path / "blob.py").write_bytes(b"foo(1)\n\0\x01\x02binary")
    (tmp_path / "real.py").write_text("foo(2)\n")
    got = ops.op_search(ParseCache(), Search(root=str(tmp_path), lang="python", pattern="foo($X)"))
    assert got.total == 1 and got.matches[0].path.endswith("real.py")
    assert got.stats["binary"] == 1


# --- the pool: a pathological search of one run does not hold up another run -----------


@pytest.mark.slow
def test_a_trivial_search_answers_while_another_runs_pathological_one(
    runtime: Any, tmp_path: Path
) -> None:
    from tether.actors.parser import POOL_KEYS
    from tether.structural.scan import shard_of

    (tmp_path / "p.py").write_text("c = 1\n" + _args(80) * 200)  # ~0.15 s per line
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(f"g({i})\n")
    slot = POOL_KEYS[shard_of(str(tmp_path / "p.py"), len(POOL_KEYS))]
    runtime.open_run("conv-slow", workdir=str(tmp_path))
    fast = runtime.open_run("conv-fast", workdir=str(tmp_path))
    assert fast.call("ast_grep", {"pattern": "g($X)", "language": "python"}).data["total"] == 6
    outcome: dict[str, Any] = {}

    def pathological() -> None:
        t = time.monotonic()
        try:
            runtime.call(
                "conv-slow", "parser", slot, "search",
                {"root": str(tmp_path), "lang": "python", "pattern": FOUR_RUNS,
                 "files": ["p.py"], "budget_s": 4.0},
                60,
            )  # fmt: skip
        except Exception as exc:  # the budget error: what we expect
            outcome["error"] = str(exc)
        outcome["took"] = time.monotonic() - t

    slow = threading.Thread(target=pathological)
    slow.start()
    try:
        time.sleep(0.5)  # let the pathological search get going (not synchronisation)
        latencies = []
        for _ in range(3):
            t = time.monotonic()
            res = fast.call("ast_grep", {"pattern": "g($X)", "language": "python"})
            latencies.append(time.monotonic() - t)
            assert not res.is_error and res.data["total"] == 6, res.text
        still_running = slow.is_alive()
    finally:
        slow.join(60)
    assert still_running, outcome  # the trivial searches were served *during* the slow one
    assert max(latencies) < 2.0, latencies  # target 0.5 s; the machine is shared and loaded
    assert "budget" in outcome.get("error", ""), outcome
    assert outcome["took"] < 4.0 + 3.0, outcome  # ends within its budget (plus one slice)


@pytest.mark.slow
def test_a_search_whose_caller_gave_up_leaves_the_slot_free(runtime: Any, tmp_path: Path) -> None:
    from conftest import wait_until

    from tether.actors.parser import POOL_KEYS
    from tether.structural.scan import shard_of

    (tmp_path / "p.py").write_text("c = 1\n" + _args(80) * 200)
    slot = POOL_KEYS[shard_of(str(tmp_path / "p.py"), len(POOL_KEYS))]
    runtime.open_run("conv-gone", workdir=str(tmp_path))
    with pytest.raises(Exception):  # noqa: B017 - the deadline error, whatever its type
        runtime.call(
            "conv-gone", "parser", slot, "search",
            {"root": str(tmp_path), "lang": "python", "pattern": FOUR_RUNS, "files": ["p.py"]},
            1.0,
        )  # fmt: skip

    def idle() -> bool:
        health = runtime.health()
        return "'jobs': 0" in str(health)

    wait_until(idle, timeout=10)


def test_background_indexing_leaves_big_and_binary_files_to_the_search(tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * (ops.INDEX_MAX_FILE_BYTES // 6 + 10))
    (tmp_path / "blob.py").write_bytes(b"\0binary")
    (tmp_path / "small.py").write_text("y = 2\n")
    cache = ParseCache()
    queue = [(str(p), "python") for p in (big, tmp_path / "blob.py", tmp_path / "small.py")]
    assert ops.index_some(cache, queue, 16, seconds=10.0) == 1
    assert cache.stats()["trees"] == 1 and not queue


def test_a_big_file_is_parsed_in_slices_to_the_same_tree(tmp_path: Path) -> None:
    from tether.structural.cache import PARSE_SLICE, SLICED_PARSE_BYTES
    from tether.structural.languages import get_parser

    path = tmp_path / "line.py"
    path.write_text("x = [" + "h(1), " * (SLICED_PARSE_BYTES // 3) + "]\n")
    cache = ParseCache()
    entry = cache.source(str(path), "python")
    steps = cache.tree_in_slices(str(path), "python", entry)
    slices = 0
    longest = 0.0
    while True:
        t = time.perf_counter()
        try:
            next(steps)
        except StopIteration as done:
            tree = done.value
            break
        longest = max(longest, time.perf_counter() - t)
        slices += 1
    assert slices >= 2  # it gave way while parsing
    assert longest < PARSE_SLICE + 1.0
    assert str(tree.root_node) == str(get_parser("python").parse(entry.source).root_node)
    assert cache.tree(str(path), "python", entry) is tree and cache.parses == 1


def _slot_jobs(runtime: Any, slot: str) -> dict[str, int]:
    return runtime.call("probe", "parser", slot, Stats(), None, 30)["jobs"]


@pytest.mark.slow
def test_a_trivial_search_is_not_queued_behind_one_endless_candidate(
    runtime: Any, tmp_path: Path
) -> None:
    # One candidate whose matching would take minutes (a generator cannot yield inside
    # it). Before the slot preempted at budget checks, any call to that slot waited for
    # the whole candidate: no trivial search could answer while it ran. Judged by order
    # (answered while the slow call is still out, sent well after it), not by a latency
    # bound. The slow call lasts until the test cancels it (a deadline could end it before
    # the probe saw it: a state waited for must last), and the cancel frees the slot.
    from conftest import wait_until

    from tether.actors.parser import POOL_KEYS
    from tether.call_scope import CancelHandle

    (tmp_path / "p.py").write_text("c = 1\n" + _args(1000))
    (tmp_path / "t.py").write_text("g(1)\n")
    slot = POOL_KEYS[0]
    runtime.open_run("conv-slow", workdir=str(tmp_path))
    fast = runtime.open_run("conv-fast", workdir=str(tmp_path))
    trivial = {"pattern": "g($X)", "language": "python", "path": "t.py"}
    assert fast.call("ast_grep", trivial).data["total"] == 1  # routes learned, warm
    outcome: dict[str, Any] = {}
    cancel = CancelHandle()

    def endless() -> None:
        try:
            runtime.call(
                "conv-slow", "parser", slot,
                Search(root=str(tmp_path), lang="python", pattern=FOUR_RUNS, files=["p.py"],
                       budget_s=300, budget_node_steps=10**9),
                None, 300.0, cancel=cancel,
            )  # fmt: skip
        except Exception as exc:  # cancelled: what we expect
            outcome["error"] = str(exc)

    # this thread's first call to the slot learns its route: a later one goes on its call
    # channel, which the slot reads at its budget checks, and not through thespian, which
    # waits out the endless candidate (a full run saw a Stats wait 30 s: the trivial search
    # above may have gone to another slot)
    assert _slot_jobs(runtime, slot).get("conv-slow") is None
    slow = threading.Thread(target=endless)
    slow.start()
    try:
        wait_until(lambda: _slot_jobs(runtime, slot).get("conv-slow"), timeout=30)
        for _ in range(3):
            res = fast.call("ast_grep", trivial)
            assert not res.is_error and res.data["total"] == 1, res.text
            assert slow.is_alive(), outcome  # answered while the slow one still runs
    finally:
        cancel.cancel("the test is done with it")
        cancelled_at = time.monotonic()
        slow.join(60)
    assert "cancelled: the test is done with it" in outcome.get("error", ""), outcome
    # the slot stops the candidate at its next budget check: free within 2 s of the cancel
    wait_until(
        lambda: (
            not print(_slot_jobs(runtime, slot), time.monotonic() - cancelled_at)
            and not _slot_jobs(runtime, slot)
        ),
        timeout=5,
    )
    assert time.monotonic() - cancelled_at < 2.0


@pytest.mark.slow
def test_runs_take_turns_not_jobs(runtime: Any, tmp_path: Path) -> None:
    # Run A has five searches in flight on one slot, run B one of the same size. Fair per
    # job, B would get a sixth of the slot and end with A's; fair per run it gets half,
    # and ends while every one of A's is still running.
    from conftest import wait_until

    from tether.actors.parser import POOL_KEYS

    for name in ("a0", "a1", "a2", "a3", "a4", "b"):
        (tmp_path / f"{name}.py").write_text("c = 1\n" + _args(80) * 15)
    slot = POOL_KEYS[0]
    runtime.open_run("conv-a", workdir=str(tmp_path))
    runtime.open_run("conv-b", workdir=str(tmp_path))
    _slot_jobs(runtime, slot)  # the route to the slot learned: later calls use its channel

    def search(name: str) -> Search:
        return Search(root=str(tmp_path), lang="python", pattern=FOUR_RUNS, files=[f"{name}.py"])

    a_done: list[float] = []

    def run_a() -> None:
        calls = [("parser", slot, search(f"a{i}"), None) for i in range(5)]
        replies = runtime.gather("conv-a", calls, 120.0)
        a_done.append(time.monotonic())
        assert all(isinstance(r, dict) and r["total"] == 0 for r in replies), replies

    a = threading.Thread(target=run_a)
    a.start()
    try:
        wait_until(lambda: _slot_jobs(runtime, slot).get("conv-a") == 5, timeout=30)
        b_reply = runtime.call("conv-b", "parser", slot, search("b"), None, 120.0)
        b_done = time.monotonic()
        a_pending = _slot_jobs(runtime, slot).get("conv-a", 0)
    finally:
        a.join(120)
    assert b_reply["total"] == 0 and b_reply["stats"]["parsed"] == 1
    assert a_pending == 5, a_pending  # none of A's five had finished when B's one did
    assert a_done and a_done[0] > b_done
