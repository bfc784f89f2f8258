"""Benchmark: the debug tool through tether vs a raw DAP client driving the same adapter.

Program: a small Python file with a breakpoint in a function, in a temp project with a
pyproject.toml marker. Adapter: debugpy (`python -m debugpy.adapter`), one behind tether
(host -> RunActor -> DebugSessionActor, through the tool pipeline: guardrails, the typed
op, rendering) and one behind a minimal synchronous raw client in this process, same
adapter, same launch configuration, same run of this script, alternating who goes first.

Measured:
- launch -> stopped at the breakpoint: tether's `launch` (which answers with the stop, the
  top frames and the locals of the top frame) vs the raw client's spawn + initialize +
  launch + initialized + setBreakpoints + setExceptionBreakpoints + configurationDone +
  stopped + stackTrace + scopes + variables;
- one inspection round trip while stopped: tether's `stack` vs a raw stackTrace, tether's
  `variables` vs a raw variables request.

Targets (issue #14): <= 50 ms added to launch; <= 2 ms added per inspection op (p50).

debugpy answers inspection requests from the suspended program's own thread, which polls
for them (measured here: ~45 ms for any request, raw or not), so its inspection figures
are the poll's phase more than anyone's overhead; `--adapter lldb` (a C program built
with -g) answers at once and shows what tether adds.

    python benchmarks/debug.py [--adapter debugpy|lldb] [--launches 8] [--inspections 200]
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tether.debug import adapters  # noqa: E402
from tether.debug.dap import DapClient, Event, Response  # noqa: E402
from tether.debug.session import initialize_arguments  # noqa: E402

PY_PROGRAM = """\
def work(n):
    values = list(range(n))
    total = sum(values)
    return total


