"""Hard memory ceilings on the resources that poll nothing themselves (tether.capacity.ceiling,
ResourceCeiling): a language server, a vibe worker, a debug adapter and its program. On this
tree (no memory cgroup of its own) the ceiling is RLIMIT_DATA, and a node server's V8 heap
limit inside it; each case is a real process that allocates past its ceiling. The last cases
run a tree born inside a v1 memory cgroup of its own (tests.capacity.test_ceiling.in_a_box),
where each ceiling is a child cgroup and the OOM killer acts inside it only."""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import health_node, wait_until
from tether.actors.language_server import KINDS as LSP_KINDS
from tether.capacity import ceiling
from tether.capacity.usage import MIB

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"


def with_ceiling(kinds, mb: int, **limits: float):
    """`kinds` with a ceiling of `mb` MiB (and these lsp limits, in a language server's)."""
    out = []
    for k in kinds:
        config = {**k.config, "memory_ceiling_mb": mb}
        if limits:
            config["limits"] = {**config["limits"], **limits}
        out.append(replace(k, config=config))
    return out


def big_module(n: int) -> str:
    """`n` dataclasses that refer to each other: checking it takes basedpyright's heap far
    past 300 MiB (measured: ~190 MiB after a small hover, ~700 once this one is checked)."""
    out = ["from dataclasses import dataclass", ""]
    for i in range(n):
        out += [
            "@dataclass",
            f"class C{i}:",
            f"    a: int = {i}",
            f"    def m(self, x: 'C{max(i - 1, 0)}') -> 'C{i}':",
            f"        return C{i}(self.a + x.a)",
            "",
        ]
    return "\n".join([*out, f"w = C{n - 1}().m(C{n - 2}())", ""])


def test_a_language_server_over_its_ceiling_is_restarted_and_its_next_answer_says_why(
    runtime_factory, tmp_path
):
    work = tmp_path / "project"
    shutil.copytree(SAMPLE, work)
    big = big_module(6000)
    (work / "inventory" / "big.py").write_text(big)
    # (a V8 heap near its limit spends tens of seconds in GC before it gives up: on a
    # loaded machine longer than the stall timeout, which would stop it first, for a stall)
    rt = runtime_factory(
        kinds=with_ceiling(LSP_KINDS, 300, stall_timeout=240.0, request_budget=240.0)
    )
    run = rt.open_run("c1", workdir=work)
    small = {"action": "hover", "file": "inventory/models.py", "line": 7, "symbol": "Item"}
    first = run.call("lsp", small)
    assert "class Item" in first.text and "[note]" not in first.text, first.text
    [name] = [n for n in _names(rt.health()) if n.startswith("language_server:basedpyright")]
    node = health_node(rt.health(), name)
    rlimit = (300 * MIB + ceiling.V8_SLACK) // MIB
    assert node["extra"]["memory_ceiling"] == f"RLIMIT_DATA {rlimit} MiB"

    # checking it takes V8 past its limit: in the main thread (the process dies: "heap
    # out of memory"), or the checker thread's (node ends the thread, basedpyright logs
    # ERR_WORKER_OUT_OF_MEMORY and lives on, answering no more: CI saw it stall for 240 s
    # before ServerRow.broken_log). Either way the server is restarted under the call (and
    # again on the runtime's one retry), or after the call's 10 s cap answered "pending"
    blown = run.call("lsp", {"action": "diagnostics", "file": "inventory/big.py"})
    wait_until(lambda: (health_node(rt.health(), name) or {}).get("restarts", 0) >= 1, 240.0)
    said = health_node(rt.health(), name)["last_error"]
    assert ceiling.OVER_WORDS in said and _ran_out(said), said

    again = run.call("lsp", small)
    assert "class Item" in again.text, again.text
    # the first answer of each restarted server says so: this one, or the retried call's
    # "pending" if the first server died before the cap (and the retry's server later)
    notes = [*(blown.data or {}).get("notes", []), *again.data.get("notes", [])]
    assert notes, again.text
    for note in notes:
        assert note.startswith(f"{name} was restarted: its server died at its memory ceiling")
        assert ceiling.OVER_WORDS in note
        assert "a ceiling of 300 MiB" in note and _ran_out(note), note
        assert f"[note] {note}" in again.text + blown.text


