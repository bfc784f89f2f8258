"""ast_grep / ast_edit / resolve handlers on a real Run without a runtime (in-process pool).

The same handlers run against the real parser pool in test_actor.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.run import Run
from tether.tools.structural import specs

HANDLERS = {s.name: s.handler for s in specs()}


def call(run: Run, name: str, **args):
    return HANDLERS[name](run.context(), args)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.dart").write_text(
        "void main() {\n  dispose(a);\n  // dispose(b)\n  var s = 'dispose(c)';\n}\n"
    )
    (tmp_path / "lib" / "b.dart").write_text("void f() {\n  dispose(x.y);\n  dispose(z);\n}\n")
    (tmp_path / "app.py").write_text("def f(x):\n    return foo(x) + foo(1)\n")
    return tmp_path


def test_ast_grep_lists_matches_in_file_order(project):
    res = call(Run(workdir=project), "ast_grep", pattern="dispose($X)", language="dart")
    assert not res.is_error, res.text
    assert res.text.splitlines() == [
        "3 matches in 2 files:",
        "lib/a.dart:2: dispose(a)",
        "    $X = a",
        "lib/b.dart:2: dispose(x.y)",
        "    $X = x.y",
        "lib/b.dart:3: dispose(z)",
        "    $X = z",
    ]
    assert res.data["total"] == 3
    assert res.data["matches"][0] == {
        "path": "lib/a.dart", "start_line": 2, "start_col": 3, "end_line": 2, "end_col": 13,
        "text": "dispose(a)", "captures": {"X": "a"},
    }  # fmt: skip


def test_max_results_caps_shown_but_total_is_stated(project):
    res = call(
        Run(workdir=project), "ast_grep", pattern="dispose($X)", language="dart", max_results=1
    )
    assert res.text.startswith("3 matches in 2 files (showing the first 1;")
    assert len(res.data["matches"]) == 1 and res.data["total"] == 3


def test_language_inferred_from_file(project):
    res = call(Run(workdir=project), "ast_grep", pattern="foo($A)", path="app.py")
    assert res.data["total"] == 2


def test_errors_are_specific(project):
    run = Run(workdir=project)
    res = call(run, "ast_grep", pattern="foo($A)", language="pyhton")
    assert res.is_error and "unknown language 'pyhton'. Did you mean 'python'" in res.text
    res = call(run, "ast_grep", pattern="foo($A)")
    assert (
        res.is_error and "`language` is required when `path` is a directory or omitted" in res.text
    )
    res = call(run, "ast_grep", pattern="foo(", language="python")
    assert res.is_error and "not valid python in any context tried" in res.text
    res = call(run, "ast_grep", pattern="foo($A)", path="nope", language="python")
    assert res.is_error and "path 'nope' does not exist in the workspace" in res.text
    res = call(run, "ast_edit", pattern="foo($A)", rewrite="bar($B)", language="python")
    assert res.is_error and "the rewrite uses $B, which the pattern does not bind" in res.text


def test_no_match_says_so(project):
    res = call(Run(workdir=project), "ast_grep", pattern="nothing_here($A)", language="python")
    assert not res.is_error and res.text.startswith("No matches for `nothing_here($A)` (python)")
    assert res.data == {"matches": [], "total": 0, "binary": 0, "contexts": ["statement"]}


def test_a_member_pattern_says_which_containers_it_was_read_in(tmp_path):
    (tmp_path / "m.ts").write_text(
        "class A {\n  readonly a: number;\n}\ninterface B {\n  readonly b: string;\n}\n"
    )
    res = call(Run(workdir=tmp_path), "ast_grep", pattern="readonly $F: $T;", language="ts")
    assert not res.is_error, res.text
    assert res.data["total"] == 2
    assert res.data["contexts"] == ["class member", "interface member", "object type member"]
    assert res.text.splitlines()[0] == (
        "2 matches in 1 file, the pattern read as a class member, an interface member or an "
        "object type member:"
    )


def test_edit_stages_then_accept_writes(project):
    run = Run(workdir=project)
    before = (project / "lib" / "a.dart").read_text()
    res = call(run, "ast_edit", pattern="dispose($X)", rewrite="$X.dispose()", language="dart")
    assert res.text.startswith(
        '(proposed) 3 replacements in 2 files … call resolve with edit_id "edit_1"'
    )
    assert "-  dispose(a);" in res.text and "+  a.dispose();" in res.text
    assert (project / "lib" / "a.dart").read_text() == before  # nothing written yet
    done = call(run, "resolve", edit_id="edit_1", action="accept")
    assert not done.is_error, done.text
    assert done.data["written"] == ["lib/a.dart", "lib/b.dart"]
    assert (
        project / "lib" / "b.dart"
    ).read_text() == "void f() {\n  x.y.dispose();\n  z.dispose();\n}\n"
    again = call(run, "resolve", edit_id="edit_1", action="accept")
    assert again.is_error and "edit_1 was already accepted" in again.text


def test_edit_flags_syntax_errors_per_file(project):
    res = call(Run(workdir=project), "ast_edit", pattern="foo($A)", rewrite="foo($A", path="app.py")
    assert (
        "⚠ syntax: app.py: the rewritten file does not parse as python (first error at line 2)"
        in res.text
    )
    assert res.data["files"][0]["syntax_error"]


def test_file_edited_between_staging_and_accept_rejects_everything(project):
    run = Run(workdir=project)
    call(run, "ast_edit", pattern="dispose($X)", rewrite="$X.dispose()", language="dart")
    (project / "lib" / "b.dart").write_text("void f() {}\n")
    a_before = (project / "lib" / "a.dart").read_text()
    res = call(run, "resolve", edit_id="edit_1", action="accept")
    assert (
        res.is_error
        and "edit_1 rejected: 1 file(s) changed since it was staged: lib/b.dart" in res.text
    )
    assert (project / "lib" / "a.dart").read_text() == a_before


def test_discard_and_ids_per_run(project):
    run_a, run_b = Run(workdir=project), Run(workdir=project)
    call(run_a, "ast_edit", pattern="dispose($X)", rewrite="$X.dispose()", language="dart")
    other = call(run_b, "resolve", edit_id="edit_1", action="accept")
    assert other.is_error and "unknown edit_id 'edit_1' for this run" in other.text
    res = call(run_a, "resolve", edit_id="edit_1", action="discard")
    assert res.text == "edit_1 discarded; no file was changed."
    assert "dispose(a)" in (project / "lib" / "a.dart").read_text()
    second = call(run_a, "ast_edit", pattern="dispose($X)", rewrite="$X.dispose()", language="dart")
    assert 'edit_id "edit_2"' in second.text


def test_specs_tiers_and_needs():
    by_name = {s.name: s for s in specs()}
    assert by_name["ast_grep"].tier.value == "read"
    assert by_name["ast_edit"].tier.value == "write" and by_name["resolve"].tier.value == "write"
    assert "path" in by_name["ast_grep"].path_args


# --- bad input (issue #17, problem 4) ----------------------------------------------------


def test_a_deeply_nested_pattern_is_a_sentence_not_a_recursion_error(project):
    deep = "foo(" * 400 + "$X" + ")" * 400
    res = call(Run(workdir=project), "ast_grep", pattern=deep, language="python")
    assert res.is_error
    assert "nests too deep" in res.text and "metavariable where the inner ones" in res.text
    assert "recursion" not in res.text.lower()
    assert len(res.text) < 700  # the 2,400-character pattern is elided, not echoed


def test_a_long_unparseable_pattern_is_elided_in_the_error(project):
    long = "foo(" + "a, " * 3000 + "))"
    res = call(Run(workdir=project), "ast_grep", pattern=long, language="python")
    assert res.is_error and "is not valid python" in res.text
    assert "characters] …" in res.text and len(res.text) < 1000


def test_a_long_pattern_with_no_match_is_elided_in_the_answer(project):
    long = "foo(" + ", ".join(f"a{i}" for i in range(2000)) + ")"
    res = call(Run(workdir=project), "ast_grep", pattern=long, language="python")
    assert not res.is_error and res.text.startswith("No matches for `foo(a0, a1")
    assert len(res.text) < 600


def test_binary_files_named_like_source_are_skipped_and_counted(project):
    (project / "blob.py").write_bytes(b"def f(x):\n    return foo(x)\n\0\xff\xfe")
    res = call(Run(workdir=project), "ast_grep", pattern="foo($A)", language="python")
    assert not res.is_error, res.text
    assert {m["path"] for m in res.data["matches"]} == {"app.py"}
    assert res.data["binary"] == 1
    assert res.text.endswith("1 binary file named like python source was skipped.")
