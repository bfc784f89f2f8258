"""Debug fixtures: small real projects (Python, C built with -g, a Go package) in a temp
workspace, and a run of a real runtime to debug them in. Tests skip naming an adapter
that is not installed."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tether.debug import adapters

PY_PROGRAM = textwrap.dedent(
    """\
    import sys


    def add(a, b):
        total = a + b
        return total


    def main():
        x = add(1, 2)
        print("hello", x)
        line = sys.stdin.readline()
        print("stdin gave", repr(line))
        items = list(range(120))
        text = "y" * 1000
        print(items[0], len(text))
        if len(sys.argv) > 1 and sys.argv[1] == "crash":
            raise ValueError("bad value " + str(x))
        return 0


    main()
    """
)

C_PROGRAM = textwrap.dedent(
    """\
    #include <stdio.h>

    int add(int a, int b) {
        int total = a + b;
        return total;
    }

    int main(int argc, char **argv) {
        int x = add(1, 2);
        printf("hello %d\\n", x);
        printf("stdin gave %d\\n", getchar());
        fflush(stdout);
        while (argc > 1) {  /* "wait": a process to attach to */
            x = add(x, 1);
        }
        return 3;
    }
    """
)

GO_PROGRAM = textwrap.dedent(
    """\
    package main

    import ("fmt"; "os"; "time")

    func add(a, b int) int {
    \ttotal := a + b
    \treturn total
    }

    func main() {
    \tx := add(1, 2)
    \tfmt.Println("hello", x)
    \tfor len(os.Args) > 1 { // "wait": a process to attach to
    \t\tx = add(x, 1)
    \t\tos.WriteFile("beat", []byte(fmt.Sprint(x)), 0o644) // it runs: the count grows
    \t\ttime.Sleep(10 * time.Millisecond)
    \t}
    }
    """
)


DART_PROGRAM = textwrap.dedent(
    """\
    int add(int a, int b) {
      final total = a + b;
      return total;
    }

    void main(List<String> args) {
      final x = add(1, 2);
      print('hello $x');
    }
    """
)


def need(adapter: str) -> None:
    if not adapters.find_binary(adapters.BY_NAME[adapter]):
        pytest.skip(
            f"debug adapter {adapter} is not installed: {adapters.BY_NAME[adapter].install}"
        )


@pytest.fixture
def py_project(tmp_path: Path) -> Path:
    need("debugpy")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "app.py").write_text(PY_PROGRAM)
    return tmp_path


@pytest.fixture
def c_project(tmp_path: Path) -> Path:
    need("lldb")
    if not shutil.which("cc"):
        pytest.skip("no C compiler (cc) to build the debuggee")
    (tmp_path / "CMakeLists.txt").write_text("project(demo C)\nadd_executable(prog prog.c)\n")
    (tmp_path / "prog.c").write_text(C_PROGRAM)
    subprocess.run(["cc", "-g", "-O0", "-o", "prog", "prog.c"], cwd=tmp_path, check=True)
    return tmp_path


@pytest.fixture
def go_project(tmp_path: Path) -> Path:
    need("delve")
    if not shutil.which("go"):
        pytest.skip("go is not installed (delve builds the package with it)")
    (tmp_path / "go.mod").write_text("module example.com/demo\n\ngo 1.19\n")
    (tmp_path / "main.go").write_text(GO_PROGRAM)
    return tmp_path


@pytest.fixture
def dart_project(tmp_path: Path) -> Path:
    need("dart")  # no Debian/PyPI/npm package ships the Dart SDK: skipped unless installed
    (tmp_path / "pubspec.yaml").write_text("name: demo\nenvironment:\n  sdk: '>=3.0.0 <4.0.0'\n")
    (tmp_path / "main.dart").write_text(DART_PROGRAM)
    return tmp_path
