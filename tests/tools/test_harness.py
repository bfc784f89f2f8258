"""The harness tools: read, write, edit, apply_patch (through a Run, so the whole pipeline)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from tether import atomic_files
from tether.run import Run
from tether.tools.harness import edit as harness_edit
from tether.tools.harness import read as harness_read
from tether.tools.unidiff import PatchError, apply_hunks, parse_patch

# ---- read ---------------------------------------------------------------------------------


def test_read_numbers_lines(run: Run) -> None:
    res = run.call("read", {"path": "src/app.py"})
    assert not res.is_error
    assert res.text.splitlines()[0] == "     1\timport os"
    assert res.data == {
        "path": "src/app.py",
        "start_line": 1,
        "end_line": 6,
        "total_lines": 6,
        "truncated": False,
    }


def test_read_range(run: Run) -> None:
    res = run.call("read", {"path": "src/app.py", "start_line": 3, "end_line": 3})
    assert res.text == "     3\tretries = 3"


def test_read_range_past_end(run: Run) -> None:
    res = run.call("read", {"path": "src/app.py", "start_line": 99})
    assert res.is_error and "past the end of 'src/app.py', which has 6 lines" in res.text


def test_read_end_before_start(run: Run) -> None:
    res = run.call("read", {"path": "src/app.py", "start_line": 4, "end_line": 2})
    assert res.is_error and "end_line (2) is before start_line (4)" in res.text


def test_read_cap_says_how_to_continue(run: Run, workdir: Path) -> None:
    (workdir / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 5001)))
    res = run.call("read", {"path": "big.txt"})
    assert not res.is_error and res.data["truncated"] is True
    assert res.data["end_line"] == harness_read.MAX_READ_LINES
    assert "[showing lines 1-2000 of 5000" in res.text
    assert "call read with start_line=2001 for more]" in res.text


def test_read_byte_cap(run: Run, workdir: Path) -> None:
    (workdir / "wide.txt").write_text(("x" * 1000 + "\n") * 1000)
    res = run.call("read", {"path": "wide.txt"})
    assert res.data["truncated"] is True and "256 KiB" in res.text


def test_read_missing_suggests(run: Run) -> None:
    res = run.call("read", {"path": "src/ap.py"})
    assert (
        res.is_error and res.text == "no such file: 'src/ap.py'. Similar names there: 'src/app.py'"
    )


def test_read_directory_lists_entries(run: Run) -> None:
    res = run.call("read", {"path": "src"})
    assert res.is_error and "'src' is a directory, not a file. Its entries: app.py." in res.text


def test_read_binary(run: Run, workdir: Path) -> None:
    (workdir / "blob.bin").write_bytes(b"\x00\x01\x02")
    res = run.call("read", {"path": "blob.bin"})
    assert res.is_error and "binary file (3 bytes)" in res.text


def test_read_fifo_does_not_block(run: Run, workdir: Path) -> None:
    os.mkfifo(workdir / "pipe")
    res = run.call("read", {"path": "pipe"})
    assert res.is_error and "not a regular file" in res.text


def test_read_empty(run: Run, workdir: Path) -> None:
    (workdir / "empty.txt").write_text("")
    assert run.call("read", {"path": "empty.txt"}).text == "'empty.txt' is empty."


# ---- write --------------------------------------------------------------------------------


def test_write_creates_with_parents(run: Run, workdir: Path) -> None:
    res = run.call("write", {"path": "new/dir/x.py", "content": "a = 1\n"})
    assert not res.is_error, res.text
    assert (workdir / "new/dir/x.py").read_text() == "a = 1\n"
    assert res.data == {"written": ["new/dir/x.py"], "created": True}
    assert res.text == "created 'new/dir/x.py' (6 bytes, 1 lines)."


def test_write_overwrites_and_keeps_mode(run: Run, workdir: Path) -> None:
    target = workdir / "run.sh"
    target.write_text("echo 1\n")
    target.chmod(0o755)
    res = run.call("write", {"path": "run.sh", "content": "echo 2\n"})
    assert res.data["created"] is False and target.read_text() == "echo 2\n"
    assert target.stat().st_mode & 0o777 == 0o755
    assert not [p for p in workdir.iterdir() if p.name.endswith(".tether-tmp")]


def test_write_into_a_file_as_directory(run: Run) -> None:
    res = run.call("write", {"path": "README.md/x", "content": ""})
    assert res.is_error and "write failed: Not a directory" in res.text


def test_write_directory(run: Run) -> None:
    res = run.call("write", {"path": "src", "content": ""})
    assert res.is_error and "'src' is a directory" in res.text


# ---- edit ---------------------------------------------------------------------------------


def test_edit_once(run: Run, workdir: Path) -> None:
    res = run.call(
        "edit", {"path": "src/app.py", "old_string": "retries = 3", "new_string": "retries = 5"}
    )
    assert res.text == "replaced 1 occurrence in 'src/app.py' (line 3)."
    assert res.data == {"written": ["src/app.py"], "replacements": 1}
    assert "retries = 5" in (workdir / "src/app.py").read_text()


def test_edit_zero_matches_shows_candidates(run: Run, workdir: Path) -> None:
    before = (workdir / "src/app.py").read_text()
    res = run.call("edit", {"path": "src/app.py", "old_string": "retries = 4", "new_string": "x"})
    assert res.is_error
    assert "old_string was not found in 'src/app.py'" in res.text
    assert "Closest lines:\n  line 3: retries = 3" in res.text
    assert (workdir / "src/app.py").read_text() == before


def test_edit_two_matches_lists_them(run: Run, workdir: Path) -> None:
    (workdir / "twice.py").write_text("x = 1\ny = 2\nx = 1\n")
    res = run.call("edit", {"path": "twice.py", "old_string": "x = 1", "new_string": "x = 9"})
    assert res.is_error
    assert "old_string matches 2 times in 'twice.py'; it must match exactly once." in res.text
    assert "  line 1: x = 1\n  line 3: x = 1" in res.text
    assert "replace_all=true" in res.text
    assert (workdir / "twice.py").read_text() == "x = 1\ny = 2\nx = 1\n"


def test_edit_replace_all(run: Run, workdir: Path) -> None:
    (workdir / "twice.py").write_text("x = 1\ny = 2\nx = 1\n")
    res = run.call(
        "edit",
        {"path": "twice.py", "old_string": "x = 1", "new_string": "x = 9", "replace_all": True},
    )
    assert res.text == "replaced 2 occurrences in 'twice.py' (line 1, 3)."
    assert (workdir / "twice.py").read_text() == "x = 9\ny = 2\nx = 9\n"


def test_edit_hints_line_number_prefix(run: Run) -> None:
    res = run.call(
        "edit", {"path": "src/app.py", "old_string": "     3\tretries = 3", "new_string": "x"}
    )
    assert "line-number prefix" in res.text


def test_edit_hints_whitespace(run: Run) -> None:
    res = run.call(
        "edit",
        {"path": "src/app.py", "old_string": "def main():\n  return retries", "new_string": "x"},
    )
    assert "matches if whitespace is ignored" in res.text


def test_edit_same_strings(run: Run) -> None:
    res = run.call("edit", {"path": "src/app.py", "old_string": "os", "new_string": "os"})
    assert res.is_error and "the same" in res.text


def test_edit_keeps_crlf(run: Run, workdir: Path) -> None:
    (workdir / "win.txt").write_bytes(b"a\r\nb\r\n")
    res = run.call("edit", {"path": "win.txt", "old_string": "a\nb", "new_string": "a\nc"})
    assert not res.is_error, res.text
    assert (workdir / "win.txt").read_bytes() == b"a\r\nc\r\n"


def test_edit_not_utf8(run: Run, workdir: Path) -> None:
    (workdir / "latin.txt").write_bytes(b"caf\xe9\n")
    res = run.call("edit", {"path": "latin.txt", "old_string": "caf", "new_string": "x"})
    assert res.is_error and "not UTF-8 text" in res.text


# ---- apply_patch --------------------------------------------------------------------------

PATCH_THREE = """\
--- a/one.txt
+++ b/one.txt
@@ -1,3 +1,3 @@
 alpha
