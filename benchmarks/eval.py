"""eval: what tether adds to a Jupyter kernel, against raw jupyter_client, same run of this
script, same kernel type.

    python benchmarks/eval.py [--cells 300] [--starts 5] [--language python]

1. A trivial cell ("1") round trip, interleaved in blocks of 20 so machine load hits all
   paths alike:
     raw     jupyter_client's BlockingKernelClient on a kernel of its own (the anchor),
             which ran the same prelude as tether's (its display hooks run after every
             cell): execute_request, then execute_reply, the iopub idle and the cell's
             output, its execute_result (Deno may publish that after idle: a client that
             stopped at idle would time a cell whose output it never saw)
     op      rt.call(Execute) to the run's KernelActor (actor + wire thread + channel)
     tool    run.call("eval", ...): the whole tool pipeline on top
   Target: tool p50 - raw p50 <= 1 ms.
2. The first cell of a new conversation: a raw kernel start + first cell (the anchor),
   tether without spares, tether with a started spare from the pool (the run's kernel
   actor is created by that cell), and the same with the actor created beforehand
   (eval_tool.prepare). Target: first cell with a spare <= 50 ms.
3. A bridged tool("read") round trip: a cell calling tool("read") against the same read
   called directly plus a trivial cell. Target: <= 3 ms over those.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jupyter_client.blocking import BlockingKernelClient  # noqa: E402

from tether.actors.kernel import kinds  # noqa: E402
from tether.kernels import bridge, magics  # noqa: E402
from tether.kernels.launch import kernels_dir, launch  # noqa: E402
from tether.messages.kernel_ops import Execute  # noqa: E402
from tether.processes import kill_tree  # noqa: E402
from tether.runtime import Runtime  # noqa: E402
from tether.tools import eval as eval_tool  # noqa: E402

DESCRIPTION = "a trivial cell for the benchmark"
TRIVIAL = {"python": "1", "javascript": "1"}
READ = {
    "python": "tool('read', {'path': 'bench.txt'})",
    "javascript": "await tool('read', {path: 'bench.txt'})",
}


def pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def ms(x: float) -> float:
    return round(x * 1000, 3)


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": ms(pct(xs, 0.5)), "p99_ms": ms(pct(xs, 0.99))}


class RawKernel:
    """A kernel and a plain jupyter_client, nothing of tether between them."""

    def __init__(self, language: str, cwd: str) -> None:
        self.launched = launch(language, cwd)
        self.client = BlockingKernelClient()
        self.client.load_connection_info(self.launched.connection)
        self.client.start_channels(hb=False)
        self._wait_ready()
        # the same start-up code as tether's kernels (display hooks run after every cell)
        prelude = bridge.prelude(language, bridge.new_nonce()) + "\n" + magics.prelude(language)
        self.cell(prelude, echoes=False)

    def _wait_ready(self) -> None:
        """kernel_info until its reply and an iopub message arrived (iopub is connected);
        what jupyter_client's wait_for_ready does, minus its heartbeat liveness check."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.client.kernel_info()
            try:
                self.client.get_shell_msg(timeout=0.5)
                self.client.get_iopub_msg(timeout=0.2)
            except Exception:  # noqa: BLE001 - queue.Empty: not yet
                continue
            while True:  # drain the rest of the handshake
                try:
                    self.client.get_iopub_msg(timeout=0.05)
                except Exception:  # noqa: BLE001
                    break
            while True:
                try:
                    self.client.get_shell_msg(timeout=0.01)
                except Exception:  # noqa: BLE001
                    return
        raise RuntimeError("the raw kernel did not answer kernel_info within 60 s")

    def cell(self, code: str, echoes: bool = True) -> None:
        """Run a cell: done at its reply, idle and (`echoes`: it ends in a value) result."""
        msg_id = self.client.execute(code)
        reply = idle = False
        result = not echoes
        while not (reply and idle and result):
            if not reply:
                msg = self.client.get_shell_msg(timeout=30)
                reply = msg["parent_header"].get("msg_id") == msg_id
                continue
            msg = self.client.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status":
                idle = idle or msg["content"]["execution_state"] == "idle"
            result = result or msg["msg_type"] == "execute_result"

    def close(self) -> None:
        self.client.stop_channels()
        kill_tree(self.launched.pid, grace=0.0)


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def round_trips(rt: Runtime, run: Any, language: str, cells: int, workdir: str) -> dict[str, Any]:
    raw = RawKernel(language, workdir)
    code = TRIVIAL[language]
    op = Execute(code=code, cwd=workdir)
    samples: dict[str, list[float]] = {"raw": [], "op": [], "tool": []}
    args = {"code": code, "description": DESCRIPTION, "language": language}
    paths = {
        "raw": lambda: raw.cell(code),
        "op": lambda: rt.call(run.run_id, "kernel", language, op, timeout=30),
        "tool": lambda: run.call("eval", args),
    }
    try:
        for fn in paths.values():  # warm-up
            for _ in range(20):
                fn()
        for _ in range(max(1, cells // 20)):
            for name, fn in paths.items():
                samples[name].extend(timed(fn) for _ in range(20))
    finally:
        raw.close()
    out = {name: summary(xs) for name, xs in samples.items()}
    out["tool_added_p50_ms"] = round(out["tool"]["p50_ms"] - out["raw"]["p50_ms"], 3)
    out["op_added_p50_ms"] = round(out["op"]["p50_ms"] - out["raw"]["p50_ms"], 3)
    out["tool_ratio_p50"] = round(out["tool"]["p50_ms"] / out["raw"]["p50_ms"], 3)
    return out


def first_eval(
    rt: Runtime, run_id: str, workdir: str, args: dict[str, Any], spare: bool, prepared: bool
) -> float:
    """The first eval of a new conversation, timed (the run is opened before the clock;
    `prepared`: so is its kernel actor, without a kernel, as eval_tool.prepare does)."""
    run = rt.open_run(run_id, workdir=workdir)
    eval_tool.configure(run, use_spares=spare)
    if prepared:
        eval_tool.prepare(run, [args["language"]])
    started = time.perf_counter()
    result = run.call("eval", args)
    took = time.perf_counter() - started
    assert not result.is_error, result.text
    run.close()
    return took


def raw_first(language: str, workdir: str) -> float:
    started = time.perf_counter()
    kernel = RawKernel(language, workdir)
    kernel.cell(TRIVIAL[language])
    took = time.perf_counter() - started
    kernel.close()
    return took


def wait_for_spare(rt: Runtime, language: str) -> None:
    deadline = time.monotonic() + 60
    while rt.call("", "kernel_pool", language, "pool_status", {}, 10)["ready"] < 1:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the {language} kernel pool has no ready spare after 60 s")
        time.sleep(0.05)


def first_cells(rt: Runtime, language: str, starts: int, workdir: str) -> dict[str, Any]:
    args = {"code": TRIVIAL[language], "description": DESCRIPTION, "language": language}
    raw, cold, warm, prepared = [], [], [], []
    for i in range(starts):
        raw.append(raw_first(language, workdir))
        cold.append(first_eval(rt, f"cold-{i}", workdir, args, spare=False, prepared=False))
        wait_for_spare(rt, language)
        warm.append(first_eval(rt, f"warm-{i}", workdir, args, spare=True, prepared=False))
        wait_for_spare(rt, language)
        prepared.append(first_eval(rt, f"prep-{i}", workdir, args, spare=True, prepared=True))
    return {
        "raw_start_and_first_cell": summary(raw),
        "tether_no_spare": summary(cold),
        "tether_with_spare": summary(warm),
        "tether_with_spare_actor_prepared": summary(prepared),
    }


def bridged(run: Any, language: str, cells: int) -> dict[str, Any]:
    trivial = {"code": TRIVIAL[language], "description": DESCRIPTION, "language": language}
    via_tool = {"code": READ[language], "description": DESCRIPTION, "language": language}
    samples: dict[str, list[float]] = {"direct_read": [], "trivial_cell": [], "bridged_read": []}
    paths = {
        "direct_read": lambda: run.call("read", {"path": "bench.txt"}),
        "trivial_cell": lambda: run.call("eval", trivial),
        "bridged_read": lambda: run.call("eval", via_tool),
    }
    result = run.call("eval", via_tool)
    assert not result.is_error and "bench line 7" in result.text, result.text
    for _ in range(max(1, cells // 20)):
        for name, fn in paths.items():
            samples[name].extend(timed(fn) for _ in range(20))
    out = {name: summary(xs) for name, xs in samples.items()}
    anchor = out["direct_read"]["p50_ms"] + out["trivial_cell"]["p50_ms"]
    out["bridge_added_p50_ms"] = round(out["bridged_read"]["p50_ms"] - anchor, 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--language", default="python", choices=["python", "javascript"])
    opts = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="tether-bench-eval-")
    Path(workdir, "bench.txt").write_text("".join(f"bench line {i}\n" for i in range(50)))
    kernels_dir()  # (creates the private dir up front)
    rt = Runtime.start(kinds=kinds(spares=1))
    try:
        eval_tool.warm_spares(rt, [opts.language])
        run = rt.open_run("bench", workdir=workdir)
        eval_tool.configure(run, use_spares=False)
        report = {
            "language": opts.language,
            "cpus": os.cpu_count(),
            "round_trip": round_trips(rt, run, opts.language, opts.cells, workdir),
            "bridged": bridged(run, opts.language, opts.cells),
            "first_cell": first_cells(rt, opts.language, opts.starts, workdir),
        }
    finally:
        rt.shutdown()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
