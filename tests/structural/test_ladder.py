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