-beta
+BETA
 gamma
--- a/two.txt
+++ b/two.txt
@@ -1,2 +1,2 @@
-red
+RED
 green
--- a/three.txt
+++ b/three.txt
@@ -1,2 +1,2 @@
 one
-two
+TWO
"""


@pytest.fixture
def three(workdir: Path) -> dict[str, str]:
    files = {
        "one.txt": "alpha\nbeta\ngamma\n",
        "two.txt": "red\ngreen\n",
        "three.txt": "one\ntwo\n",
    }
    for name, text in files.items():
        (workdir / name).write_text(text)
    return files


def _contents(workdir: Path, names: dict[str, str]) -> dict[str, str]:
    return {n: (workdir / n).read_text() for n in names}


def test_patch_three_files(run: Run, workdir: Path, three: dict[str, str]) -> None:
    res = run.call("apply_patch", {"patch": PATCH_THREE})
    assert not res.is_error, res.text
    assert res.data["written"] == ["one.txt", "two.txt", "three.txt"]
    assert _contents(workdir, three) == {
        "one.txt": "alpha\nBETA\ngamma\n",
        "two.txt": "RED\ngreen\n",
        "three.txt": "one\nTWO\n",
    }


def test_patch_failing_hunk_in_third_file_changes_nothing(
    run: Run, workdir: Path, three: dict[str, str]
) -> None:
    (workdir / "three.txt").write_text("one\nzwei\n")
    before = _contents(workdir, three)
    res = run.call("apply_patch", {"patch": PATCH_THREE})
    assert res.is_error
    assert "hunk 1 (@@ -1,2 +1,2 @@) does not apply to 'three.txt'" in res.text
    assert "Nothing was changed" in res.text
    assert _contents(workdir, three) == before


def _fail_commit_at(
    monkeypatch: pytest.MonkeyPatch, phase: str, at: int, exc: BaseException
) -> None:
    """Make the next atomic commit fail before step `phase` of change number `at`."""
    real = atomic_files.commit

    def fault(ph: str, i: int, path: Path) -> None:
        if (ph, i) == (phase, at):
            raise exc

    monkeypatch.setattr(atomic_files, "commit", functools.partial(real, fault=fault))


def test_patch_io_failure_in_third_file_rolls_back(
    run: Run, workdir: Path, three: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _contents(workdir, three)
    _fail_commit_at(monkeypatch, "rename", 2, OSError(28, "No space left on device"))
    res = run.call("apply_patch", {"patch": PATCH_THREE})
    assert res.is_error and res.text == (
        "apply_patch could not write 'three.txt': No space left on device. "
        "Nothing was changed: every file is as it was."
    )
    assert _contents(workdir, three) == before
    leftovers = [p.name for p in workdir.iterdir() if ".tether-" in p.name]
    assert leftovers == []


def test_patch_create_and_delete(run: Run, workdir: Path) -> None:
    patch = (
        "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n"
        "--- a/README.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-# demo\n"
    )
    res = run.call("apply_patch", {"patch": patch})
    assert not res.is_error, res.text
    assert (workdir / "pkg/new.py").read_text() == "x = 1\ny = 2\n"
    assert not (workdir / "README.md").exists()
    assert res.data["created"] == ["pkg/new.py"] and res.data["deleted"] == ["README.md"]
    assert res.text == "applied the patch to 2 file(s): created pkg/new.py; deleted README.md."


def test_patch_delete_rolls_back(run: Run, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workdir / "a.txt").write_text("a\n")
    patch = (
        "--- a/README.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-# demo\n"
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"
    )
    _fail_commit_at(monkeypatch, "rename", 1, OSError(5, "Input/output error"))
    res = run.call("apply_patch", {"patch": patch})
    assert res.is_error
    assert (workdir / "README.md").read_text() == "# demo\n"
    assert (workdir / "a.txt").read_text() == "a\n"
    assert [p.name for p in workdir.iterdir() if ".tether-" in p.name] == []


def test_patch_create_existing(run: Run) -> None:
    res = run.call("apply_patch", {"patch": "--- /dev/null\n+++ b/README.md\n@@ -0,0 +1 @@\n+x\n"})
    assert res.is_error and "creates 'README.md', which already exists" in res.text


def test_patch_missing_file(run: Run) -> None:
    res = run.call(
        "apply_patch", {"patch": "--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n"}
    )
    assert res.is_error and "'nope.txt', which does not exist" in res.text


def test_patch_offset_hunk(run: Run, workdir: Path) -> None:
    patch = "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,1 +1,1 @@\n-retries = 3\n+retries = 7\n"
    res = run.call("apply_patch", {"patch": patch})
    assert not res.is_error, res.text
    assert "retries = 7" in (workdir / "src/app.py").read_text()


def test_patch_no_newline_marker(run: Run, workdir: Path) -> None:
    (workdir / "n.txt").write_text("a\nb")
    patch = "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
    res = run.call("apply_patch", {"patch": patch})
    assert not res.is_error, res.text
    assert (workdir / "n.txt").read_text() == "a\nc\n"


def test_patch_git_style_headers(run: Run, workdir: Path) -> None:
    patch = (
        "diff --git a/README.md b/README.md\nindex 1111111..2222222 100644\n"
        "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# demo\n+# Demo\n"
    )
    assert not run.call("apply_patch", {"patch": patch}).is_error
    assert (workdir / "README.md").read_text() == "# Demo\n"


def test_patch_garbage(run: Run) -> None:
    res = run.call("apply_patch", {"patch": "please change retries to 5"})
    assert res.is_error and "no file headers found" in res.text


def test_patch_rename_refused(run: Run) -> None:
    patch = "diff --git a/x b/y\nrename from x\nrename to y\n"
    res = run.call("apply_patch", {"patch": patch})
    assert res.is_error and "renames and copies are not supported" in res.text


def test_patch_escape_refused_before_any_write(run: Run, workdir: Path) -> None:
    patch = (
        "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# demo\n+# changed\n"
        "--- /dev/null\n+++ b/../outside.txt\n@@ -0,0 +1 @@\n+x\n"
    )
    res = run.call("apply_patch", {"patch": patch})
    assert res.is_error and "climbs out of the workspace" in res.text
    assert (workdir / "README.md").read_text() == "# demo\n"
    assert not (workdir.parent / "outside.txt").exists()


def test_patch_into_git_refused(run: Run, workdir: Path) -> None:
    patch = "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-[core]\n+[evil]\n"
    res = run.call("apply_patch", {"patch": patch})
    assert res.is_error and "protected path '.git/'" in res.text
    assert (workdir / ".git/config").read_text() == "[core]\n"


def test_parse_two_hunks_one_file() -> None:
    fp = parse_patch("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n@@ -5,2 +5,2 @@\n c\n-d\n+e\n")
    assert [len(p.hunks) for p in fp] == [2]
    assert fp[0].hunks[1].old_block() == ["c", "d"] and fp[0].hunks[1].new_block() == ["c", "e"]


# ---- unidiff, pure --------------------------------------------------------------------------


def _apply(text: str, patch: str) -> str:
    return apply_hunks("f", text, parse_patch(patch)[0])


def test_hunk_without_numbers() -> None:
    assert _apply("a\nb\nc\n", "--- a/f\n+++ b/f\n@@\n b\n-c\n+C\n") == "a\nb\nC\n"


def test_trailing_whitespace_tolerated() -> None:
    assert _apply("a  \nb\n", "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n") == "a  \nB\n"


def test_padding_empty_line_dropped() -> None:
    assert _apply("a\nb\n", "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n\n\n") == "a\nB\n"


def test_pure_insertion() -> None:
    assert _apply("a\nb\n", "--- a/f\n+++ b/f\n@@ -1,0 +2 @@\n+x\n") == "a\nx\nb\n"


def test_crlf_file_keeps_crlf() -> None:
    assert _apply("a\r\nb\r\n", "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n") == "a\r\nB\r\n"


def test_hunks_apply_in_order_with_offsets() -> None:
    text = "".join(f"{i}\n" for i in range(1, 11))
    patch = "--- a/f\n+++ b/f\n@@ -2 +2,2 @@\n-2\n+2a\n+2b\n@@ -9 +10 @@\n-9\n+9x\n"
    assert _apply(text, patch) == "1\n2a\n2b\n3\n4\n5\n6\n7\n8\n9x\n10\n"


def test_malformed_hunk_header() -> None:
    with pytest.raises(PatchError, match=r"malformed hunk header '@@ -x \+y @@'"):
        parse_patch("--- a/f\n+++ b/f\n@@ -x +y @@\n-a\n")


def test_read_one_huge_line_is_cut(run: Run, workdir: Path) -> None:
    (workdir / "min.js").write_bytes(b"x" * (3 * 1024 * 1024) + b"\nsecond\n")
    res = run.call("read", {"path": "min.js"})
    first, second = res.text.split("\n")[:2]
    assert first.endswith("[... line cut]") and len(first) < 2100
    assert second == "     2\tsecond"


def test_edit_refuses_huge_files(run: Run, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness_edit, "MAX_EDIT_BYTES", 10)
    res = run.call("edit", {"path": "src/app.py", "old_string": "os", "new_string": "sys"})
    assert res.is_error and "Use write to replace it whole" in res.text


def test_read_of_a_very_large_file_asks_for_a_range(run: Run, workdir: Path) -> None:
    line = "0123456789" * 9 + "\n"
    (workdir / "dump.csv").write_text(line * (harness_read.MAX_WHOLE_READ_BYTES // len(line) + 10))
    size = (workdir / "dump.csv").stat().st_size
    res = run.call("read", {"path": "dump.csv"})
    assert res.is_error and f"'dump.csv' is {size / 2**20:.1f} MiB, over the 8 MiB" in res.text
    assert 'read {"path": "dump.csv", "start_line": 1, "end_line": 200}' in res.text, res.text
    assert res.data == {
        "path": "dump.csv",
        "size": size,
        "limit": harness_read.MAX_WHOLE_READ_BYTES,
    }
    ranged = run.call("read", {"path": "dump.csv", "start_line": 90000, "end_line": 90001})
    assert not ranged.is_error and ranged.text.startswith(" 90000\t0123456789"), ranged.text
    assert not run.call("read", {"path": "dump.csv", "start_line": 1}).is_error


@pytest.mark.parametrize(
    "hunk",
    [
        "@@ -1,2 +1,2 @@\n",  # a header with its body lost
        "@@ -1 +1 @@\n # demo\n",  # context only
        "@@\n",
        "@@ -1,1 +1,1 @@ def main():\n",
    ],
)
def test_patch_hunk_that_changes_nothing_is_an_error(run: Run, workdir: Path, hunk: str) -> None:
    res = run.call("apply_patch", {"patch": "--- a/README.md\n+++ b/README.md\n" + hunk})
    assert res.is_error and "has no '-' or '+' line, so it changes nothing" in res.text, res.text
    assert "Nothing was changed" in res.text
    assert (workdir / "README.md").read_text() == "# demo\n"


def test_patch_that_leaves_every_file_as_it_was_is_an_error(run: Run, workdir: Path) -> None:
    patch = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# demo\n+# demo\n"
    res = run.call("apply_patch", {"patch": patch})
    assert res.is_error and res.text.startswith("the patch changes nothing"), res.text
    assert "README.md" in res.text and res.data is None


def test_patch_hunk_without_changes_among_good_ones_applies_nothing(
    run: Run, workdir: Path
) -> None:
    patch = (
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -3 +3 @@\n-retries = 3\n+retries = 5\n"
        "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n"
    )
    res = run.call("apply_patch", {"patch": patch})
    assert res.is_error and "hunk 1 for 'README.md'" in res.text, res.text
    assert "retries = 3" in (workdir / "src/app.py").read_text()
