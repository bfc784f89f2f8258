"""eval end to end with real kernels (ipykernel; Deno's kernel from the `deno` package):
persistence, echo, errors, the tool bridge, budgets, kernel death, reset, reaping, the
spare pool, isolation between runs. A test that kills or faults a kernel or the pool, sets
kernel options of its own or counts the pool's spares and kernels runs its own runtime;
the others share the module's (`shared`: a run of their own on a healthy tree, with a
warm spare, as a host keeps one). No orphans: the fixtures check."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import SharedTest, SharedTree, alive, gone, health_node, wait_until
from tether.actors.kernel import kinds
from tether.kernels.launch import KernelUnavailable, deno_binary
from tether.processes import processes_with_token
from tether.tools import eval as eval_tool
from tether.tools.registry import Family, Registry, load_families
from tether.tools.results import ToolResult
from tether.tools.spec import Surface, Tier, ToolSpec

try:
    deno_binary()
    NO_DENO = ""
except KernelUnavailable as exc:
    NO_DENO = str(exc)

needs_deno = pytest.mark.skipif(bool(NO_DENO), reason=f"deno: {NO_DENO}")
DESCRIPTION = "check the kernel does what it should"


def ev(run: Any, code: str, language: str = "python", **extra: Any) -> ToolResult:
    return run.call(
        "eval", {"code": code, "description": DESCRIPTION, "language": language, **extra}
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    return tmp_path


@pytest.fixture(scope="module")
def shared_tree(tether_state_dir: Path) -> Iterator[SharedTree]:
    """The module's runtime for `shared`: the kernel kinds with a spare per language, as a
    host runs them; each test starts with the spares started, so its first cell takes one."""
    languages = ["python"] if NO_DENO else ["python", "javascript"]

    def spares_ready(rt: Any) -> None:
        # (the pools' own status, not health: a health query walks every process of the tree)
        for language in languages:
            status = lambda: rt.call("", "kernel_pool", language, "pool_status", {}, 5.0)  # noqa: B023, E731
            wait_until(lambda: status()["ready"] == 1, timeout=60, interval=0.05)  # noqa: B023

    tree = SharedTree(tether_state_dir, kinds=kinds(spares=1))
    tree.settle = spares_ready
    yield tree
    tree.close()


def start(runtime_factory: Any, **config: Any) -> Any:
    config.setdefault("spares", 0)
    return runtime_factory(kinds=kinds(**config))


def kernel_node(rt: Any, run_id: str, language: str = "python") -> dict[str, Any]:
    node = health_node(rt.health(), f"run:{run_id}/kernel:{language}")
    assert node is not None, f"no kernel actor for {run_id}/{language}"
    return node


# --- cells ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "language, define, use",
    [
        ("python", "import math\nx = 41", "x + 1 + math.floor(0.5)"),
        pytest.param("javascript", "let x = 41", "x + 1", marks=needs_deno),
    ],
)
def test_variables_persist_and_the_last_expression_is_echoed(
    shared: SharedTest, workdir: Path, language: str, define: str, use: str
) -> None:
    rt = shared.rt
    run = shared.open_run("r1", workdir=workdir)
    first = ev(run, define, language)
    assert not first.is_error, first.text
    second = ev(run, use, language)
    assert not second.is_error, second.text
    assert second.text.strip() == "42"
    assert second.data["execution_count"] == 2
    extra = kernel_node(rt, run.run_id, language)["extra"]
    assert extra["memory_mb"] > 10  # the kernel's memory is in health
    assert extra["cells_run"] == 2


def test_the_kernel_runs_in_the_run_workdir_and_prints_in_order(
    shared: SharedTest, workdir: Path
) -> None:
    run = shared.open_run("r1", workdir=workdir)
    result = ev(run, "import os, sys\nprint('a')\nprint(os.getcwd())\nprint('c')")
    assert result.text.splitlines() == ["a", str(workdir), "c"]


def test_an_error_is_an_error_result_with_the_exception(shared: SharedTest, workdir: Path) -> None:
    run = shared.open_run("r1", workdir=workdir)
    result = ev(run, "print('before')\n1 / 0")
    assert result.is_error
    assert "before" in result.text and "ZeroDivisionError" in result.text
    assert "ZeroDivisionError" in result.data["error"]
    assert ev(run, "'still alive'").text.strip() == "'still alive'"


@pytest.mark.parametrize(
    "description", ["", "run it", "one two three four five six seven eight nine ten eleven"]
)
def test_description_must_be_five_to_ten_words(
    shared: SharedTest, workdir: Path, description: str
) -> None:
    rt = shared.rt
    run = shared.open_run("r1", workdir=workdir)
    result = run.call("eval", {"code": "1", "description": description})
    assert result.is_error
    assert "5-10 words" in result.text and eval_tool.GOOD_DESCRIPTION in result.text
    assert health_node(rt.health(), f"run:{run.run_id}/kernel:python") is None  # nothing started


def test_plain_input_gets_an_empty_answer_and_a_note(shared: SharedTest, workdir: Path) -> None:
    run = shared.open_run("r1", workdir=workdir)
    result = ev(run, "answer = input('your name? ')\nrepr(answer)")
    assert not result.is_error, result.text
    assert "''" in result.text
    assert "empty answer" in result.text


def test_eval_is_exec_tier_and_absent_from_plan(shared: SharedTest, workdir: Path) -> None:
    assert "eval" in [t.name for t in shared.open_run("r1", workdir=workdir).tools()]
    plan = shared.open_run("r2", workdir=workdir, surface=Surface.PLAN)
    assert "eval" not in [t.name for t in plan.tools()]
    assert ev(plan, "1").is_error


# --- the tool bridge ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "language, code",
    [
        ("python", "text = tool('read', {'path': 'notes.txt'})\nprint('42' in text)"),
        pytest.param(
            "javascript",
            "const text = await tool('read', {path: 'notes.txt'});\nconsole.log(text.includes('42'))",
            marks=needs_deno,
        ),
    ],
)
def test_tool_read_from_a_cell(shared: SharedTest, workdir: Path, language: str, code: str) -> None:
    run = shared.open_run("r1", workdir=workdir)
    result = ev(run, code, language)
    assert not result.is_error, result.text
    assert result.text.strip() == "true" if language == "javascript" else "True"


def test_a_tool_error_is_an_exception_in_the_cell(shared: SharedTest, workdir: Path) -> None:
    run = shared.open_run("r1", workdir=workdir)
    code = (
        "try:\n    tool('read', {'path': '../outside.txt'})\n"
        "except ToolError as e:\n    print('refused:', e)"
    )
    result = ev(run, code)
    assert not result.is_error, result.text
    assert result.text.startswith("refused:")


def test_tools_runs_a_batch(shared: SharedTest, workdir: Path) -> None:
    (workdir / "b.txt").write_text("bee\n")
    run = shared.open_run("r1", workdir=workdir)
    result = ev(
        run,
        "a, b = tools([('read', {'path': 'notes.txt'}), ('read', {'path': 'b.txt'})])\n'42' in a and 'bee' in b",
    )
    assert result.text.strip() == "True", result.text


def test_a_bridged_write_is_refused_once_the_run_is_in_plan_mode(
    shared: SharedTest, workdir: Path
) -> None:
    """The bridge re-enters the run's own pipeline: when the user switches the run to plan
    mode while a cell runs (here: on the cell's first bridged call), the cell's write is
    refused exactly as a write the model issued would be."""
    run = shared.open_run("r1", workdir=workdir)
    call = run.call

    def switch_on_read(name: str, args: Any = None) -> ToolResult:
        if name == "read":
            run.surface = Surface.PLAN
        return call(name, args)

    run.call = switch_on_read  # type: ignore[method-assign]
    code = (
        "tool('read', {'path': 'notes.txt'})\n"
        "try:\n    tool('write', {'path': 'new.txt', 'content': 'x'})\n"
        "except ToolError as e:\n    print('refused:', e)"
    )
    result = call("eval", {"code": code, "description": DESCRIPTION})
    assert "refused:" in result.text, result.text
    assert "plan" in result.text.lower()
    assert not (workdir / "new.txt").exists()


def slow_tool_registry(seconds: float) -> Registry:
    def slow(ctx: Any, args: dict[str, Any]) -> ToolResult:
        time.sleep(seconds)  # the tool itself is slow (a subagent fan-out, say)
        return ToolResult.ok("slow done")

    spec = ToolSpec(
        "slow",
        Tier.READ,
        "a slow tool",
        {"type": "object", "properties": {}, "additionalProperties": False},
        slow,
    )
    return Registry.from_families([*load_families(), Family("slow", "tests", (spec,))])


def test_a_bridged_call_outlasting_the_inactivity_budget_does_not_kill_the_cell(
    shared: SharedTest, workdir: Path
) -> None:
    run = shared.open_run("r1", workdir=workdir, registry=slow_tool_registry(2.0))
    eval_tool.configure(run, inactivity=0.7)
    result = ev(run, "r = tool('slow')\nprint(r)")
    assert not result.is_error, result.text
    assert result.text.strip() == "slow done"


# --- budgets and kernel deaths ----------------------------------------------------------


def test_a_runaway_cell_is_interrupted_with_its_partial_output(
    shared: SharedTest, workdir: Path
) -> None:
    run = shared.open_run("r1", workdir=workdir)
    eval_tool.configure(run, inactivity=1.0)
    ev(run, "kept = 'yes'")
    result = ev(run, "print('started', flush=True)\nwhile True:\n    pass")
    assert result.is_error
    assert "started" in result.text
    assert "inactivity budget" in result.text and "interrupted" in result.text
    assert "KeyboardInterrupt" in (result.data["error"] or "")
    after = ev(run, "kept")  # interrupted, not killed: the state is still there
    assert after.text.strip() == "'yes'", after.text


def test_the_wall_clock_cap_interrupts_a_cell_that_keeps_printing(
    shared: SharedTest, workdir: Path
) -> None:
    run = shared.open_run("r1", workdir=workdir)
    eval_tool.configure(run, inactivity=5.0, wall=1.5)
    result = ev(run, "import time\nwhile True:\n    print('tick', flush=True); time.sleep(0.1)")
    assert result.is_error and "wall-clock cap" in result.text
    assert "tick" in result.text


def test_a_kernel_ignoring_interrupts_is_killed_and_the_next_cell_says_state_lost(
    runtime_factory: Any, workdir: Path
) -> None:
    rt = start(runtime_factory, interrupt_grace=0.5)
    run = rt.open_run("r1", workdir=workdir)
    eval_tool.configure(run, inactivity=0.7)
    ev(run, "x = 1")
    pid = kernel_node(rt, "r1")["extra"]["kernel_pid"]
    # (ipykernel installs its SIGINT handler before each cell: ignore it inside the cell)
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('stuck', flush=True)\nwhile True:\n    pass"
    result = ev(run, code)
    assert result.is_error
    assert "stuck" in result.text and "ignored the interrupt" in result.text
    assert "lost" in result.text
    assert gone([pid])
    after = ev(run, "'x' in globals()")
    assert after.text.splitlines()[0] == "False"
    assert "fresh kernel" in after.text


def test_a_sigkilled_kernel_is_replaced_and_the_next_cell_says_so(
    runtime_factory: Any, workdir: Path
) -> None:
    rt = start(runtime_factory)
    run = rt.open_run("r1", workdir=workdir)
    ev(run, "x = 1")
    pid = kernel_node(rt, "r1")["extra"]["kernel_pid"]
    rt.inject("kill_process", target="run:r1/kernel:python")
    wait_until(lambda: kernel_node(rt, "r1")["extra"]["kernel_pid"] is None, timeout=10)
    assert gone([pid])
    after = ev(run, "'x' in globals()")
    assert after.text.splitlines()[0] == "False"
    assert "killed by signal 9" in after.text and "lost" in after.text
    assert kernel_node(rt, "r1")["extra"]["kernel_pid"] not in (None, pid)


def test_a_kernel_killed_mid_cell_ends_the_cell_with_its_output(
    runtime_factory: Any, workdir: Path
) -> None:
    rt = start(runtime_factory)
    run = rt.open_run("r1", workdir=workdir)
    eval_tool.configure(run, inactivity=30)
    code = "import os, signal\nprint('bye', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)"
    result = ev(run, code)
    # the cell did not finish: an error (chaos caught it answered as a success), saying why
    # ('bye' may die in the kernel's iopub thread with it: not asserted)
    assert result.is_error, result.text
    assert "killed by signal 9" in result.text and "lost" in result.text
    assert "killed by signal 9" in result.data["interrupted"]
    assert "--existing" not in result.text  # ipykernel's start-up banner is no 'last words'


def test_the_kernel_actor_crashing_takes_its_kernel_along(
    runtime_factory: Any, workdir: Path
) -> None:
    rt = start(runtime_factory)
    run = rt.open_run("r1", workdir=workdir)
    ev(run, "x = 1")
    node = kernel_node(rt, "r1")
    pid, actor_pid = node["extra"]["kernel_pid"], node["pids"][0]["pid"]
    rt.inject("crash_actor", target="run:r1/kernel:python")
    wait_until(
        lambda: gone([pid]),
        timeout=10,
    )

    def supervisor_noticed() -> bool:
        node = health_node(rt.health(), "run:r1/kernel:python")
        pids = [p["pid"] for p in node["pids"]] if node is not None else []
        return node is None or actor_pid not in pids or node["state"] != "ready"

    wait_until(supervisor_noticed, timeout=10)
    # An eval is not idempotent, so a cell sent while the actor is still being restarted
    # (or to the one that went, before its supervisor heard) is refused with "call again"
    # / "try again" rather than resent. Under load that can happen more than once.
    transient: list[str] = []

    def evaluated() -> ToolResult | None:
        after = ev(run, "1 + 1")
        if after.is_error:
            assert "call again" in after.text or "try again" in after.text, after.text
            transient.append(after.text)
            return None
        return after

    after = wait_until(evaluated, timeout=20)
    assert after.text.splitlines()[0] == "2", (after.text, transient)
    # the fresh kernel's first result says the run's state went with the old one
    assert "kernel actor took over" in after.text and "lost" in after.text, after.text


def test_reset_starts_a_clean_kernel(shared: SharedTest, workdir: Path) -> None:
    rt = shared.rt
    run = shared.open_run("r1", workdir=workdir)
    ev(run, "x = 1")
    pid = kernel_node(rt, run.run_id)["extra"]["kernel_pid"]
    result = ev(run, "'x' in globals()", reset=True)
    assert result.text.splitlines()[0] == "False"
    assert "reset" in result.text
    assert gone([pid])


def test_an_idle_kernel_is_reaped_and_the_next_cell_says_so(
    runtime_factory: Any, workdir: Path
) -> None:
    rt = start(runtime_factory, idle_reap=0.5)
    run = rt.open_run("r1", workdir=workdir)
    ev(run, "x = 1")
    pid = kernel_node(rt, "r1")["extra"]["kernel_pid"]
    wait_until(lambda: kernel_node(rt, "r1")["extra"]["kernel_pid"] is None, timeout=10)
    assert gone([pid])
    after = ev(run, "'x' in globals()")
    assert after.text.splitlines()[0] == "False"
    assert "idle" in after.text and "lost" in after.text


def test_a_kernel_starts_without_jedi_and_debugpy_and_a_cell_may_import_them(
    shared: SharedTest, workdir: Path
) -> None:
    """The kernel is started with IPython's completion (jedi) and Jupyter's debugger
    (debugpy) held off, ~12 MiB of every kernel that tether never asks for; a cell that
    wants them imports them as usual."""
    run = shared.open_run("r1", workdir=workdir)
    loaded = ev(run, "import sys\nsorted(m for m in ('jedi', 'debugpy') if m in sys.modules)")
    assert loaded.text.splitlines()[0] == "[]", loaded.text
    used = ev(run, "import jedi, debugpy\nprint(jedi.__name__, debugpy.__name__)")
    assert not used.is_error and "jedi debugpy" in used.text, used.text


def test_a_kernel_over_its_memory_limit_is_restarted_with_a_clear_message(
    runtime_factory: Any, workdir: Path
) -> None:
    rt = start(runtime_factory, memory_limit_mb=250)
    run = rt.open_run("r1", workdir=workdir)
    ev(run, "big = b'x' * (400 * 2**20)")
    wait_until(lambda: kernel_node(rt, "r1")["extra"]["kernel_pid"] is None, timeout=10)
    after = ev(run, "'big' in globals()")
    assert after.text.splitlines()[0] == "False"
    assert "over its limit of 250 MiB" in after.text


def test_two_runs_never_share_variables(shared: SharedTest, workdir: Path) -> None:
    rt = shared.rt
    a = shared.open_run("a", workdir=workdir)
    b = shared.open_run("b", workdir=workdir)
    ev(a, "secret = 'from a'")
    assert ev(b, "'secret' in globals()").text.strip() == "False"
    ev(b, "secret = 'from b'")
    assert ev(a, "secret").text.strip() == "'from a'"
    pids = {kernel_node(rt, r.run_id)["extra"]["kernel_pid"] for r in (a, b)}
    assert len(pids) == 2


def test_closing_a_run_kills_its_kernel(shared: SharedTest, workdir: Path) -> None:
    rt = shared.rt
    run = shared.open_run("r1", workdir=workdir)
    ev(run, "1")
    pid = kernel_node(rt, run.run_id)["extra"]["kernel_pid"]
    run.close()
    wait_until(
        lambda: gone([pid]),
        timeout=10,
    )


# --- the spare pool -------------------------------------------------------------------------


def test_the_first_cell_takes_a_spare_and_the_pool_refills(
    runtime_factory: Any, workdir: Path
) -> None:
    rt = runtime_factory(kinds=kinds(spares=1))
    eval_tool.warm_spares(rt, ["python"])
    pool = lambda: health_node(rt.health(), "kernel_pool:python")["extra"]  # noqa: E731
    wait_until(lambda: pool()["ready"] == 1, timeout=30)
    spare_pid = health_node(rt.health(), "kernel_pool:python")["pids"][1]["pid"]
    run = rt.open_run("r1", workdir=workdir)
    result = ev(run, "import os\nos.getcwd()")
    assert not result.is_error, result.text
    assert str(workdir) in result.text  # the spare moved to the run's directory
    assert kernel_node(rt, "r1")["extra"]["kernel_pid"] == spare_pid
    # (how fast that first cell is: benchmarks/eval.py)
    wait_until(lambda: pool()["ready"] == 1 and pool()["taken"] == 1, timeout=30)
    # a second conversation gets the replacement; the first keeps its kernel
    other = rt.open_run("r2", workdir=workdir)
    ev(other, "y = 2")
    assert kernel_node(rt, "r2")["extra"]["kernel_pid"] not in (spare_pid, None)
    assert ev(run, "'y' in globals()").text.strip() == "False"


HANDOVER_CELLS = [
    (
        "python",
        "text = tool('read', {'path': 'notes.txt'})\nanswer = input('name? ')\n"
        "print('42' in text, repr(answer))",
        "True ''",
    ),
    pytest.param(
        "javascript",
        "const text = await tool('read', {path: 'notes.txt'});\nconst answer = prompt('name?');\n"
        "console.log(text.includes('42'), JSON.stringify(answer))",
        'true ""',
        marks=needs_deno,
    ),
]


@pytest.mark.parametrize("language, code, expect", HANDOVER_CELLS)
def test_the_first_cell_on_a_handed_over_spare_reaches_the_bridge(
    runtime_factory: Any, workdir: Path, language: str, code: str, expect: str
) -> None:
    """The run talks to a spare over connections of its own, made at hand-over: its first
    cell's tool() and input() must reach this run (regression: the cell ran before the new
    stdin connection was up; the kernel's input request went nowhere, and tool() waited
    out the cell's inactivity budget). Several conversations in a row, each on a spare."""
    rt = runtime_factory(kinds=kinds(spares=1))
    eval_tool.warm_spares(rt, [language])
    pool = lambda: health_node(rt.health(), f"kernel_pool:{language}")["extra"]  # noqa: E731
    for i in range(4):
        wait_until(lambda: pool()["ready"] == 1, timeout=60)
        run = rt.open_run(f"r{i}", workdir=workdir)
        eval_tool.configure(run, inactivity=20)  # a lost request fails here in 20 s
        result = ev(run, code, language)
        assert not result.is_error, result.text
        assert result.text.splitlines()[0] == expect, result.text
        assert "empty answer" in result.text
        assert pool()["taken"] == i + 1  # (it ran on a spare)
        run.close()


def test_a_spare_handed_over_before_its_stdin_connection_is_up_waits_for_it(
    runtime_factory: Any, workdir: Path
) -> None:
    """The hand-over race made certain: the spare's stdin socket cannot be reached for a
    second (its ipc file moved away), so the run's stdin connection comes up late. The
    first cell waits for it, and its input() and tool() still reach the run. (Without that
    wait, ipykernel drops the input request of a cell sent at once, and the cell hangs
    until its inactivity budget.)"""
    rt = runtime_factory(kinds=kinds(spares=1))
    eval_tool.warm_spares(rt, ["python"])
    pool = lambda: health_node(rt.health(), "kernel_pool:python")["extra"]  # noqa: E731
    wait_until(lambda: pool()["ready"] == 1, timeout=60)
    (spare,) = kernel_processes(rt)
    info = json.loads(Path(spare.cmdline()[-1]).read_text())
    assert info["transport"] == "ipc", info
    stdin_socket = Path(f"{info['ip']}-{info['stdin_port']}")
    hidden = stdin_socket.with_name("stdin-hidden")
    stdin_socket.rename(hidden)
    restore = threading.Timer(1.0, hidden.rename, [stdin_socket])  # (the fault's length)
    restore.start()
    try:
        run = rt.open_run("r1", workdir=workdir)
        eval_tool.configure(run, inactivity=15)
        language, code, expect = HANDOVER_CELLS[0]
        result = ev(run, code, language)
    finally:
        restore.join()
    assert not result.is_error, result.text
    assert result.text.splitlines()[0] == expect, result.text
    assert kernel_node(rt, "r1")["extra"]["kernel_pid"] == spare.pid


def kernel_processes(rt: Any) -> list[psutil.Process]:
    """The runtime's live kernels: ipykernel and `deno jupyter` processes it started."""
    found = []
    for proc in processes_with_token(rt._token):
        with contextlib.suppress(psutil.Error):
            line = " ".join(proc.cmdline())
            if "ipykernel_launcher" in line or "jupyter --kernel" in line:
                found.append(proc)
    return found


def test_spares_and_handed_over_kernels_are_counted_and_die_with_the_tree(
    runtime_factory: Any, workdir: Path
) -> None:
    rt = runtime_factory(kinds=kinds(spares=1))
    eval_tool.warm_spares(rt, ["python"])
    pool = lambda: health_node(rt.health(), "kernel_pool:python")["extra"]  # noqa: E731
    wait_until(lambda: pool()["ready"] == 1, timeout=60)
    assert len(kernel_processes(rt)) == 1  # the spare
    run = rt.open_run("r1", workdir=workdir)
    ev(run, "1")
    wait_until(lambda: pool()["ready"] == 1 and pool()["taken"] == 1, timeout=60)
    kernels = kernel_processes(rt)
    assert len(kernels) == 2  # the run's (a spare, handed over) and its replacement
    run.close()
    wait_until(lambda: len(kernel_processes(rt)) == 1, timeout=10)
    rt.shutdown()
    wait_until(lambda: not kernel_processes(rt) and not alive(kernels))


def test_a_crashed_pool_takes_its_kernels_along_and_the_run_hears_of_it(
    runtime_factory: Any, workdir: Path
) -> None:
    """Spares die with their pool (parent-death signal), also once handed over: the run's
    next cell says its state was lost, and the pool, restarted, has a spare again."""
    rt = runtime_factory(kinds=kinds(spares=1))
    eval_tool.warm_spares(rt, ["python"])
    pool = lambda: health_node(rt.health(), "kernel_pool:python")  # noqa: E731
    wait_until(lambda: pool()["extra"]["ready"] == 1, timeout=60)
    run = rt.open_run("r1", workdir=workdir)
    ev(run, "x = 1")
    wait_until(lambda: pool()["extra"]["ready"] == 1, timeout=60)
    kernels = kernel_processes(rt)
    assert len(kernels) == 2
    rt.inject("crash_actor", target="kernel_pool:python")
    wait_until(lambda: not alive(kernels), timeout=30)
    # (a SIGKILLed kernel's main thread is a zombie a moment before all its threads are
    # gone and its pidfd says so: the run's actor notices then)
    wait_until(lambda: kernel_node(rt, "r1")["extra"]["kernel_pid"] is None, timeout=30)
    after = ev(run, "'x' in globals()")
    assert after.text.splitlines()[0] == "False", after.text
    assert "lost" in after.text
    wait_until(lambda: (pool() or {}).get("extra", {}).get("ready") == 1, timeout=60)


def test_kernels_write_only_in_the_state_dir_the_host_gave(
    runtime_factory: Any,
    workdir: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Connection files, IPython's profile, matplotlib's cache, Deno's cache: all in the
    runtime's state_dir (here not $TETHER_STATE_DIR), none in $HOME, the temp dir or the
    workspace - also for a spare started by the pool."""
    outside = tmp_path_factory.mktemp("outside")  # (workdir is tmp_path)
    home, tmp, state = outside / "home", outside / "tmp", outside / "state"
    home.mkdir()
    tmp.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(tmp))
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "TETHER_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    rt = runtime_factory(kinds=kinds(spares=1), state_dir=state)
    languages = ["python"] if NO_DENO else ["python", "javascript"]
    eval_tool.warm_spares(rt, languages)
    run = rt.open_run("r1", workdir=workdir)
    figure = "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"
    assert not ev(run, figure).is_error
    assert "hi" in ev(run, "!echo hi").text
    if not NO_DENO:
        assert "42" in ev(run, "await tool('read', {path: 'notes.txt'})", "javascript").text
    for language in languages:
        pool = f"kernel_pool:{language}"
        wait_until(lambda: health_node(rt.health(), pool)["extra"]["ready"] == 1, timeout=60)  # noqa: B023
    kernels = kernel_processes(rt)
    assert len(kernels) == 2 * len(languages)  # the run's and a spare, per language
    for proc in kernels:
        connection_file = proc.cmdline()[-1]
        assert Path(connection_file).is_relative_to(state / "kernels"), proc.cmdline()
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []
    assert sorted(p.name for p in workdir.iterdir()) == ["notes.txt"]
    assert (state / "kernels" / "matplotlib").is_dir() and (state / "kernels" / "ipython").is_dir()


def test_kernel_files_stay_in_the_private_state_dir(shared: SharedTest, workdir: Path) -> None:
    run = shared.open_run("r1", workdir=workdir)
    ev(run, "1")
    root = Path(os.environ["TETHER_STATE_DIR"]) / "kernels"
    assert oct(root.stat().st_mode & 0o777) == oct(0o700)
    connections = list(root.glob("*/connection.json"))
    assert connections and all(c.stat().st_mode & 0o077 == 0 for c in connections)
    # (the run's kernel's: the shared tree's Deno spare, on tcp, is there too)
    pid = kernel_node(shared.rt, run.run_id)["extra"]["kernel_pid"]
    own = Path(psutil.Process(pid).cmdline()[-1])
    assert own in connections
    assert '"transport": "ipc"' in own.read_text().replace("'", '"')
    assert sorted(p.name for p in workdir.iterdir()) == ["notes.txt"]


def test_a_launcher_prefixes_the_kernel_command(shared: SharedTest, workdir: Path) -> None:
    run = shared.open_run("r1", workdir=workdir)
    eval_tool.configure(run, launcher=["env", "TETHER_TEST_LAUNCHED=inside"])
    result = ev(run, "import os\nos.environ.get('TETHER_TEST_LAUNCHED')")
    assert result.text.strip() == "'inside'", result.text
    eval_tool.configure(run, launcher=["/nonexistent/enter-sandbox"])
    failed = ev(run, "1", reset=True)
    assert failed.is_error and "the launcher '/nonexistent/enter-sandbox'" in failed.text
    eval_tool.configure(run, launcher=["false"])  # a launcher that runs, and fails
    failed = ev(run, "1")
    assert failed.is_error and "exited with code 1" in failed.text, failed.text


@needs_deno
def test_javascript_errors_prompts_and_loopback_only(shared: SharedTest, workdir: Path) -> None:
    rt = shared.rt
    run = shared.open_run("r1", workdir=workdir)
    error = ev(run, "console.log('before'); throw new Error('boom')", "javascript")
    assert error.is_error and "before" in error.text and "boom" in error.text
    answered = ev(run, "JSON.stringify(prompt('name?'))", "javascript")
    assert "empty answer" in answered.text, answered.text
    pid = kernel_node(rt, run.run_id, "javascript")["extra"]["kernel_pid"]
    listening = [
        c.laddr
        for c in psutil.Process(pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert listening and all(addr.ip == "127.0.0.1" for addr in listening), listening


def test_through_eval_tables_figures_and_clean_tracebacks(
    shared: SharedTest, workdir: Path
) -> None:
    """The cells library's outputs as the eval tool returns them (its own tests cover the
    shapes): a DataFrame as a table, a figure as a PNG image, a traceback without ANSI."""
    run = shared.open_run("r1", workdir=workdir)
    table = ev(run, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})")
    assert not table.is_error, table.text
    assert "|" in table.text and "a" in table.text
    figure = ev(run, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
    assert not figure.is_error, figure.text
    assert len(figure.images) == 1 and figure.images[0].data.startswith(b"\x89PNG")
    error = ev(run, "def f():\n    return 1 / 0\nf()")
    assert error.is_error and "ZeroDivisionError" in error.text and "\x1b[" not in error.text
    magic = ev(run, "!echo from-the-shell")
    assert "from-the-shell" in magic.text, magic.text
