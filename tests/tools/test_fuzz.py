"""Fuzz: random argument dicts to every registered tool. Each call ends in a ToolResult —
never an exception, never a hang."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.questions import Answer
from tether.run import Run
from tether.tools.registry import Registry
from tether.tools.results import ToolResult

from .conftest import ScriptedPort

CALL_DEADLINE = 10.0  # seconds; a call that takes longer counts as a hang

# integers past what any schema allows: 2**63 once reached a handler and overflowed there
extreme_ints = st.sampled_from([2**31, 2**53, 2**63, -(2**63), 2**64, 10**30, -(10**30)])
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    extreme_ints,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
json_value = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
paths = st.sampled_from(
    [
        "README.md",
        "src/app.py",
        "src",
        ".",
        "*",
        "new/dir/file.txt",
        "../outside.txt",
        "/etc/passwd",
        ".git/config",
        "",
        " ",
        "a\x00b",
        "src/../README.md",
        "~/x",
        "link_out/x",
        "pipe",
        "README.md/child",
    ]
) | st.text(max_size=20)
patches = st.sampled_from(
    [
        "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# demo\n+# Demo\n",
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+x\n",
        "--- a/src/app.py\n+++ /dev/null\n",
        "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n",
        "@@ -1 +1 @@\n-a\n+b\n",
        "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-root\n+evil\n",
    ]
) | st.text(max_size=80)


BY_NAME: dict[str, st.SearchStrategy[Any]] = {
    "pattern": st.sampled_from(
        ["print($X)", "$A = $B", "import $M", "def $F($$$A): $$$B", "retries", "$$$", "(", ".*"]
    ),
    "rewrite": st.sampled_from(["print($X, flush=True)", "$B = $A", "", "$NOPE"]),
    "language": st.sampled_from(
        ["python", "typescript", "rust", "dart", "klingon", "PYTHON", "cobol"]
    ),
    "edit_id": st.sampled_from(["edit_1", "edit_2", "edit_0"]),
    "symbol": st.sampled_from(["retries", "main", "os", "nothing_here", "retries#2"]),
    "new_name": st.sampled_from(["attempts", "1bad", "", "main"]),
    "query": st.sampled_from(["retries", "main", ""]),
}


def _typed(prop: dict[str, Any], name: str) -> st.SearchStrategy[Any]:
    if name in ("path", "file"):
        return paths
    if name == "patch":
        return patches
    if name in BY_NAME and "enum" not in prop:
        return BY_NAME[name] | st.text(max_size=20)
    if "enum" in prop:
        return st.sampled_from(list(prop["enum"]))
    t = prop.get("type")
    if t == "string":
        return st.sampled_from(["retries = 3", "import os", "\n", "x"]) | st.text(max_size=30)
    if t == "integer":
        return st.integers(min_value=-5, max_value=10**9) | extreme_ints
    if t == "boolean":
        return st.booleans()
    if t == "array":
        items = prop.get("items", {})
        if items.get("type") == "object":
            return st.lists(
                st.fixed_dictionaries(
                    {"label": st.text(min_size=1, max_size=10)},
                    optional={"description": st.text(max_size=10)},
                ),
                max_size=4,
            )
        return st.lists(json_value, max_size=4)
    return json_value


def arguments(spec: Any) -> st.SearchStrategy[Any]:
    props = dict(spec.schema.get("properties", {}))
    required = set(spec.schema.get("required", ()))
    typed = st.fixed_dictionaries(
        {k: _typed(p, k) for k, p in props.items() if k in required},
        optional={k: _typed(p, k) for k, p in props.items() if k not in required},
    )
    noisy = st.fixed_dictionaries(
        {}, optional={k: _typed(p, k) | json_value for k, p in props.items()}
    )
    anything = st.dictionaries(st.text(max_size=10), json_value, max_size=5) | json_value
    # mostly well-typed calls (they reach the handlers), some noisy, some garbage
    return st.integers(0, 9).flatmap(lambda i: typed if i < 6 else noisy if i < 8 else anything)


def _answer(card: Any) -> Answer:
    n = card.number % 4
    if n == 0:
        return Answer.skipped()
    if n == 1:
        return Answer.timed_out()
    labels = [o.label for o in card.options]
    return Answer.answered(labels[:n], text="fuzz")


@pytest.fixture(scope="module")
def fuzz_workdir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="tether-fuzz-"))
    ws = root / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("import os\n\nretries = 3\nretries = 3\n")
    (ws / "README.md").write_text("# demo\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (root / "outside").mkdir()
    (ws / "link_out").symlink_to(root / "outside")
    import os

    os.mkfifo(ws / "pipe")
    yield ws
    assert list((root / "outside").iterdir()) == [], "a tool wrote outside the workspace"
    assert not (root / "outside.txt").exists(), "a tool wrote outside the workspace"
    assert (ws / ".git" / "config").read_text() == "[core]\n", "a tool changed .git/"
    shutil.rmtree(root)


def _call_bounded(run: Run, name: str, args: Any, deadline: float = CALL_DEADLINE) -> ToolResult:
    box: list[Any] = []

    def target() -> None:
        try:
            box.append(run.call(name, args))
        except BaseException as e:  # noqa: BLE001
            box.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(deadline)
    assert box, f"{name}({args!r}) did not return within {deadline} s"
    result = box[0]
    assert not isinstance(result, BaseException), f"{name}({args!r}) raised {result!r}"
    assert isinstance(result, ToolResult), f"{name}({args!r}) returned {result!r}"
    assert isinstance(result.text, str) and result.text, f"{name}({args!r}) gave no text"
    assert "bug in the tool" not in result.text, f"{name}({args!r}): {result.text}"
    return result


TOOLS = Registry.default().specs()
FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


@pytest.mark.parametrize("spec", TOOLS, ids=lambda s: s.name)
@pytest.mark.parametrize("surface", ["default", "plan"])
def test_fuzz_every_tool(fuzz_workdir: Path, spec: Any, surface: str) -> None:
    port = ScriptedPort(answer=_answer)
    run = Run(
        run_id="fuzz",
        workdir=fuzz_workdir,
        surface=surface,
        question_port=port,
        question_timeout=2.0,
        approval_timeout=2.0,
    )

    @FUZZ
    @given(args=arguments(spec))
    def check(args: Any) -> None:
        result = _call_bounded(run, spec.name, args)
        if surface == "plan" and spec.tier.value != "read":
            assert result.is_error and result.data == {"refused": "tier"}

    check()


@FUZZ
@given(name=st.text(max_size=12) | st.sampled_from([s.name for s in TOOLS]), args=json_value)
def test_fuzz_names_and_anything(fuzz_workdir: Path, name: str, args: Any) -> None:
    _call_bounded(Run(workdir=fuzz_workdir), name, args)


# ---- apply_patch: all or nothing, as a property -------------------------------------------

file_lines = st.lists(
    st.sampled_from(["a", "b", "c", "", "def f():", "    return 1", "x = 2"]), max_size=12
)


@settings(max_examples=150, deadline=None, database=None)
@given(
    before=st.lists(file_lines, min_size=3, max_size=3),
    after=st.lists(file_lines, min_size=3, max_size=3),
    corrupt=st.sampled_from([None, 0, 1, 2]),
)
def test_apply_patch_all_or_nothing(
    before: list[list[str]], after: list[list[str]], corrupt: int | None
) -> None:
    import difflib

    root = Path(tempfile.mkdtemp(prefix="tether-patch-"))
    try:
        names = ["one.txt", "sub/two.txt", "three.txt"]
        texts = ["".join(f"{ln}\n" for ln in lines) for lines in before]
        wanted = ["".join(f"{ln}\n" for ln in lines) for lines in after]
        for name, text in zip(names, texts, strict=True):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        parts = []
        for i, name in enumerate(names):
            diff = list(
                difflib.unified_diff(
                    texts[i].splitlines(True), wanted[i].splitlines(True), f"a/{name}", f"b/{name}"
                )
            )
            if diff and corrupt == i:
                # change one removed/context line so the hunk no longer matches the file
                for j in range(2, len(diff)):
                    if diff[j][:1] in (" ", "-"):
                        diff[j] = diff[j][0] + "NOT IN THE FILE\n"
                        break
            parts.append("".join(diff))
        patch = "".join(parts)
        result = _call_bounded(Run(workdir=root), "apply_patch", {"patch": patch or "x"})
        now = [(root / n).read_text() for n in names]
        if result.is_error:
            assert now == texts, result.text
        else:
            assert now == wanted, result.text
        broken = (
            corrupt is not None
            and parts[corrupt]
            and any(ln[:1] in (" ", "-") for ln in parts[corrupt].splitlines()[2:])
        )
        if patch and not broken:
            assert not result.is_error, result.text
        assert [p.name for p in root.rglob("*") if ".tether-" in p.name] == []
    finally:
        shutil.rmtree(root)


# ---- regressions found by the fuzz ---------------------------------------------------------

HANG_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tether.run import Run
from tests.tools.conftest import KindsRuntime
run = Run(runtime=KindsRuntime({"parser"}), workdir=sys.argv[2])
res = run.call("ast_grep", {"pattern": "x", "language": "cobol"})
print(json.dumps({"is_error": res.is_error, "text": res.text}))
"""


@pytest.mark.slow
def test_structural_cobol_hang(tmp_path: Path) -> None:
    """Found by test_fuzz_runtime: ast_grep with language "cobol" froze the host process.
    Run in a subprocess: a GIL-holding hang would freeze this test process too."""
    import subprocess
    import sys

    if Registry.default().get("ast_grep") is None:
        pytest.skip("no structural family in this tree")
    root = str(Path(__file__).resolve().parents[2])
    try:
        out = subprocess.run(
            [sys.executable, "-c", HANG_SCRIPT, root, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("ast_grep with language 'cobol' did not return within 10 s")
    assert out.returncode == 0, out.stderr