def test_a_project_check_over_its_ceiling_fails_alone_and_says_why(runtime_factory, tmp_path):
    from tether.actors.checker import KINDS as CHECKER_KINDS

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "big"\n')
    (tmp_path / "big.py").write_text(big_module(6000))
    rt = runtime_factory(kinds=[*LSP_KINDS, *with_ceiling(CHECKER_KINDS, 160)])
    run = rt.open_run("c1", workdir=tmp_path)
    blown = run.call("lsp", {"action": "diagnostics", "file": "*"})
    said = f"basedpyright --outputjson: {ceiling.OVER_WORDS} (a ceiling of 160 MiB, RLIMIT_DATA "
    assert said in blown.text and _ran_out(blown.text), blown.text

    (tmp_path / "big.py").write_text("x: int = 'no'\n")  # run afresh, under its ceiling
    again = run.call("lsp", {"action": "diagnostics", "file": "*"})
    assert "big.py:1" in again.text and ceiling.OVER_WORDS not in again.text, again.text


def _ran_out(said: str) -> bool:
    """Does `said` quote V8 running out of memory: its heap or a zone in the main thread
    ("JavaScript heap out of memory", "Zone Allocation failed - process out of memory"), or
    the checker thread's heap (ERR_WORKER_OUT_OF_MEMORY)? All three were seen here."""
    return re.search(r"out.of.memory", said, re.IGNORECASE) is not None


def _names(node: dict) -> list[str]:
    return [node.get("name", ""), *(n for c in node.get("children", []) for n in _names(c))]


GROW = "b = []\nwhile True:\n    b.append(bytearray(8 * 2**20))"


def test_a_worker_that_allocates_past_its_ceiling_fails_alone_and_vibe_wait_says_why(
    runtime_factory, tmp_path
):
    from tether.actors.vibe import KINDS as VIBE_KINDS
    from tether.tools.vibe_workers import CommandBackend, VibeConfig

    rt = runtime_factory(kinds=with_ceiling(VIBE_KINDS, 200))
    backends = {
        "fast": CommandBackend([sys.executable, "-c", GROW]),
        "good": CommandBackend([sys.executable, "-c", "import sys; print('fine', sys.argv[-1])"]),
    }
    run = rt.open_run("w", workdir=tmp_path, vibe=True, vibe_config=VibeConfig(backends=backends))
    hog = run.call("vibe_spawn", {"brief": "grow", "label": "hog", "tier": "fast"})
    calm = run.call("vibe_spawn", {"brief": "calm", "label": "calm", "tier": "good"})
    assert not hog.is_error and not calm.is_error, hog.text + calm.text

    def wait(res):
        done = run.call("vibe_wait", {"worker_id": res.data["worker_id"], "timeout_seconds": 60})
        assert done.data["finished"], done.text
        return done

    done = wait(hog)
    assert done.data["status"] == "failed", done.text
    data = 200 + ceiling.DATA_SLACK // MIB
    said = f"{ceiling.OVER_WORDS} (a ceiling of 200 MiB, RLIMIT_DATA {data} MiB)"
    assert said in done.text and "MemoryError" in done.text, done.text
    fine = wait(calm)  # the other worker never noticed
    assert fine.data["status"] == "done" and "fine calm" in fine.text, fine.text


@pytest.mark.parametrize(
    ("config", "bytes_"),
    [
        ({}, ceiling.DEFAULT_MB["language_server"] * MIB),
        ({"memory_ceiling_mb": 0}, 0),
        ({"memory_ceiling_mb": 512}, 512 * MIB),
    ],
)
def test_a_kind_config_sets_the_ceiling(config, bytes_):
    assert ceiling.configured("language_server", config) == bytes_


@pytest.mark.parametrize("given", [1, "big", True, -5])
def test_a_bad_ceiling_in_a_kind_config_says_what_to_write(given):
    with pytest.raises(ValueError) as bad:
        ceiling.configured("vibe_worker", {"memory_ceiling_mb": given})
    assert (
        f"vibe_worker: memory_ceiling_mb must be 0 (no ceiling) or a number of MiB >= 16, got {given!r}"
        in str(bad.value)
    )
    assert "{'memory_ceiling_mb': 8192}" in str(bad.value)


def test_a_node_heap_limit_sits_inside_its_ceiling():
    assert ceiling.node_heap_mb(300 * MIB) == 225


HOG = GROW.replace("b = []", "print('growing', flush=True)\nb = []")


