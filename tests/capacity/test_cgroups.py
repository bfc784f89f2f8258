"""Memory cgroups (tether.cgroups, tether.capacity.measure): v2 and v1 as files a
test lays out, and a real v1 memory cgroup where this machine has one and we may make it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tether import cgroups
from tether.capacity.measure import DEFAULT_SHARE, charge, resolve_budget, tree_cgroup
from tether.capacity.usage import MIB
from tether.cgroups import (
    Cgroup,
    CgroupError,
    Mounts,
    of_process,
    parse_mountinfo,
    parse_proc_cgroup,
)

GIB = 2**30
MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
"""
V1_ROOT = Path("/sys/fs/cgroup/memory")


def test_mounts_and_a_process_cgroup_are_parsed():
    mounts = parse_mountinfo(MOUNTINFO)
    v1 = {"memory": V1_ROOT, "pids": V1_ROOT.parent / "pids"}
    v1["cpu"] = V1_ROOT.parent / "cpu,cpuacct"  # (a joint mount serves each of its own)
    assert mounts == Mounts(Path("/sys/fs/cgroup/unified"), v1)
    text = "9:name=systemd:/\n4:memory:/a/b\n1:cpu,cpuacct:/\n0::/user.slice/x.scope\n"
    assert parse_proc_cgroup(text) == ("/user.slice/x.scope", "/a/b")
    assert parse_mountinfo("garbage\n") == Mounts(None, {})


def _v2(tmp: Path, current: str, limit: str, events: str = "oom 0\noom_kill 0\n") -> Path:
    path = tmp / "v2" / "tree.scope"
    path.mkdir(parents=True)
    (path / "memory.current").write_text(current)
    (path / "memory.max").write_text(limit)
    (path / "memory.events").write_text(events)
    return path


