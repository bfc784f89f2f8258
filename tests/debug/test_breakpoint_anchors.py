"""A breakpoint remembers its line's text: an edit while a program runs never makes a stop
land on a shifted line (debugpy and delve, real adapters), and the next launch moves each
breakpoint to where its text is, or says it lost its anchor. The tests share the module's
runtime (`shared`, runs of their own): none kills, crashes or counts anything of the tree."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.debug.conftest import need
from tests.debug.support import err, ok

PY = textwrap.dedent(
    """\
    def step(i):
        return i * 2


    def main():
        total = 0
        for i in range(3):
            total += step(i)
        print("done", total)


    main()
    """
)
GO = textwrap.dedent(
    """\
    package main

    import "fmt"

    func step(i int) int {
    \treturn i * 2
    }

    func main() {
    \ttotal := 0
    \tfor i := 0; i < 3; i++ {
    \t\ttotal += step(i)
    \t}
    \tfmt.Println("done", total)
    }
    """
)
# adapter -> (source, marker, text, program, step line, call line, comment)
CASES = {
    "debugpy": ("app.py", "pyproject.toml", PY, "app.py", 2, 8, "#"),
    "delve": ("main.go", "go.mod", GO, ".", 6, 12, "//"),
}
STEP_TEXT = {"debugpy": "return i * 2", "delve": "return i * 2"}


def project(tmp_path: Path, adapter: str) -> tuple[str, str, int, int, str]:
    need(adapter)
    if adapter == "delve" and not shutil.which("go"):
        pytest.skip("go is not installed (delve builds the package with it)")
    source, marker, text, program, step, call, comment = CASES[adapter]
    (tmp_path / marker).write_text(
        "module example.com/demo\n\ngo 1.19\n" if marker == "go.mod" else "[project]\nname='d'\n"
    )
    (tmp_path / source).write_text(text)
    return source, program, step, call, comment


def stop_line(res: Any) -> int:
    assert res.data["outcome"] == "stopped", res.text
    return int(res.data["frames"][0]["line"])


def run_to_exit(run: Any, allowed: set[int]) -> None:
    """Continue until the program exits; every stop on the way is on one of `allowed`."""
    for _ in range(20):
        res = ok(run, {"op": "continue", "wait": 60})
        if res.data["outcome"] == "exited":
            return
        assert stop_line(res) in allowed, res.text
    raise AssertionError("the program did not exit within 20 continues")


@pytest.mark.parametrize("adapter", sorted(CASES))
def test_an_edit_while_it_runs_never_shifts_a_stop(shared, tmp_path, adapter) -> None:
    source, program, step, call, comment = project(tmp_path, adapter)
    path = tmp_path / source
    run = shared.open_run(f"edit-{adapter}", workdir=str(tmp_path))
    ok(run, {"op": "breakpoints", "file": source, "lines": [step]})
    first = ok(run, {"op": "launch", "program": program, "wait": 60})
    assert stop_line(first) == step, first.text

    # three lines inserted above: the program runs on the code it loaded
    path.write_text(f"{comment} one\n{comment} two\n{comment} three\n" + path.read_text())
    listed = ok(run, {"op": "breakpoints"})
    assert f"breakpoints in {source} (changed since launch" in listed.text, listed.text
    assert f"line {step}: verified  [{step} | {STEP_TEXT[adapter]}]" in listed.text, listed.text
    assert "changed since launch" in ok(run, {"op": "status"}).text
    again = ok(run, {"op": "continue", "wait": 60})
    assert stop_line(again) == step, again.text  # not step + 3: that is other code now
    assert again.data["frames"][0]["source"] == STEP_TEXT[adapter], again.text
    assert f"{source} changed since launch: the program runs the code it loaded" in again.text

    # lines asked for now are lines of the file now: mapped to the code that runs
    mapped = ok(run, {"op": "breakpoints", "file": source, "lines": [step + 3, call + 3]})
    assert f"line {call + 3} of the file now; line {call} of the code it runs" in mapped.text
    new_only = err(run, {"op": "breakpoints", "file": source, "lines": [1]})
    assert "line 1 of" in new_only.text and "changed since launch" in new_only.text
    at_call = ok(run, {"op": "continue", "wait": 60})
    assert stop_line(at_call) == call, at_call.text
    assert "step(i)" in at_call.data["frames"][0]["source"], at_call.text
    run_to_exit(run, {step, call})

    # the next launch moves each breakpoint to where its text is now
    moved = ok(run, {"op": "launch", "program": program, "wait": 60})
    assert f"line {step + 3} (moved from line {step}: its text moved)" in moved.text, moved.text
    assert stop_line(moved) == call + 3, moved.text
    run_to_exit(run, {step + 3, call + 3})

    # a line whose text changed has lost its anchor: reported, not set, never stopped at
    path.write_text(path.read_text().replace("return i * 2", "return i * 3"))
    lost = ok(run, {"op": "launch", "program": program, "wait": 60})
    assert f"line {step + 3}: LOST its anchor, not set" in lost.text, lost.text
    assert "is no longer in the file" in lost.text, lost.text
    assert stop_line(lost) == call + 3, lost.text
    run_to_exit(run, {call + 3})
    ok(run, {"op": "terminate"})


C = textwrap.dedent(
    """\
    #include <stdio.h>
    int step(int i) {
        return i * 2;
    }
    int main(void) {
        int total = 0;
        for (int i = 0; i < 3; i++) {
            total += step(i);
        }
        printf("done %d\\n", total);
        return 0;
    }
    """
)


def test_a_binary_runs_the_code_it_was_built_from(shared, tmp_path) -> None:
    need("lldb")
    if not shutil.which("cc"):
        pytest.skip("no C compiler (cc) to build the debuggee")
    (tmp_path / "CMakeLists.txt").write_text("project(demo C)\n")
    src = tmp_path / "loop.c"
    src.write_text(C)

    def build() -> None:
        subprocess.run(["cc", "-g", "-O0", "-o", "loop", "loop.c"], cwd=tmp_path, check=True)

    build()
    run = shared.open_run("built", workdir=str(tmp_path))
    ok(run, {"op": "breakpoints", "file": "loop.c", "lines": [3]})
    assert stop_line(ok(run, {"op": "launch", "program": "loop", "wait": 60})) == 3
    src.write_text("// one\n// two\n// three\n" + C)  # edited, not rebuilt
    assert stop_line(ok(run, {"op": "continue", "wait": 60})) == 3
    run_to_exit(run, {3})
    # the same build again: it still has the old code, so the breakpoint stays on its line
    same = ok(run, {"op": "launch", "program": "loop", "wait": 60})
    assert stop_line(same) == 3 and "moved from" not in same.text, same.text
    assert same.data["frames"][0]["source"] == "return i * 2;", same.text
    run_to_exit(run, {3})
    # a session that never read the old code cannot know its lines: not set, and says why
    other = shared.open_run("built-other", workdir=str(tmp_path))
    ok(other, {"op": "breakpoints", "file": "loop.c", "lines": [6]})
    refused = ok(other, {"op": "launch", "program": "loop", "wait": 60})
    assert "line 6: NOT set: the file changed after the program was built" in refused.text
    assert refused.data["outcome"] == "exited", refused.text
    # rebuilt: the breakpoint follows its text
    build()
    moved = ok(run, {"op": "launch", "program": "loop", "wait": 60})
    assert "line 6 (moved from line 3: its text moved)" in moved.text, moved.text
    assert stop_line(moved) == 6, moved.text
    ok(run, {"op": "terminate"})
    ok(other, {"op": "terminate"})


def test_attaching_to_a_binary_older_than_its_source_sets_no_shifted_line(
    shared, go_project
) -> None:
    from tests.debug.support import go_build

    go_build(go_project)
    src = go_project / "main.go"
    src.write_text("// edited after the build\n" + src.read_text())  # add's body: line 7 now
    proc = subprocess.Popen(
        [str(go_project / "prog"), "wait"],
        cwd=go_project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        run = shared.open_run("attach-stale", workdir=str(go_project))
        ok(run, {"op": "breakpoints", "file": "main.go", "lines": [7]})
        res = ok(run, {"op": "attach", "adapter": "delve", "pid": proc.pid, "wait": 3})
        # line 7 of the binary's code is another line: never set there
        assert res.data["outcome"] == "running", res.text
        assert "line 7: NOT set: the file changed after the program was built" in res.text
        assert "detached" in ok(run, {"op": "terminate"}).text
    finally:
        proc.kill()
        proc.wait(5)