print(work(10))
"""
C_PROGRAM = """\
#include <stdio.h>
int work(int n) {
    int total = 0;
    for (int i = 0; i < n; i++) total += i;
    return total;
}
int main(void) { printf("%d\\n", work(10)); return 0; }
"""
BREAK_LINE = 4


def make_project(root: Path, adapter: str) -> tuple[Path, str]:
    """(program, the source file of the breakpoint) for `adapter` in `root`."""
    if adapter == "debugpy":
        (root / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
        (root / "prog.py").write_text(PY_PROGRAM)
        return root / "prog.py", "prog.py"
    (root / "CMakeLists.txt").write_text("project(bench C)\n")
    (root / "prog.c").write_text(C_PROGRAM)
    subprocess.run(["cc", "-g", "-O0", "-o", "prog", "prog.c"], cwd=root, check=True)
    return root / "prog", "prog.c"


class RawDap:
    """A blocking DAP client over the adapter's stdio: the anchor."""

    def __init__(self, argv: list[str], cwd: Path):
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            bufsize=0,
        )
        assert self.proc.stdin and self.proc.stdout
        self.out = self.proc.stdout.fileno()
        self.client = DapClient()
        self.inbox: list[Any] = []

    def send(self, command: str, arguments: dict[str, Any] | None = None) -> int:
        seq, data = self.client.request(command, arguments)
        assert self.proc.stdin
        os.write(self.proc.stdin.fileno(), data)
        return seq

    def _wait(self, match: Any, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            for i, item in enumerate(self.inbox):
                if match(item):
                    return self.inbox.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("raw client: no answer")
            ready, _, _ = select.select([self.out], [], [], left)
            if ready:
                self.inbox.extend(self.client.feed(os.read(self.out, 65536)))

    def response(self, seq: int) -> Response:
        resp = self._wait(lambda m: isinstance(m, Response) and m.request_seq == seq)
        assert resp.success, resp
        return resp

    def event(self, name: str) -> Event:
        return self._wait(lambda m: isinstance(m, Event) and m.event == name)

    def ask(self, command: str, arguments: dict[str, Any] | None = None) -> Response:
        return self.response(self.send(command, arguments))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(5)


def raw_launch(
    row: adapters.AdapterRow, root: Path, program: Path, source: str
) -> tuple[float, RawDap, int, int]:
    start = time.perf_counter()
    raw = RawDap(adapters.adapter_argv(row, adapters.find_binary(row)), root)
    raw.ask("initialize", initialize_arguments(row))
    launch = raw.send("launch", adapters.launch_config(row, program, [], root))
    raw.event("initialized")
    raw.ask(
        "setBreakpoints",
        {"source": {"path": str(root / source)}, "breakpoints": [{"line": BREAK_LINE}]},
    )
    raw.ask("setExceptionBreakpoints", {"filters": list(row.exception_filters)})
    raw.ask("configurationDone")
    raw.response(launch)
    stopped = raw.event("stopped")
    thread = stopped.body["threadId"]
    frames = raw.ask("stackTrace", {"threadId": thread, "startFrame": 0, "levels": 30})
    frames = frames.body["stackFrames"]
    scopes = raw.ask("scopes", {"frameId": frames[0]["id"]}).body["scopes"]
    ref = scopes[0]["variablesReference"]
    raw.ask("variables", {"variablesReference": ref})
    return time.perf_counter() - start, raw, thread, ref


def tether_launch(run: Any, program: str, source: str) -> tuple[float, int]:
    run.call("debug", {"op": "breakpoints", "file": source, "lines": [BREAK_LINE]})
    start = time.perf_counter()
    res = run.call("debug", {"op": "launch", "program": program})
    took = time.perf_counter() - start
    assert not res.is_error and res.data["outcome"] == "stopped", res.text
    return took, res.data["locals"]["reference"]


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def report(name: str, raw: list[float], ours: list[float], target: float) -> None:
    added = p50(ours) - p50(raw)
    verdict = "meets" if added <= target else "MISSES"
    print(
        f"{name:<22} raw p50 {p50(raw):8.2f} ms  p99 {p99(raw):8.2f} | tether p50 "
        f"{p50(ours):8.2f} ms  p99 {p99(ours):8.2f} | ratio {p50(ours) / p50(raw):5.2f} "
        f"added {added:+7.2f} ms ({verdict} <= {target:g} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=8)
    parser.add_argument("--inspections", type=int, default=200)
    parser.add_argument("--adapter", choices=["debugpy", "lldb"], default="debugpy")
    opts = parser.parse_args()
    row = adapters.BY_NAME[opts.adapter]
    if not adapters.find_binary(row):
        sys.exit(f"{row.name} is not installed: {row.install}")

    from tether.runtime import Runtime

    with tempfile.TemporaryDirectory() as tmp, Runtime.start() as rt:
        root = Path(tmp)
        program, source = make_project(root, opts.adapter)
        run = rt.open_run("bench", workdir=str(root))
        tether_launch(run, program.name, source)  # warm-up: the first actor, the caches
        run.call("debug", {"op": "terminate"})
        raw_launches, our_launches = [], []
        raw_stack, our_stack, raw_vars, our_vars = [], [], [], []
        for i in range(opts.launches):
            order = [0, 1] if i % 2 == 0 else [1, 0]
            raw_client: RawDap | None = None
            for who in order:
                if who == 0:
                    took, raw_client, thread, raw_ref = raw_launch(row, root, program, source)
                    raw_launches.append(took)
                else:
                    took, our_ref = tether_launch(run, program.name, source)
                    our_launches.append(took)
            assert raw_client is not None
            per_launch = max(opts.inspections // opts.launches, 1)
            for _ in range(per_launch):
                t = time.perf_counter()
                raw_client.ask("stackTrace", {"threadId": thread, "startFrame": 0, "levels": 30})
                raw_stack.append(time.perf_counter() - t)
                t = time.perf_counter()
                res = run.call("debug", {"op": "stack"})
                our_stack.append(time.perf_counter() - t)
                assert not res.is_error, res.text
                t = time.perf_counter()
                raw_client.ask("variables", {"variablesReference": raw_ref})
                raw_vars.append(time.perf_counter() - t)
                t = time.perf_counter()
                res = run.call("debug", {"op": "variables", "reference": our_ref})
                our_vars.append(time.perf_counter() - t)
                assert not res.is_error, res.text
            raw_client.close()
            run.call("debug", {"op": "terminate"})
        print(f"{row.name} ({adapters.find_binary(row)}), {opts.launches} launches")
        report("launch -> stopped", raw_launches, our_launches, 50.0)
        report("stack", raw_stack, our_stack, 2.0)
        report("variables", raw_vars, our_vars, 2.0)


if __name__ == "__main__":
    main()
