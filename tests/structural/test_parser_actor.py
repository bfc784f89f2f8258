"""The parser pool on a real Runtime: ast_grep / ast_edit / resolve through the pipeline."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tether.actors.parser import POOL_KEYS
from tether.messages.parser_ops import Clear, Stats
from tether.runtime import load_kinds

pytestmark = pytest.mark.slow


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for i in range(12):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}(x):\n    return foo(x, {i})\n")
    (tmp_path / "s.py").write_text("s = 'foo(a, b)'  # foo(c, d)\n")
    return tmp_path


def test_search_spreads_over_the_pool_and_hits_the_cache(runtime: Any, project: Path) -> None:
    run = runtime.open_run("conv-ast", workdir=str(project))
    assert {"ast_grep", "ast_edit", "resolve"} <= {t.name for t in run.tools()}
    res = run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"})
    assert not res.is_error, res.text
    assert res.data["total"] == 12
    assert res.text.splitlines()[0] == "12 matches in 12 files:"
    assert [m["path"] for m in res.data["matches"]] == sorted(f"m{i}.py" for i in range(12))
    stats = [runtime.call("conv-ast", "parser", key, Stats(), None, 10) for key in POOL_KEYS]
    if len(POOL_KEYS) > 1:
        assert all(s["parses"] > 0 for s in stats), stats  # every slot parsed its shard
    parses = sum(s["parses"] for s in stats)
    again = run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"})
    assert again.data == res.data
    stats2 = [runtime.call("conv-ast", "parser", key, Stats(), None, 10) for key in POOL_KEYS]
    assert sum(s["parses"] for s in stats2) == parses  # warm: no file parsed again


def test_edit_and_resolve_through_the_pipeline(runtime: Any, project: Path) -> None:
    run = runtime.open_run("conv-edit", workdir=str(project))
    res = run.call(
        "ast_edit", {"pattern": "foo($A, $B)", "rewrite": "bar($B, $A)", "language": "python"}
    )
    assert res.text.startswith(
        '(proposed) 12 replacements in 12 files … call resolve with edit_id "edit_1"'
    )
    done = run.call("resolve", {"edit_id": "edit_1", "action": "accept"})
    assert not done.is_error, done.text
    assert sorted(done.data["written"]) == sorted(f"m{i}.py" for i in range(12))
    assert (project / "m3.py").read_text() == "def f3(x):\n    return bar(3, x)\n"
    assert (project / "s.py").read_text() == "s = 'foo(a, b)'  # foo(c, d)\n"
    other = runtime.open_run("conv-other", workdir=str(project))
    res = other.call("resolve", {"edit_id": "edit_1", "action": "accept"})
    assert res.is_error and "unknown edit_id 'edit_1' for this run" in res.text


def test_bad_pattern_is_refused_before_the_pool(runtime: Any, project: Path) -> None:
    run = runtime.open_run("conv-bad", workdir=str(project))
    res = run.call("ast_grep", {"pattern": "foo(.*)", "language": "python"})
    assert res.is_error and "It looks like a regular expression" in res.text


def test_read_only_surface_sees_only_ast_grep(runtime: Any, project: Path) -> None:
    run = runtime.open_run("conv-ro", workdir=str(project), surface="plan")
    names = {t.name for t in run.tools()}
    assert "ast_grep" in names and "ast_edit" not in names and "resolve" not in names


def test_background_index_warms_the_first_search(runtime: Any, project: Path) -> None:
    from conftest import wait_until

    from tether.tools.structural import warm_index

    run = runtime.open_run("conv-index", workdir=str(project))
    for key in POOL_KEYS:
        runtime.call("conv-index", "parser", key, Clear(), None, 10)
    assert warm_index(runtime, "conv-index", project) == 13

    def indexed() -> bool:
        stats = [runtime.call("conv-index", "parser", k, Stats(), None, 10) for k in POOL_KEYS]
        return sum(s["trees"] for s in stats) == 13

    wait_until(indexed, timeout=20)
    before = sum(
        runtime.call("conv-index", "parser", k, Stats(), None, 10)["parses"] for k in POOL_KEYS
    )
    res = run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"})
    assert res.data["total"] == 12
    after = sum(
        runtime.call("conv-index", "parser", k, Stats(), None, 10)["parses"] for k in POOL_KEYS
    )
    assert after == before  # the first search parsed nothing: the index had it


def test_open_run_with_prewarm_indexes_the_workspace(runtime: Any, project: Path) -> None:
    from conftest import wait_until

    runtime.open_run("conv-setup", workdir=str(project))
    for key in POOL_KEYS:
        runtime.call("conv-setup", "parser", key, Clear(), None, 10)
    runtime.open_run("conv-prewarm", workdir=str(project), prewarm=True)

    def trees() -> int:
        stats = [runtime.call("conv-prewarm", "parser", k, Stats(), None, 10) for k in POOL_KEYS]
        return sum(s["trees"] for s in stats)

    wait_until(lambda: trees() == 13, timeout=20)


def test_a_crashed_parser_slot_is_restarted_and_search_still_answers(
    runtime: Any, project: Path
) -> None:
    run = runtime.open_run("conv-crash", workdir=str(project))
    assert (
        run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"}).data["total"] == 12
    )
    runtime.inject("crash_actor", target=f"parser:{POOL_KEYS[0]}")
    res = run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"})
    # the search is idempotent: the runtime retries it once on the restarted slot
    assert not res.is_error and res.data["total"] == 12, res.text
    again = run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"})
    assert not again.is_error and again.data["total"] == 12
    # a slowed slot past the deadline is a clear error, never a hang
    runtime.inject("delay", target=f"parser:{POOL_KEYS[-1]}", seconds=0.5)
    slowed = run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"})
    assert not slowed.is_error and slowed.data["total"] == 12


def test_one_search_lists_the_files_once_under_the_tree_not_once_per_slot(
    runtime_factory: Any, project: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch
) -> None:
    # every slot used to run `git ls-files` in its message handler, per search; then the
    # host ran it, outside the tree: now the git actor does, as its own subprocess
    import os
    import shutil
    import subprocess

    from tests.conftest import health_node
    from tether.kinds import ChildSpec, KindSpec, Restart, Scope

    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q", str(project)], check=True)
    (project / ".gitignore").write_text("ignored.py\n")
    (project / "ignored.py").write_text("foo(1, 2)\n")
    wrapper = tmp_path_factory.mktemp("bin")
    log = wrapper / "git.log"
    (wrapper / "git").write_text(f'#!/bin/sh\necho "$PPID $*" >> {log}\nexec {git} "$@"\n')
    (wrapper / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper}{os.pathsep}{os.environ['PATH']}")  # before the start
    pool = [str(i) for i in range(4)]
    kind = KindSpec(
        "parser",
        "tether.actors.parser:ParserActor",
        Scope.SHARED,
        ChildSpec(Restart.PERMANENT),
        config={"keys": pool},
    )
    rt = runtime_factory(kinds=[kind, *load_kinds(["tether.actors.git"])])
    run = rt.open_run("conv-git", workdir=str(project))
    for _ in range(2):
        log.write_text("")
        res = run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"})
        assert not res.is_error and res.data["total"] == 12, res.text  # .gitignore honoured
        node = health_node(rt.health(), f"git:{project.resolve()}")
        assert node is not None
        actor = node["pids"][0]["pid"]  # (the actor's own process comes first)
        assert actor != os.getpid()
        lines = log.read_text().splitlines()  # one git process, the actor's child
        assert len(lines) == 1 and lines[0].split()[0] == str(actor), lines
        assert "ls-files" in lines[0].split()[1:], lines
    slots = [rt.call("conv-git", "parser", key, Stats(), None, 10) for key in pool]
    assert sum(s["files"] for s in slots) == 13  # each .py file (not ignored.py) in one slot


def test_a_search_outside_a_work_tree_walks_the_directory(
    runtime_factory: Any, project: Path
) -> None:
    rt = runtime_factory(kind_modules=["tether.actors.parser", "tether.actors.git"])
    run = rt.open_run("conv-walk", workdir=str(project))
    (project / "node_modules").mkdir()
    (project / "node_modules" / "dep.py").write_text("foo(1, 2)\n")  # skipped by the walk
    res = run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"})
    assert not res.is_error and res.data["total"] == 12, res.text


def _slot_stats(runtime: Any, run_id: str) -> list[dict[str, Any]]:
    return [runtime.call(run_id, "parser", k, "stats", {}, 10) for k in POOL_KEYS]


def _indexing(runtime: Any) -> int:
    """Files still queued for background indexing, over the pool (from health)."""
    import re

    return sum(int(n) for n in re.findall(r"'indexing': (\d+)", str(runtime.health())))


def test_the_first_search_warms_the_rest_of_its_language(runtime: Any, project: Path) -> None:
    from conftest import wait_until

    for i in range(20):
        (project / f"other{i}.py").write_text(f"def g{i}(y):\n    return bar(y)\n")
    (project / "notes.rs").write_text("fn main() {}\n")  # another language: not indexed
    run = runtime.open_run("conv-warm", workdir=str(project))
    for key in POOL_KEYS:
        runtime.call("conv-warm", "parser", key, "clear", {}, 10)
    first = run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"})
    assert first.data["total"] == 12
    # the prefilter let only the 12 files with `foo` be parsed; the rest come in the
    # background: every python file (12 + s.py + 20), and not the Rust one
    wait_until(lambda: sum(s["trees"] for s in _slot_stats(runtime, "conv-warm")) == 33, 20)
    parses = sum(s["parses"] for s in _slot_stats(runtime, "conv-warm"))
    second = run.call("ast_grep", {"pattern": "bar($Y)", "language": "python"})
    assert second.data["total"] == 20
    assert sum(s["parses"] for s in _slot_stats(runtime, "conv-warm")) == parses  # all warm


def test_warming_stops_when_the_run_closes(runtime: Any, tmp_path: Path) -> None:
    from conftest import wait_until

    for i in range(4000):
        (tmp_path / f"f{i}.py").write_text(f"def f{i}(x):\n    return [x] * {i}\n")
    (tmp_path / "hit.py").write_text("foo(1, 2)\n")
    keeper = runtime.open_run("conv-keeper", workdir=str(tmp_path))
    for key in POOL_KEYS:
        runtime.call("conv-keeper", "parser", key, "clear", {}, 10)
    run = runtime.open_run("conv-closing", workdir=str(tmp_path))
    assert run.call("ast_grep", {"pattern": "foo($A, $B)"}).is_error  # no language: refused
    assert run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"}).data["total"] == 1
    wait_until(lambda: _indexing(runtime) > 0, 20)  # the background indexing has begun
    run.close()
    wait_until(lambda: _indexing(runtime) == 0, 60)
    trees = sum(s["trees"] for s in _slot_stats(runtime, "conv-keeper"))
    assert trees < 4001  # the queue was dropped, not worked through
    assert not keeper.closed


def test_a_one_file_search_asks_only_the_slot_that_owns_the_file(
    runtime: Any, project: Path
) -> None:
    # Every slot used to get every search, and each had to answer: a search of one file
    # waited on a slot busy with another run's work although that slot had nothing to do.
    from tether.structural.scan import shard_of

    if len(POOL_KEYS) < 2:
        pytest.skip("a pool of one slot")
    run = runtime.open_run("conv-owner", workdir=str(project))
    path = project / "m3.py"
    owner = shard_of(str(path), len(POOL_KEYS))
    other = POOL_KEYS[(owner + 1) % len(POOL_KEYS)]
    assert run.call("ast_grep", {"pattern": "foo($A, $B)", "path": "m3.py"}).data["total"] == 1
    runtime.call("conv-owner", "parser", other, Stats(), None, 30)  # started, routed
    runtime.inject("delay", target=f"parser:{other}", seconds=60)  # its next call: a minute
    t = time.monotonic()
    res = run.call("ast_grep", {"pattern": "foo($A, $B)", "path": "m3.py"})
    assert not res.is_error and res.data["total"] == 1, res.text
    assert time.monotonic() - t < 30, "the search waited on the delayed slot"


def test_a_git_that_never_answers_is_killed_and_the_search_walks(
    runtime_factory: Any, project: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch
) -> None:
    import os
    import shutil
    import subprocess

    import tether.actors.git as git_actor
    from tests.conftest import gone, wait_until

    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q", str(project)], check=True)
    (project / ".gitignore").write_text("ignored.py\n")
    (project / "ignored.py").write_text("foo(1, 2)\n")
    wrapper = tmp_path_factory.mktemp("bin")
    pidfile = wrapper / "git.pid"
    (wrapper / "git").write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    (wrapper / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(git_actor, "GIT_TIMEOUT", 1.0)  # the actors fork from this process
    rt = runtime_factory(kind_modules=["tether.actors.parser", "tether.actors.git"])
    run = rt.open_run("conv-hung-git", workdir=str(project))
    res = run.call("ast_grep", {"pattern": "foo($A, $B)", "language": "python"})
    assert not res.is_error and res.data["total"] == 13, res.text  # walked: ignored.py too
    hung = int(pidfile.read_text())
    wait_until(lambda: gone([hung]))


def test_a_listing_under_way_dies_with_shutdown(
    runtime_factory: Any, project: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch
) -> None:
    import os
    import threading

    import psutil

    from tests.conftest import gone, shutdown_without_orphans, wait_until

    wrapper = tmp_path_factory.mktemp("bin")
    pidfile = wrapper / "git.pid"
    (wrapper / "git").write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    (wrapper / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper}{os.pathsep}{os.environ['PATH']}")
    rt = runtime_factory(kind_modules=["tether.actors.parser", "tether.actors.git"])
    run = rt.open_run("conv-shutdown-git", workdir=str(project))
    args = {"pattern": "foo($A, $B)", "language": "python"}
    threading.Thread(target=run.call, args=("ast_grep", args), daemon=True).start()
    git = psutil.Process(int(wait_until(lambda: pidfile.exists() and pidfile.read_text())))
    assert git.ppid() != os.getpid()  # a child of the tree, not of the host
    shutdown_without_orphans(rt)  # (the fixture's check: git is among the runtime's processes)
    wait_until(lambda: gone([git.pid]))


def test_stats_say_how_many_files_a_running_search_has_scanned(
    runtime: Any, tmp_path: Path
) -> None:
    # A search stuck on its fourth file of six (one candidate whose matching would take
    # minutes), until the test cancels it: the slot's Stats say 4 of 6 for that run while
    # it runs, and keep the settled job's count after.
    import threading

    from conftest import wait_until

    from tether.call_scope import CancelHandle
    from tether.messages.parser_ops import Search

    names = ["q0.py", "q1.py", "q2.py", "p.py", "q3.py", "q4.py"]
    for name in names:
        (tmp_path / name).write_text("f(a)\n")
    (tmp_path / "p.py").write_text("c = 1\nf(" + ", ".join(["a"] * 1000) + ")\n")
    slot = POOL_KEYS[0]
    runtime.open_run("conv-count", workdir=str(tmp_path))
    runtime.call("conv-count", "parser", slot, Stats(), None, 30)  # the route to the slot
    # learned first: later calls come on its channel, which a running search serves
    cancel = CancelHandle()
    search = Search(
        root=str(tmp_path), lang="python", pattern="f($$$A, a, $$$B, a, $$$C, c)",
        files=names, budget_s=300, budget_node_steps=10**9,
    )  # fmt: skip

    def endless() -> None:
        try:
            runtime.call("conv-count", "parser", slot, search, None, 300.0, cancel=cancel)
        except Exception:  # noqa: BLE001 - cancelled: what this test does to it
            pass

    def mine() -> list[dict[str, Any]]:
        stats = runtime.call("conv-count", "parser", slot, Stats(), None, 30)
        return stats["searched"].get("conv-count", [])

    slow = threading.Thread(target=endless)
    slow.start()
    try:
        wait_until(lambda: [(j["files"], j["done"]) for j in mine()] == [(4, False)], timeout=30)
        [running] = mine()
        assert running["of"] == 6 and running["started"] <= time.monotonic()
    finally:
        cancel.cancel("the test is done with it")
        slow.join(60)
    wait_until(lambda: [(j["files"], j["of"], j["done"]) for j in mine()] == [(4, 6, True)],
               timeout=10)  # fmt: skip
