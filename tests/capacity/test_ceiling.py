"""Hard memory limits (tether.capacity.ceiling) on real kernels: RLIMIT_DATA where the tree
has no cgroup of its own, a child memory cgroup where it has (a real v1 cgroup made here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.capacity.test_cgroups import V1_ROOT
from tether.actors.kernel import kinds
from tether.capacity import ceiling
from tether.capacity.usage import MIB
from tether.cgroups import Cgroup
from tether.kernels.launch import KernelUnavailable, deno_binary

try:
    deno_binary()
    NO_DENO = ""
except KernelUnavailable as exc:
    NO_DENO = str(exc)
REPO = Path(__file__).resolve().parents[2]


def ev(run: Any, code: str, language: str = "python") -> Any:
    return run.call(
        "eval",
        {
            "code": code,
            "description": "check the kernel memory ceiling holds",
            "language": language,
        },
    )


def test_rlimit_data_makes_a_big_allocation_fail_in_the_process():
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; sys.stdin.readline()\n"
            "try:\n    b = bytearray(400 * 2**20); print('allocated')\n"
            "except MemoryError:\n    print('MemoryError')",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    set_ = ceiling.apply([child.pid], 200 * MIB, "unused", use_cgroup=False)
    assert set_.how == "RLIMIT_DATA 200 MiB" and not set_.hit()
    limits = Path(f"/proc/{child.pid}/limits").read_text()
    assert f"Max data size             {200 * MIB}" in limits
    out, _ = child.communicate("go\n", timeout=20)
    assert out.strip() == "MemoryError"


@pytest.mark.parametrize(
    ("language", "define", "runaway", "error", "use"),
    [
        ("python", "x = 41", "b = bytearray(3 * 2**30)", "MemoryError", "x + 1"),
        pytest.param(
            "javascript",
            "let x = 41",
            "new Uint8Array(3 * 2 ** 30).fill(1)",
            "Array buffer allocation failed",
            "x + 1",
            marks=pytest.mark.skipif(bool(NO_DENO), reason=f"deno: {NO_DENO}"),
        ),
    ],
)
def test_a_runaway_cell_fails_in_its_own_kernel_only(
    runtime_factory, tmp_path, language, define, runaway, error, use
):
    rt = runtime_factory(kinds=kinds(memory_limit_mb=300, spares=0))
    run, other = rt.open_run("r1", workdir=tmp_path), rt.open_run("r2", workdir=tmp_path)
    assert not ev(run, define, language).is_error
    assert not ev(other, define, language).is_error
    extra = rt.health()
    from tests.conftest import health_node

    node = health_node(extra, f"run:r1/kernel:{language}")
    slack = (ceiling.V8_SLACK if language == "javascript" else ceiling.DATA_SLACK) // MIB
    # (twice the polled limit: the poll catches slow growth, the ceiling a runaway)
    assert node["extra"]["memory_ceiling"] == f"RLIMIT_DATA {600 + slack} MiB"
    blown = ev(run, runaway, language)
    assert blown.is_error and error in blown.text
    assert ev(run, use, language).text.strip() == "42"  # its kernel kept its state
    assert ev(other, use, language).text.strip() == "42"  # and the other one never noticed


CGROUP_SCRIPT = r"""
import json, os, sys, tempfile
import tether.actors.kernel
from tether.actors.kernel import kinds
from tether.runtime import Runtime
tether.actors.kernel.MEMORY_CHECK = 60.0  # (the poll must not win the race: the tree forks)
with Runtime.start(kinds=kinds(memory_limit_mb=150, spares=0)) as rt:
    work = tempfile.mkdtemp()
    run, other = rt.open_run("r1", workdir=work), rt.open_run("r2", workdir=work)
    call = lambda r, code: r.call("eval", {"code": code, "description": "check the kernel memory ceiling holds"})
    out = {"define": call(run, "x = 41").text, "other": call(other, "y = 1").text}
    node = [n for n in rt.health()["children"] if n["name"] == "runs"][0]
    out["runaway"] = call(run, "b = [bytearray(2**20) for _ in range(600)]").text
    out["after"] = call(run, "'x' in dir()").text
    out["other_after"] = call(other, "y + 1").text
    print(json.dumps(out))
"""


def in_a_box(script: str, state_dir: Path, timeout: float = 180.0) -> tuple[dict[str, Any], Cgroup]:
    """Run `script` in a fresh Python born inside a v1 memory cgroup of its own with a 3 GiB
    limit (so the tree it starts has a limited cgroup, and ceilings are child cgroups of
    it): the JSON of its last stdout line, and the box (the caller removes it with
    `remove_tree`, after its assertions on it). `timeout`: s the script may take."""
    if os.geteuid() != 0 or not (V1_ROOT / "memory.usage_in_bytes").exists():
        pytest.skip("needs root and a v1 memory controller at /sys/fs/cgroup/memory")
    box = Cgroup(1, V1_ROOT).child(f"tether-test-box-{os.getpid()}")
    box.set_limit(3 * 2**30)
    # the child joins the box before it runs a line (so the tree is born inside it)
    join = f'echo $$ > {box.path}/cgroup.procs && exec {sys.executable} -c "$0"'
    # (TMPDIR: the script's own temporary dirs go with the test's, not in the machine's /tmp)
    scratch = state_dir / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TETHER_STATE_DIR": str(state_dir),
           "TMPDIR": str(scratch)}  # fmt: skip
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", join, script],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=REPO,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1]), box
    except BaseException:
        remove_tree(box)
        raise


def test_with_a_cgroup_of_its_own_a_runaway_kernel_is_killed_inside_its_child(
    tmp_path, tether_state_dir
):
    out, box = in_a_box(CGROUP_SCRIPT, tether_state_dir)
    try:
        assert "memory limit (a ceiling of 300 MiB)" in out["runaway"], out
        assert "OOM killer" in out["runaway"] and "state" not in out["other_after"]
        assert "fresh kernel" in out["after"] or "False" in out["after"], out
        assert out["other_after"].strip() == "2"  # the other conversation's kernel lived
        assert box.oom_kills() == 0  # the kill happened in the kernel's own cgroup
    finally:
        remove_tree(box)


def remove_tree(cg: Cgroup) -> None:
    """Remove `cg` and the cgroups made beneath it (tether/kernel-*), deepest first."""
    for pid in cg.pids():
        Cgroup(1, V1_ROOT).add(pid)
    for sub in sorted((p for p in cg.path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        sub.rmdir()
    cg.remove()
