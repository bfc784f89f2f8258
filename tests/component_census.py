"""Which tests start a real component (a language server, a debug adapter, a kernel, the
ast-grep CLI), counted by watching this test process's descendants: a pytest plugin, on
only when TETHER_CENSUS names a file (`TETHER_CENSUS=/tmp/census bash scripts/test.sh`).

A poller thread lists the machine's processes every 0.2 s and charges each new component
process of ours to the test running when it appeared (a module's shared runtime is charged
to the test whose setup started it, as it should be: the others reuse it). "Ours" is read
from the environment, not the parentage, because thespian's admin is a daemon (its parent is
init): a marker this process puts in its environment is inherited by everything it starts,
and a process whose environment was cleared (a sandbox) is ours when its parent is. Each
worker writes `<file>.<worker>.json`; `python -m tests.component_census <file>` sums them.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from pathlib import Path

import psutil
import pytest

# the command-line words that name a real component, longest first where one contains another;
# the first that matches names it, so ipykernel goes before debugpy: a Python kernel's command
# line names debugpy too (tether.kernels.launch holds it off in sys.modules)
COMPONENTS = {
    "ipykernel": re.compile(r"ipykernel"),
    "basedpyright": re.compile(r"basedpyright"),
    "typescript-language-server": re.compile(r"typescript-language-server"),
    "tsserver": re.compile(r"tsserver\.js"),
    "clangd": re.compile(r"(^|/)clangd(-\d+)?( |$)"),
    "gopls": re.compile(r"(^|/)gopls( |$)"),
    "debugpy": re.compile(r"debugpy"),
    "lldb-dap": re.compile(r"lldb-(dap|vscode)"),
    "delve": re.compile(r"(^|/)dlv( |$)"),
    "deno-kernel": re.compile(r"deno.* jupyter"),
    "ast-grep-cli": re.compile(r"(^|/)(ast-grep|sg) "),
}
POLL_S = 0.2
MARKER = "TETHER_CENSUS_OWNER"


class Census:
    def __init__(self, path: str) -> None:
        self.path = path
        self.current = "(collection)"
        self.marker = f"{os.getpid()}"
        os.environ[MARKER] = self.marker  # inherited by every process started from here on
        self.ours: set[tuple[int, float]] = set()
        self.theirs: set[tuple[int, float]] = set()
        self.by_test: dict[str, set[str]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stop.wait(POLL_S):
            for proc in psutil.process_iter():
                self._note(proc)

    def _note(self, proc: psutil.Process) -> None:
        try:
            ident = (proc.pid, proc.create_time())
            if ident in self.ours or ident in self.theirs:
                return
            if not self._is_ours(proc):
                self.theirs.add(ident)
                return
            self.ours.add(ident)
            cmdline = " ".join(proc.cmdline())
        except psutil.Error:
            return
        for name, pattern in COMPONENTS.items():
            if pattern.search(cmdline):
                self.by_test.setdefault(self.current, set()).add(name)
                return

    def _is_ours(self, proc: psutil.Process) -> bool:
        try:
            if proc.environ().get(MARKER) == self.marker:
                return True
            parent = proc.parent()
            return parent is not None and (parent.pid, parent.create_time()) in self.ours
        except psutil.Error:
            return False

    def write(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        data = {test: sorted(names) for test, names in self.by_test.items()}
        Path(f"{self.path}.{worker}.json").write_text(json.dumps(data, indent=1))


_census: Census | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _census
    path = os.environ.get("TETHER_CENSUS")
    controller = not hasattr(config, "workerinput") and config.getoption("numprocesses", 0)
    if path and _census is None and not controller:  # (xdist's controller runs no test)
        _census = Census(path)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _census is not None:
        _census.current = item.nodeid


def pytest_unconfigure(config: pytest.Config) -> None:
    if _census is not None:
        _census.write()


def summarise(path: str) -> str:
    merged: dict[str, list[str]] = {}
    for part in sorted(Path(path).parent.glob(Path(path).name + ".*.json")):
        merged.update(json.loads(part.read_text()))
    per_component: dict[str, int] = {}
    for names in merged.values():
        for name in names:
            per_component[name] = per_component.get(name, 0) + 1
    lines = [f"{len(merged)} tests started a real component"]
    lines += [f"  {name}: {count}" for name, count in sorted(per_component.items())]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarise(sys.argv[1]))
