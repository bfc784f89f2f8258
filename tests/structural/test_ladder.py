"""The ladder picks the reading the user meant; every grammar has a metavariable.

Issue #25, groups 1 and 2: a metavariable where the grammar's top level takes no bare name
(CSS, HCL, JSON, Lua, Solidity, HTML), read inside ERROR nodes too; MISSING and ERROR
nodes weighed so the statement wins over a degenerate declaration; a fragment that is no
valid code read through its ERROR node; PHP code without `<?php`; a match span never takes
a terminator the pattern lacked.
"""

from __future__ import annotations

import pytest

from tether.structural.pattern import compile_pattern
from tether.structural.search import search_source

FOUND = [
    # group 1: a metavariable in grammars whose top level rejects a bare identifier
    ("css", ".a { color: $COLOR; }", ".a { color: red; }\n.b { margin: 0; }\n", {"COLOR": "red"}),
    ("css", "$SEL { color: red; }", "p { color: red; }\n", {"SEL": "p"}),
    ("hcl", "$VAR = $VALUE", 'region = "eu"\n', {"VAR": "region", "VALUE": '"eu"'}),
    ("json", '{ "name": $N }', '{ "name": "tether" }\n', {"N": '"tether"'}),
    ("lua", "print($S)", "print('hi')\nio.write(1)\n", {"S": "'hi'"}),
    ("solidity", 'import { $A } from "x.sol";', 'import { B } from "x.sol";\n', {"A": "B"}),
    ("html", "<$TAG class='x'>$$$</$TAG>", "<p class='x'>hi</p>\n", {"TAG": "p"}),
    # a metavariable inside an ERROR node (HCL reads a block pattern as one)
    ("hcl", "resource $TYPE $NAME $BODY", 'resource "a" "b" {\n  x = 1\n}\n', {"TYPE": '"a"'}),
    # group 2: the statement, not a struct field of type `if`
    ("cpp", "if (a) { $$$BODY }", "void f() { if (a) { x(); y(); } }\n", {"BODY": "x(); y();"}),
    ("cpp", "if ($A)", "void f() { if (a | b) g(); }\n", {"A": "a | b"}),
    # a loop, not a field of type `for`: through its ERROR node, as the CLI reads it
    ("cpp", "for ($$$H) { $$$B }", "struct S { int for_x; };\nvoid f() { for (;;) { g(); } }\n", {"B": "g();"}),
    ("java", "for ($$$H) { $$$B }", "class A { void m() { for (;;) { g(); } } }\n", {"B": "g();"}),
    ("javascript", "for ($$$H) { $$$B }", "for (;;) { g(); }\n", {"B": "g();"}),
    # a `$$$` run that closes a block is statements, where the grammar wants a `;` (C#)
    # or reads a set literal (Dart); C's for header read as a run
    ("csharp", "while ($C) { $$$B }", "class A { void M() { while (x) { Y(); Z(); } } }\n", {"B": "Y(); Z();"}),
    ("dart", "while ($C) { $$$B }", "void f() { while (x) { g(); } }\n", {"C": "x"}),
    ("c", "for ($$$H) { $$$B }", "void f(int n) { for (int i = 0; i < n; i++) { g(i); } }\n", {"B": "g(i);"}),
    # C's `$S` stands for a whole statement, a block too
    ("c", "if ($C) $S", "void f(int n) { if (n) { a(); } }\n", {"S": "{ a(); }"}),
    # Solidity statements read inside a contract's function; JSON values in an array
    ("solidity", "require($C, $M);", 'contract K { function f() public { require(x > 0, "neg"); } }\n', {"M": '"neg"'}),
    ("solidity", "Test", 'import { Test } from "t.sol";\n', {}),
    ("json", "[$X, $Y]", "[1, 2]\n[1, 2, 3]\n", {"X": "1", "Y": "2"}),
    # a reserved word may name a JavaScript property
    ("javascript", "delete: $X", "const o = { delete: 1 };\n", {"X": "1"}),
    # not valid code, matched through its ERROR node as ast-grep does
    ("kotlin", "println('123')", "fun f() { println('123') }\n", {}),
    # PHP code without `<?php` (ast-grep's PHP-only grammar)
    ("php", "$A->close()", "$db->close();\n", {"A": "$db"}),
]  # fmt: skip


