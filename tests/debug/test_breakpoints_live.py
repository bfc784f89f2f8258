"""Breakpoints agents need, on real adapters: hit conditions, conditions, logpoints,
function and exception breakpoints (debugpy, lldb-dap, delve), and breakpoints that
follow their text across an edit. No test here kills, crashes or counts anything of the
tree: they share the module's runtime (`shared`), each in runs of its own."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.debug.conftest import need
from tests.debug.support import err, ok

# a loop of 1000 passes through `step`; STEP_LINE is `step`'s body, in each language
LOOPS = {
    "debugpy": (
        "app.py",
        "pyproject.toml",
        textwrap.dedent(
            """\
            def step(i):
                return i * 2


            total = 0
            for i in range(1000):
                total += step(i)
            print("done", total)
            """
        ),
    ),
    "lldb": (
        "loop.c",
        "CMakeLists.txt",
        textwrap.dedent(
            """\
            #include <stdio.h>
            int step(int i) {
                return i * 2;
            }
            int main(void) {
                int total = 0;
                for (int i = 0; i < 1000; i++) {
                    total += step(i);
                }
                printf("done %d\\n", total);
                return 0;
            }
            """
        ),
    ),
    "delve": (
        "main.go",
        "go.mod",
        textwrap.dedent(
            """\
            package main

            import "fmt"

            func step(i int) int {
            \treturn i * 2
            }

            func main() {
            \ttotal := 0
            \tfor i := 0; i < 1000; i++ {
            \t\ttotal += step(i)
            \t}
            \tfmt.Println("done", total)
            }
            """
        ),
    ),
}
STEP_LINE = {"debugpy": 2, "lldb": 3, "delve": 6}
FUNCTION = {"debugpy": "step", "lldb": "step", "delve": "main.step"}
ADAPTERS = sorted(LOOPS)


def loop_project(tmp_path: Path, adapter: str) -> tuple[Path, str, str]:
    """(workspace, source file, program to launch) for `adapter`'s loop."""
    need(adapter)
    source, marker, text = LOOPS[adapter]
    (tmp_path / marker).write_text(
        {
            "pyproject.toml": "[project]\nname = 'demo'\n",
            "go.mod": "module example.com/demo\n\ngo 1.19\n",
        }.get(marker, "project(demo C)\n")
    )
    (tmp_path / source).write_text(text)
    program = source
    if adapter == "lldb":
        if not shutil.which("cc"):
            pytest.skip("no C compiler (cc) to build the debuggee")
        subprocess.run(["cc", "-g", "-O0", "-o", "loop", source], cwd=tmp_path, check=True)
        program = "loop"
    elif adapter == "delve":
        if not shutil.which("go"):
            pytest.skip("go is not installed (delve builds the package with it)")
        program = "."
    return tmp_path, source, program


def launch(run: Any, program: str) -> Any:
    return ok(run, {"op": "launch", "program": program, "wait": 60})


def value(run: Any, expression: str) -> str:
    return str(ok(run, {"op": "evaluate", "expression": expression}).data["value"])


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_hit_condition_of_900_stops_on_the_900th_pass(shared, tmp_path, adapter) -> None:
    ws, source, program = loop_project(tmp_path, adapter)
    run = shared.open_run(f"hit-{adapter}", workdir=str(ws))
    line = STEP_LINE[adapter]
    bp = {"line": line, "hit_condition": "900"}
    set_ = ok(run, {"op": "breakpoints", "file": source, "lines": [bp]})
    assert f"line {line} (hit 900): set" in set_.text, set_.text
    res = launch(run, program)
    assert res.text.startswith(f"stopped at {source}:{line} (breakpoint)"), res.text
    assert value(run, "i") == "899", res.text  # passes count from i = 0: the 900th is 899
    # '900' is the 900th hit only: the program runs on to its end
    done = ok(run, {"op": "continue"})
    assert done.data["outcome"] == "exited" and done.data["exit_code"] == 0, done.text
    assert "done 999000" in done.text, done.text
    ok(run, {"op": "terminate"})


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_from_the_nth_hit_on_then_every_hit(shared, tmp_path, adapter) -> None:
    ws, source, program = loop_project(tmp_path, adapter)
    run = shared.open_run(f"from-{adapter}", workdir=str(ws))
    line = STEP_LINE[adapter]
    ok(
        run,
        {"op": "breakpoints", "file": source, "lines": [{"line": line, "hit_condition": ">= 999"}]},
    )
    launch(run, program)
    assert value(run, "i") == "998"
    assert ok(run, {"op": "continue"}).data["outcome"] == "stopped"
    assert value(run, "i") == "999"
    assert ok(run, {"op": "continue"}).data["outcome"] == "exited"
    ok(run, {"op": "terminate"})


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_logpoint_writes_without_stopping_and_a_function_breakpoint_stops(
    shared, tmp_path, adapter
) -> None:
    ws, source, program = loop_project(tmp_path, adapter)
    run = shared.open_run(f"log-{adapter}", workdir=str(ws))
    log = {"line": STEP_LINE[adapter], "condition": "i >= 997", "log_message": "pass {i}"}
    ok(run, {"op": "breakpoints", "file": source, "lines": [log]})
    fn = {"name": FUNCTION[adapter], "hit_condition": "3"}
    fns = ok(run, {"op": "breakpoints", "functions": [fn]})
    assert f"{FUNCTION[adapter]} (hit 3): set" in fns.text, fns.text
    res = launch(run, program)
    assert res.data["outcome"] == "stopped", res.text
    assert res.data["frames"][0]["name"].endswith("step"), res.text
    assert value(run, "i") == "2", res.text  # the 3rd call
    done = ok(run, {"op": "continue"})
    assert done.data["outcome"] == "exited", done.text  # the logpoint never stopped it
    out = ok(run, {"op": "output"}).text
    assert all(f"pass {n}" in out for n in (997, 998, 999)), out
    assert "pass 996" not in out, out  # its condition held for those three only
    ok(run, {"op": "terminate"})


