"""The chaos harness (tether.chaos): its checks can fail, and a real run under faults
finds no violation.

The long run lasts TETHER_CHAOS_SECONDS (default 60, as issue 16 asks) with a fresh seed
each time (TETHER_CHAOS_SEED replays one; a failure prints the seed and the report).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tether.chaos import ChaosConfig, run_chaos
from tether.chaos import invariants as inv
from tether.chaos.command import main as chaos_main
from tether.chaos.faults import Fault, Recovery, nodes, recoveries
from tether.chaos.report import Report, recovery_by_class
from tether.chaos.scratch import TAG_LINE, Workspace, parse, render
from tether.chaos.workload import CallRecord

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample_project"
SECONDS = float(os.environ.get("TETHER_CHAOS_SECONDS", "60"))
SEED = int(os.environ["TETHER_CHAOS_SEED"]) if os.environ.get("TETHER_CHAOS_SEED") else None

# --- the checks, fed good and broken inputs -----------------------------------------------


def test_a_scratch_file_parses_back_only_when_whole():
    text = render("c1", 2, 7, 3)
    assert parse(text) is not None and parse(text).version == 7
    assert parse(text[:-5]) is None  # torn at the end
    assert parse(text.replace("def pad_5", "def pad_6", 1)) is None  # mixed bytes
    assert parse(text + "\n") is None  # anything more
    assert "def tag_c1_2():" in text.splitlines()[TAG_LINE - 1]


def test_file_state_accepts_the_promised_version_only():
    assert inv.file_state(render("c0", 1, 4, 0), "c0", 1, [4], 0) == ""
    assert "version 3" in inv.file_state(render("c0", 1, 3, 0), "c0", 1, [4], 0)
    assert "torn" in inv.file_state(render("c0", 1, 4, 0)[:100], "c0", 1, [3, 4], 0)
    assert "belongs to c2" in inv.file_state(render("c2", 1, 4, 0), "c0", 1, [4], 0)


def test_generations_refuse_a_half_landed_change():
    files = [parse(render("c0", i, 0, g)) for i, g in enumerate((1, 1, 2))]
    assert "part of the change" in inv.generations(files, 1, 2, ok=False)
    assert "expected all 2" in inv.generations(files, 1, 2, ok=True)
    assert inv.generations(files[:2], 1, 2, ok=False) == ""
    assert "torn" in inv.generations([None], 1, 2, ok=True)


def test_foreign_tags_catch_another_calls_reply():
    mine = {"c0-1-v3", "tag_c0_1"}
    assert inv.foreign_tags("def tag_c0_1() -> Literal['c0-1-v3']", mine) == ""
    assert "c1-1-v3" in inv.foreign_tags("def tag_c1_1() -> Literal['c1-1-v3']", mine)
    assert "tok_c2_eval4" in inv.foreign_tags("'tok_c2_eval4'", {"tok_c0_eval4"})
    assert inv.missing_tag("'tok_c0_eval4'", "tok_c0_eval4") == ""
    assert "does not name" in inv.missing_tag("''", "tok_c0_eval4")


def test_search_matches_catch_other_folders_and_stale_answers():
    good = [{"path": f"x/c0/f{i}.py", "captures": {"G": "2"}} for i in range(3)]
    assert inv.search_matches(good, "x/c0", 3, 2) == ("", "")
    crossed, _ = inv.search_matches([*good, {"path": "x/c1/f0.py"}], "x/c0", 3, 2)
    assert "x/c1/f0.py" in crossed
    assert "generation 3" in inv.search_matches(good, "x/c0", 3, 3)[1]


def test_tier_checks():
    assert "not refused" in inv.tier_breach("write", False, False, "a", "b")
    assert "yet the file changed" in inv.tier_breach("edit", True, True, "a", "b")
    assert "not as a tier refusal" in inv.tier_breach("eval", True, False, "a", "a")
    assert inv.tier_breach("write", True, True, "a", "a") == ""
    assert "write" in inv.visible_breach("readonly", {"read": "read", "write": "write"})
    assert "not refused" in inv.escaped(False, False)
    assert "yet the file is there" in inv.escaped(True, True)
    assert inv.escaped(True, False) == ""


def test_late_and_recoveries():
    assert inv.late(10.0, 30.0, 5.0) == ""
    assert "after 36.0 s" in inv.late(36.0, 30.0, 5.0)
    kill = Fault(10.0, "parser", "crash_actor", "parser:0", ("ast_grep",), "")
    calls = [
        CallRecord("c0", "ast_grep", 9.0, 0.5, True, ""),  # before: not a recovery
        CallRecord("c0", "ast_grep", 10.5, 0.2, False, "restarting"),
        CallRecord("c1", "ast_grep", 11.0, 1.0, True, ""),
    ]
    (recovery,) = recoveries([kill], calls)
    assert recovery.after == pytest.approx(2.0) and recovery.tried == 2
    (own,) = recoveries([Fault(10.0, "run", "crash_actor", "run:c2", ("eval",), "c2")], calls)
    assert own.after is None and own.tried == 0


def test_recovery_is_reported_per_fault_class_and_overall():
    table = [  # fault class, s until what it took away answered again (None: never), calls after
        ("language_server", 1.0, 3),
        ("language_server", 13.0, 1),
        ("language_server", 2.0, 2),
        ("parser", 0.5, 1),
        ("tree", None, 2),  # seen, never answered again
        ("tree", 15.0, 4),
        ("kernel", None, 0),  # nothing called what it took away
    ]
    recs = [
        Recovery(Fault(float(i), name, "crash_actor", f"{name}:{i}", (), ""), after, tried)
        for i, (name, after, tried) in enumerate(table)
    ]
    row = {"kills": 1, "observed": 1, "recovered": 1}
    assert recovery_by_class(recs) == {
        "kernel": {"kills": 1, "observed": 0, "recovered": 0, "p50_s": 0.0, "max_s": 0.0},
        "language_server": {**row, "kills": 3, "observed": 3, "recovered": 3, "p50_s": 2.0, "max_s": 13.0},
        "parser": {**row, "p50_s": 0.5, "max_s": 0.5},
        "tree": {**row, "kills": 2, "observed": 2, "p50_s": 15.0, "max_s": 15.0},
    }  # fmt: skip
    assert recovery_by_class([]) == {}
    report = Report(1, 1, 1.0, "here", [], {}, [], [r.fault for r in recs], [], recs, [])
    data = report.to_json()
    assert data["recovery_by_class"] == recovery_by_class(recs)
    assert (data["recovery_p50_s"], data["recovery_max_s"]) == (2.0, 15.0)  # overall, kept
    said = report.text().splitlines()
    assert "  language_server: 3 of 3 seen (3 kills), p50 2.00 s, max 13.00 s" in said
    assert "  tree: 1 of 2 seen (2 kills), p50 15.00 s, max 15.00 s" in said


def test_nodes_name_the_conversation_of_run_scoped_actors():
    tree = {
        "name": "root",
        "kind": "root",
        "pids": [{"pid": 1}, {"pid": 2}],
        "children": [
            {
                "name": "runs",
                "kind": "runs",
                "children": [
                    {
                        "name": "run:c3",
                        "kind": "run",
                        "key": "c3",
                        "pids": [{"pid": 5}],
                        "children": [
                            {"name": "run:c3/kernel:python", "kind": "kernel", "pending": 1}
                        ],
                    }
                ],
            }
        ],
    }
    found = {n.name: n for n in nodes(tree)}
    assert found["root"].pids == (1, 2)
    assert found["run:c3/kernel:python"].run == "c3" and found["run:c3/kernel:python"].pending
    assert found["runs"].run == ""


def test_left_behind_names_a_process_that_outlived_the_runtime(runtime_factory):
    rt = runtime_factory()
    seen = rt.processes()
    rt.shutdown()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        planted = psutil.Process(sleeper.pid)
        assert rt.left_behind(seen, wait=1.0) == []
        assert [p.pid for p in rt.left_behind([*seen, planted], wait=0.5)] == [sleeper.pid]
    finally:
        sleeper.kill()
        sleeper.wait()


# --- the command -----------------------------------------------------------------------


def test_help_says_the_directory_is_never_changed(capsys):
    from tether.cli import main as tether_main

    with pytest.raises(SystemExit) as exc:
        tether_main(["chaos", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "scratch copy" in out and "--in-place" in out and "--json" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--workdir", "/no/such/dir"], "is not a directory"),
        (["--workdir", ".", "--duration", "0"], "--duration must be a positive"),
        (["--workdir", ".", "--faults", "meteor"], "unknown faults meteor; choose among"),
        (["--workdir", ".", "--ops", "read,teleport"], "unknown ops teleport"),
    ],
)
def test_bad_arguments_are_named(argv, says, capsys):
    with pytest.raises(SystemExit) as exc:
        chaos_main(argv)
    assert exc.value.code == 2
    assert says in capsys.readouterr().err


def test_a_planted_partial_write_fails_the_run(monkeypatch, capsys, tether_state_dir):
    """The checker on a broken input: every file read back after a write comes back
    torn, so the run must list partial writes and exit 1."""
    real = Workspace.read
    monkeypatch.setattr(Workspace, "read", lambda self, run, i: real(self, run, i)[:-7])
    argv = ["--workdir", str(SAMPLE), "--duration", "3", "--runs", "1", "--faults", "none"]
    code = chaos_main([*argv, "--ops", "write,edit", "--no-guard", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["ok"] is False
    assert report["violations_by_invariant"][inv.PARTIAL_WRITE] >= 1
    assert report["calls"] >= 1 and "torn" in report["violations"][0]["detail"]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("in_place", [False, True])
def test_the_directory_is_left_as_it_was(in_place, tmp_path, tether_state_dir):
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("print('hello')\n")
    before = _snapshot(project)
    config = ChaosConfig(
        workdir=project, duration=2.0, runs=1, faults=(), ops=("read", "write", "edit"),
        in_place=in_place, guard=False,
    )  # fmt: skip
    report = run_chaos(config, log=lambda _: None)
    assert report.ok, report.text()
    assert {"write", "edit"} & {c.tool for c in report.calls if c.ok}  # (it wrote)
    assert _snapshot(project) == before and sorted(p.name for p in project.iterdir()) == ["main.py"]


# --- a real run ------------------------------------------------------------------------


@pytest.mark.timeout(SECONDS + 240)  # (the load, then calls open at its end: their deadlines)
def test_a_chaos_run_heals_with_no_violation(tether_state_dir):
    lines: list[str] = []
    config = ChaosConfig(workdir=SAMPLE, duration=SECONDS, runs=3, seed=SEED)
    report = run_chaos(config, log=lines.append)
    said = "\n".join([*lines, report.text()])
    assert report.violations == [], said
    data = report.to_json()
    assert data["calls"] > 100, said
    hit = {fault.fault for fault in report.faults}
    assert {"parser", "run", "supervisor"} <= hit, said  # (always there to hit)
    if "lsp" in report.exercised:
        assert "language_server" in hit, said
    assert data["recoveries"] >= 3, said
    by_class = data["recovery_by_class"].values()
    assert sum(row["recovered"] for row in by_class) == data["recoveries"], said
    called = {tool for tool, row in data["per_tool"].items() if row["ok"]}
    assert {"read", "write", "edit", "ast_grep", "ast_edit", "resolve"} <= called, said
    assert "ast_grep (whole workspace)" in called, said
    assert {op for op in ("lsp", "eval") if op in report.exercised} <= called, said
    assert data["per_tool"]["write (outside)"]["calls"] >= 1, said  # (each one refused)