@pytest.mark.parametrize(("lang", "pattern", "code", "captures"), FOUND)
def test_found(lang, pattern, code, captures):
    got = search_source(pattern, code, lang)
    assert len(got) == 1, got
    for name, text in captures.items():
        assert got[0]["captures"][name] == text


@pytest.mark.parametrize(
    ("lang", "pattern", "code"),
    [
        ("go", "print('123')", "package p\nfunc f() { print('456') }\n"),
        ("kotlin", "println('123')", "fun f() { println('456') }\n"),
        ("lua", "print($S)", "io.write(1)\n"),
    ],
)
def test_not_found(lang, pattern, code):
    assert search_source(pattern, code, lang) == []


def test_an_appended_terminator_is_not_in_the_span():
    # read with the `;` the ladder appends; the match (a local and a field) ends before it
    got = search_source("int $A = 0", "class C { int f = 0; void m() { int a = 0; } }", "csharp")
    assert [m["text"] for m in got] == ["int f = 0", "int a = 0"]
    # a terminator deeper down: the match ends before the code's own `;`
    (m,) = search_source("return $X", "class C { int m() { return 1; } }", "java")
    assert m["text"] == "return 1"


def test_a_typo_is_still_refused():
    from tether.structural.pattern import PatternError

    for lang, pattern in (("go", "print('123'"), ("python", "foo(a))"), ("python", "f(.*)")):
        with pytest.raises(PatternError, match="not valid"):
            compile_pattern(pattern, lang)


@pytest.mark.parametrize(
    ("lang", "pattern", "word"),
    [("cpp", "else { $$$B }", "else"), ("java", "else { $$$B }", "else"), ("cpp", "catch ($E) { $$$B }", "catch")],
)  # fmt: skip
def test_a_fragment_no_code_can_match_is_refused_saying_what_to_write(lang, pattern, word):
    # every context reads it only as a member named `else` or in pieces: a silent zero
    from tether.structural.pattern import PatternError

    with pytest.raises(PatternError) as err:
        compile_pattern(pattern, lang)
    text = str(err.value)
    assert "no reading as" in text and f"first word `{word}` as a name" in text, text
    assert "if ($C) { $$$A } else { $$$B }" in text  # what to write instead


def test_a_run_for_a_loop_header_captures_the_header_of_every_for_kind():
    # not a field of type `for`; not the CLI's ERROR reading either, which binds `$$$H`
    # to `int` and `$$$B` to the rest of the header: the loop, its header, its body
    p = compile_pattern("for ($$$H) { $$$B }", "cpp")
    assert "member" not in p.context and p.roots[0].kind == "ERROR", (p.context, p.roots)
    code = "void f(std::vector<int> v) {\n for (int i = 0; i < 3; i++) { g(i); }\n for (auto x : v) { h(x); }\n}\n"
    got = [m["captures"] for m in search_source("for ($$$H) { $$$B }", code, "cpp")]
    assert got == [{"H": "int i = 0; i < 3; i++", "B": "g(i);"}, {"H": "auto x : v", "B": "h(x);"}]
    cs = "class A { void M(int[] v) { foreach (var x in v) { H(x); } } }\n"
    (m,) = search_source("foreach ($$$H) { $$$B }", cs, "csharp")  # filled `in __tether_x`
    assert m["captures"] == {"H": "var x in v", "B": "H(x);"}
    java = "class A { void m(int[] v) { for (int x : v) { h(x); } } }\n"
    (m,) = search_source("for ($$$H) { $$$B }", java, "java")
    assert m["captures"] == {"H": "int x : v", "B": "h(x);"}