def test_a_debuggee_that_allocates_past_its_ceiling_says_it_hit_the_ceiling(
    runtime_factory, tmp_path
):
    from tether.actors.debug_session import KINDS as DEBUG_KINDS

    (tmp_path / "hog.py").write_text(HOG + "\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "hog"\n')
    rt = runtime_factory(kinds=with_ceiling(DEBUG_KINDS, 200))
    run = rt.open_run("d", workdir=tmp_path)
    first = run.call("debug", {"op": "launch", "program": "hog.py"})
    assert not first.is_error, first.text
    data = 200 + ceiling.DATA_SLACK // MIB
    said = f"the debuggee {ceiling.OVER_WORDS} (a ceiling of 200 MiB, RLIMIT_DATA {data} MiB)"
    # debugpy stops on the uncaught MemoryError; past it, the program exits
    assert "MemoryError" in first.text and said in first.text, first.text
    assert first.data["memory"].startswith(said)
    end = run.call("debug", {"op": "continue"})
    assert "exited with code 1" in end.text and said in end.text, end.text


CGROUP_WORKER = r"""
import json, sys, tempfile
from dataclasses import replace
from tether.actors.vibe import KINDS
from tether.runtime import Runtime
from tether.tools.vibe_workers import CommandBackend, VibeConfig
kinds = [replace(k, config={**k.config, "memory_ceiling_mb": 150}) for k in KINDS]
grow = "b = []\nwhile True:\n    b.append(b'x' * (8 * 2**20))"
backends = {"fast": CommandBackend([sys.executable, "-c", grow]),
            "good": CommandBackend([sys.executable, "-c", "print('fine')"])}
with Runtime.start(kinds=kinds) as rt:
    run = rt.open_run("w", workdir=tempfile.mkdtemp(), vibe=True,
                      vibe_config=VibeConfig(backends=backends))
    out = {}
    for tier in ("fast", "good"):
        spawned = run.call("vibe_spawn", {"brief": "go", "label": tier, "tier": tier})
        done = run.call("vibe_wait", {"worker_id": spawned.data["worker_id"], "timeout_seconds": 60})
        out[tier] = {"text": done.text, "status": done.data["status"]}
    print(json.dumps(out))
"""


def test_with_a_cgroup_of_its_own_a_runaway_worker_is_killed_inside_its_child(
    tmp_path, tether_state_dir
):
    from tests.capacity.test_ceiling import in_a_box, remove_tree

    out, box = in_a_box(CGROUP_WORKER, tether_state_dir)
    try:
        hog = out["fast"]["text"]
        assert out["fast"]["status"] == "failed" and "killed by signal 9" in hog, hog
        assert f"{ceiling.OVER_WORDS} (a ceiling of 150 MiB)" in hog and "OOM killer" in hog, hog
        assert out["good"]["status"] == "done", out["good"]  # the next worker runs as ever
        assert box.oom_kills() == 0  # the kill happened in the worker's own cgroup
    finally:
        remove_tree(box)


# --- the same ceilings as child cgroups: a tree in a v1 memory cgroup of its own --------
CGROUP_SERVER = r"""
import json, shutil, tempfile
from pathlib import Path
from tests.capacity.test_resource_ceilings import SAMPLE, big_module, with_ceiling
from tests.conftest import health_node, wait_until
from tether.actors.language_server import KINDS
from tether.runtime import Runtime
base = Path(tempfile.mkdtemp())
for name in ("big", "calm"):
    shutil.copytree(SAMPLE, base / name)
(base / "big" / "inventory" / "big.py").write_text(big_module(6000))
small = {"action": "hover", "file": "inventory/models.py", "line": 7, "symbol": "Item"}
kinds = with_ceiling(KINDS, 300, stall_timeout=240.0, request_budget=240.0)
out = {}
with Runtime.start(kinds=kinds) as rt:
    run, calm = rt.open_run("big", workdir=base / "big"), rt.open_run("calm", workdir=base / "calm")
    out["first"], out["calm_first"] = run.call("lsp", small).text, calm.call("lsp", small).text
    name = "language_server:basedpyright:" + str(base / "big")
    calm_name = "language_server:basedpyright:" + str(base / "calm")
    out["how"] = health_node(rt.health(), name)["extra"]["memory_ceiling"]
    pids = lambda: sorted(p["pid"] for p in health_node(rt.health(), calm_name)["pids"])
    calm_pids = pids()
    blown = run.call("lsp", {"action": "diagnostics", "file": "inventory/big.py"})
    wait_until(lambda: (health_node(rt.health(), name) or {}).get("restarts", 0) >= 1, 240.0)
    out["last_error"] = health_node(rt.health(), name)["last_error"]
    again = run.call("lsp", small)
    out["notes"] = [*(blown.data or {}).get("notes", []), *again.data.get("notes", [])]
    out["again"], out["blown"] = again.text, blown.text
    out["calm_again"] = calm.call("lsp", small).text
    out["calm_restarts"] = health_node(rt.health(), calm_name).get("restarts", 0)
    # its processes live on (not the same list: a child it runs for a moment, its Python
    # asked for the search paths, may come and go; two full runs saw the list change)
    out["calm_same"] = bool(set(calm_pids) & set(pids()))
print(json.dumps(out))
"""


def test_with_a_cgroup_of_its_own_a_language_server_is_killed_inside_its_child(
    tmp_path, tether_state_dir
):
    from tests.capacity.test_ceiling import in_a_box, remove_tree

    out, box = in_a_box(CGROUP_SERVER, tether_state_dir, timeout=600)
    try:
        assert out["how"].startswith("cgroup v1 ") and "/tether/lsp-" in out["how"], out["how"]
        assert "class Item" in out["first"] and "class Item" in out["calm_first"], out
        # checking big.py took the server past 300 MiB: the OOM killer of its own cgroup
        # killed it there (a V8 heap limit, 225 MiB per isolate, is not reached first:
        # the main thread's heap and the checker's together fill the cgroup)
        said = f"{ceiling.OVER_WORDS} (a ceiling of 300 MiB) and the kernel's OOM killer"
        # (in a cgroup of its own, the box's: each server's, named by its pid, as the
        # runtime's one retry may have met a second server that died the same way)
        box_lsp = out["how"].rsplit("/lsp-", 1)[0] + "/lsp-"
        assert said in out["last_error"] and box_lsp in out["last_error"], out["last_error"]
        assert "class Item" in out["again"], out["again"]
        assert out["notes"], out["again"]
        for note in out["notes"]:  # the next answer of the restarted server says why
            assert "was restarted: its server died at its memory ceiling" in note, note
            assert said in note and f"[note] {note}" in out["again"] + out["blown"], note
        # the other conversation's server lived through it, untouched
        assert "class Item" in out["calm_again"] and "[note]" not in out["calm_again"], out
        assert out["calm_restarts"] == 0 and out["calm_same"], out
        assert box.oom_kills() == 0  # the kill happened in the server's own cgroup
    finally:
        remove_tree(box)


CGROUP_DEBUGGEE = r"""
import json, tempfile
from pathlib import Path
from tests.capacity.test_resource_ceilings import HOG, with_ceiling
from tether.actors.debug_session import KINDS
from tether.runtime import Runtime
work = Path(tempfile.mkdtemp())
(work / "hog.py").write_text(HOG + "\n")
(work / "calm.py").write_text("x = 41\nprint('calm', x + 1)\n")
(work / "pyproject.toml").write_text('[project]\nname = "hog"\n')
out = {}
with Runtime.start(kinds=with_ceiling(KINDS, 150)) as rt:
    run, calm = rt.open_run("d", workdir=work), rt.open_run("e", workdir=work)
    # the other conversation's session waits at a breakpoint meanwhile
    calm.call("debug", {"op": "breakpoints", "file": "calm.py", "lines": [2]})
    stop = calm.call("debug", {"op": "launch", "program": "calm.py"})
    frames = (stop.data or {}).get("frames") or [{}]
    out["calm_stop"] = [(stop.data or {}).get("outcome"), frames[0].get("line"), stop.text]
    hog = run.call("debug", {"op": "launch", "program": "hog.py"})
    out["hog"], out["memory"] = hog.text, (hog.data or {}).get("memory", "")
    out["calm_end"] = calm.call("debug", {"op": "continue"}).text
    again = run.call("debug", {"op": "launch", "program": "calm.py"})  # the session again
    out["again"] = again.text
print(json.dumps(out))
"""


def test_with_a_cgroup_of_its_own_a_runaway_debuggee_is_killed_inside_its_child(
    tmp_path, tether_state_dir
):
    from tests.capacity.test_ceiling import in_a_box, remove_tree

    out, box = in_a_box(CGROUP_DEBUGGEE, tether_state_dir)
    try:
        assert out["calm_stop"][:2] == ["stopped", 2], out["calm_stop"]
        said = f"the debuggee {ceiling.OVER_WORDS} (a ceiling of 150 MiB) and the kernel's OOM "
        assert out["memory"].startswith(said) and "/tether/debug-" in out["memory"], out
        assert said in out["hog"] and "growing" in out["hog"], out["hog"]
        # the other session (its adapter and program, in the same box) never noticed
        assert "calm 42" in out["calm_end"] and "exited with code 0" in out["calm_end"], out
        assert "exited with code 0" in out["again"] and said not in out["again"], out
        assert box.oom_kills() == 0  # the kill happened in the session's own cgroup
    finally:
        remove_tree(box)