def _v1(tmp: Path, usage: int, limit: int, inactive: int, hierarchical: int) -> Path:
    path = tmp / "v1" / "tree"
    path.mkdir(parents=True)
    (path / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (path / "memory.limit_in_bytes").write_text(f"{limit}\n")
    (path / "memory.stat").write_text(
        f"cache 1\ntotal_inactive_file {inactive}\nhierarchical_memory_limit {hierarchical}\n"
    )
    (path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    return path


def test_v2_files(tmp_path):
    # what Debian 12 mounts at /sys/fs/cgroup: laid out as files (this machine's v2
    # hierarchy has no memory controller, so the kernel's own files cannot be read here)
    path = _v2(tmp_path, "123456789\n", "2147483648\n", "low 0\noom 2\noom_kill 2\n")
    cg = Cgroup(2, path)
    assert (cg.charge(), cg.limit(), cg.oom_kills()) == (123456789, 2 * GIB, 2)
    (path / "memory.max").write_text("max\n")
    assert cg.limit() is None
    proc = tmp_path / "proc"
    (proc / "77").mkdir(parents=True)
    (proc / "77" / "cgroup").write_text("0::/tree.scope\n")
    assert of_process(77, proc, Mounts(tmp_path / "v2")) == cg


def test_v1_files(tmp_path):
    path = _v1(tmp_path, usage=500 * MIB, limit=2**63 - 4096, inactive=100 * MIB, hierarchical=GIB)
    cg = Cgroup(1, path)
    # usage minus the inactive file cache; the ancestors' limit is the one that binds
    assert (cg.charge(), cg.limit(), cg.oom_kills()) == (400 * MIB, GIB, 3)
    (path / "memory.stat").write_text("total_inactive_file 0\n")
    assert cg.limit() is None  # v1's "no limit" is the largest page-aligned long


def test_a_v2_without_the_memory_controller_falls_to_v1(tmp_path):
    (tmp_path / "v2" / "x").mkdir(parents=True)  # no memory.current: no memory controller
    path = _v1(tmp_path, usage=10, limit=GIB, inactive=0, hierarchical=GIB)
    proc = tmp_path / "proc"
    (proc / "5").mkdir(parents=True)
    (proc / "5" / "cgroup").write_text("4:memory:/tree\n0::/x\n")
    mounts = Mounts(tmp_path / "v2", {"memory": tmp_path / "v1"})
    assert of_process(5, proc, mounts) == Cgroup(1, path)


def test_a_v2_child_without_the_controller_says_how_to_delegate(tmp_path):
    cg = Cgroup(2, _v2(tmp_path, "1", "max"))
    with pytest.raises(CgroupError, match=r"echo \+memory > .*cgroup.subtree_control"):
        cg.child("kernel-1")
    assert not (cg.path / "kernel-1").exists()


def test_what_tether_made_is_removed_once_empty_and_only_that(tmp_path):
    # plain directories stand in for cgroups: rmdir refuses a non-empty one as the kernel
    # refuses a cgroup with a child or a task in it
    base = tmp_path / "own" / cgroups.TETHER
    a, b = Cgroup(1, base / "a"), Cgroup(1, base / "b", (("pids", tmp_path / "p" / "b"),))
    for d in (*a.dirs, *b.dirs):
        d.mkdir(parents=True)
    assert a.remove() and not a.path.exists() and base.exists()  # b is still in it
    assert b.remove() and not base.exists() and not (tmp_path / "p" / "b").exists()
    assert (tmp_path / "p").exists()  # not tether's: left alone
    own = Cgroup(1, tmp_path / "mine")
    own.path.mkdir()
    assert own.remove() and (tmp_path).exists()


def test_a_cgroup_busy_with_dying_tasks_is_removed_at_the_next_remove(tmp_path):
    base = tmp_path / cgroups.TETHER
    dying, other = Cgroup(1, base / "dying"), Cgroup(1, base / "other")
    dying.path.mkdir(parents=True)
    other.path.mkdir()
    (dying.path / "cgroup.procs").write_text("")  # (no task listed, yet not removable)
    assert not dying.remove() and dying.path.exists()
    (dying.path / "cgroup.procs").unlink()  # the tasks are gone now
    assert other.remove() and not dying.path.exists() and not base.exists()


def test_a_base_removed_between_the_two_mkdirs_is_made_again(tmp_path, monkeypatch):
    base, real = tmp_path / cgroups.TETHER, Path.mkdir
    raced: list[Path] = []

    def racing_mkdir(self: Path, *args, **kwargs) -> None:
        if self.parent == base and not raced:  # another runtime's remove takes the base
            raced.append(self)
            base.rmdir()
        real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    assert cgroups._mkdir(base, "leaf") == base / "leaf" and (base / "leaf").is_dir()
    assert raced == [base / "leaf"]


@pytest.mark.parametrize(
    ("given", "limit", "expected", "source"),
    [
        (None, None, int(16 * GIB * DEFAULT_SHARE), "0.8 of physical memory"),
        (None, 2 * GIB, 2 * GIB, "the limit of cg"),
        (0.5, 2 * GIB, GIB, "memory_budget=0.5 of the limit of cg"),
        (0.25, None, 4 * GIB, "memory_budget=0.25 of physical memory"),
        (3 * GIB, 2 * GIB, 3 * GIB, f"memory_budget={3 * GIB}"),
    ],
)
def test_budget(given, limit, expected, source):
    budget = resolve_budget(given, limit, 16 * GIB, "cg")
    assert (budget.bytes, budget.source) == (expected, source)


@pytest.mark.parametrize(
    ("given", "error"),
    [
        (1.5, "a fraction 0 < f <= 1 .* got 1.5"),
        (0.0, "got 0.0"),
        ("2G", "bytes \\(an int, e.g. 8 \\* 2\\*\\*30\\).* got '2G'"),
        (True, "got True"),
        (1000, "less than 64 MiB"),
    ],
)
def test_a_bad_budget_is_refused_with_the_right_forms(given, error):
    with pytest.raises(ValueError, match=error):
        resolve_budget(given, None, 16 * GIB)


def test_charge_without_a_cgroup_is_the_pss_of_the_processes():
    measured = charge(None, lambda: [os.getpid()])
    assert measured.source == "PSS of 1 processes" and measured.bytes > 5 * MIB


@pytest.fixture
def v1_cgroup():
    """A real v1 memory cgroup of our own at the root of the hierarchy, removed after."""
    if os.geteuid() != 0 or not (V1_ROOT / "memory.usage_in_bytes").exists():
        pytest.skip("needs root and a v1 memory controller at /sys/fs/cgroup/memory")
    cg = Cgroup(1, V1_ROOT).child(f"tether-test-{os.getpid()}")
    yield cg
    for pid in cg.pids():  # (a child still in it: back to the root before the rmdir)
        Cgroup(1, V1_ROOT).add(pid)
    cg.remove()


def test_a_real_v1_cgroup(v1_cgroup):
    v1_cgroup.set_limit(256 * MIB)
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; b = bytearray(40 * 2**20); sys.stdin.read()"],
        stdin=subprocess.PIPE,
    )
    try:
        v1_cgroup.add(child.pid)
        assert of_process(child.pid) == v1_cgroup
        assert tree_cgroup(child.pid) == v1_cgroup  # it has a limit: a box
        assert v1_cgroup.limit() == 256 * MIB
        # (moved after it allocated: v1 does not move the charge along by default, so
        # what it touches from now on is charged here)
        assert 0 <= v1_cgroup.charge() < 256 * MIB and v1_cgroup.oom_kills() == 0
    finally:
        child.kill()
        child.wait()


def test_a_real_v1_ceiling_kills_only_inside(v1_cgroup):
    v1_cgroup.set_limit(64 * MIB)
    hog = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; sys.stdin.readline(); b = [bytearray(2**20) for _ in range(500)]",
        ],
        stdin=subprocess.PIPE,
    )
    v1_cgroup.add(hog.pid)
    assert hog.stdin is not None
    hog.stdin.write(b"go\n")
    hog.stdin.flush()
    assert hog.wait(30) == -9  # SIGKILLed by the kernel at the ceiling
    wait_until(lambda: v1_cgroup.oom_kills() == 1, timeout=5.0)
