"""The parse cache: keyed on path, mtime and size; bounded by estimated memory; LRU."""

from __future__ import annotations

import os
from pathlib import Path

from tether.structural.cache import TREE_BYTES_PER_SOURCE_BYTE, ParseCache
from tether.structural.search import search_dir


def test_hit_then_miss_after_a_change(tmp_path: Path):
    f = tmp_path / "a.py"
    f.write_text("foo(1)\n")
    cache = ParseCache()
    e1 = cache.source(str(f), "python")
    cache.tree(str(f), "python", e1)
    assert cache.source(str(f), "python") is e1 and cache.hits == 1
    f.write_text("foo(22)\n")  # new size
    e2 = cache.source(str(f), "python")
    assert e2 is not e1 and e2.source == b"foo(22)\n" and e2.tree is None
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # same size, new mtime
    assert cache.source(str(f), "python") is not e2


def test_memory_bound_evicts_least_recently_used(tmp_path: Path):
    paths = []
    for i in range(5):
        p = tmp_path / f"m{i}.py"
        p.write_text("x = 1\n" * 100)  # 600 bytes
        paths.append(str(p))
    per_file = 600 * (1 + TREE_BYTES_PER_SOURCE_BYTE) + 256
    cache = ParseCache(max_bytes=3 * per_file)
    for path in paths:
        cache.tree(path, "python", cache.source(path, "python"))
    assert len(cache) == 3 and cache.used <= cache.max_bytes
    assert cache.stats()["trees"] == 3
    cache.source(paths[0], "python")  # evicted earlier: a miss
    assert cache.misses == 6


def test_search_results_follow_file_changes(tmp_path: Path):
    f = tmp_path / "a.py"
    f.write_text("foo(1)\n")
    cache = ParseCache()
    assert len(search_dir("foo($A)", "python", str(tmp_path), cache)) == 1
    f.write_text("foo(1)\nfoo(2)\n")
    assert len(search_dir("foo($A)", "python", str(tmp_path), cache)) == 2
    assert cache.parses == 2


def test_gitignored_files_are_not_searched(tmp_path: Path):
    import shutil
    import subprocess

    import pytest

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.py").write_text("foo(1)\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("foo(2)\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "lib.py").write_text("foo(3)\n")
    got = [m["path"] for m in search_dir("foo($A)", "python", str(tmp_path))]
    assert got == [str(tmp_path / "src" / "a.py")]


def test_symlinked_files_are_not_followed(tmp_path: Path):
    outside = tmp_path / "outside.py"
    outside.write_text("foo(1)\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "link.py").symlink_to(outside)
    (ws / "real.py").write_text("foo(2)\n")
    assert [m["path"] for m in search_dir("foo($A)", "python", str(ws))] == [str(ws / "real.py")]


def test_a_workdir_inside_an_ignored_directory_is_walked(tmp_path: Path):
    # regression: a stdlib under ~/.pyenv/versions (ignored by pyenv's own repository)
    # was searched as if it had no files
    import shutil
    import subprocess

    import pytest

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("/versions\n")
    proj = tmp_path / "versions" / "proj"
    proj.mkdir(parents=True)
    (proj / "a.py").write_text("foo(1)\n")
    assert [m["path"] for m in search_dir("foo($A)", "python", str(proj))] == [str(proj / "a.py")]