EXCEPTION_NOTES = {
    "debugpy": [],
    "lldb": ["uncaught: lldb cannot stop there"],
    "delve": ["raised: delve cannot stop there", "uncaught: delve always stops there"],
}


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_exception_breakpoints_say_what_each_adapter_can_stop_on(shared, tmp_path, adapter) -> None:
    ws, source, program = loop_project(tmp_path, adapter)
    run = shared.open_run(f"exc-{adapter}", workdir=str(ws))
    ok(run, {"op": "breakpoints", "exceptions": ["raised", "uncaught"]})
    res = launch(run, program)
    assert res.data["outcome"] == "exited", res.text  # the loop raises nothing
    assert "exceptions: stop on raised, uncaught" in res.text, res.text
    for note in EXCEPTION_NOTES[adapter]:
        assert note in res.text, res.text
    shown = ok(run, {"op": "adapters"}).text
    assert f"{adapter}: " in shown and "(from its capabilities in this run)" in shown, shown
    bad = err(run, {"op": "breakpoints", "exceptions": ["all"]})
    assert 'must be one of "raised", "uncaught"' in bad.text, bad.text


RAISER = """\
def risky(n):
    if n == 3:
        raise KeyError("three")
    return n


for n in range(5):
    try:
        risky(n)
    except KeyError:
        pass
print("ok")
"""


def test_debugpy_stops_on_a_raised_exception_that_is_caught_only_when_asked(
    shared, py_project
) -> None:
    (py_project / "raiser.py").write_text(RAISER)
    run = shared.open_run("raised", workdir=str(py_project))
    plain = ok(run, {"op": "launch", "program": "raiser.py"})  # the default: uncaught only
    assert plain.data["outcome"] == "exited", plain.text
    ok(run, {"op": "breakpoints", "exceptions": ["raised"]})
    res = ok(run, {"op": "launch", "program": "raiser.py"})
    assert res.data["reason"] == "exception" and "KeyError" in res.text, res.text
    assert res.data["frames"][0]["line"] == 3, res.text
    ok(run, {"op": "breakpoints", "exceptions": []})  # live: the adapter is told at once
    assert ok(run, {"op": "continue"}).data["outcome"] == "exited"


def test_lldb_refuses_every_nth_hit_while_it_runs_and_reports_it_at_launch(
    shared, tmp_path
) -> None:
    ws, source, program = loop_project(tmp_path, "lldb")
    run = shared.open_run("lldb-mod", workdir=str(ws))
    ok(
        run,
        {"op": "breakpoints", "file": source, "lines": [{"line": 3, "hit_condition": "% 400"}, 8]},
    )
    res = launch(run, program)
    assert "line 3 (hit % 400): NOT set: lldb cannot count hits as '% 400'" in res.text, res.text
    assert res.text.startswith(f"stopped at {source}:8"), res.text  # the other one is set
    refused = err(
        run, {"op": "breakpoints", "file": source, "lines": [{"line": 3, "hit_condition": "%2"}]}
    )
    assert "it takes '5' or '>= 5'" in refused.text, refused.text
    ok(run, {"op": "terminate"})


THROWER = """\
#include <cstdio>
#include <stdexcept>
static int risky(int n) {
    if (n == 3) throw std::runtime_error("three");
    return n;
}
int main() {
    int total = 0;
    for (int n = 0; n < 5; n++) {
        try { total += risky(n); } catch (const std::exception &) {}
    }
    std::printf("ok %d\\n", total);
    return 0;
}
"""


def test_lldb_stops_where_a_cpp_exception_is_raised_only_when_asked(shared, tmp_path) -> None:
    need("lldb")
    if not shutil.which("c++"):
        pytest.skip("no C++ compiler (c++) to build the debuggee")
    (tmp_path / "CMakeLists.txt").write_text("project(demo CXX)\n")
    (tmp_path / "thrower.cpp").write_text(THROWER)
    build = ["c++", "-g", "-O0", "-o", "thrower", "thrower.cpp"]
    subprocess.run(build, cwd=tmp_path, check=True)
    run = shared.open_run("cpp-throw", workdir=str(tmp_path))
    plain = launch(run, "thrower")  # caught: no stop unless asked
    assert plain.data["outcome"] == "exited" and "ok 7" in plain.text, plain.text
    ok(run, {"op": "breakpoints", "exceptions": ["raised"]})  # cpp_throw
    res = launch(run, "thrower")
    assert res.data["outcome"] == "stopped", res.text
    frames = ok(run, {"op": "stack"}).data["frames"]
    assert frames[0]["name"] == "__cxa_throw" and "risky" in frames[1]["name"], frames
    ok(run, {"op": "terminate"})
