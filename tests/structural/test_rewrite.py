"""Rewrite templates: substitution, indentation (spaces and tabs), outermost matches."""

from __future__ import annotations

import pytest

from tether.structural.languages import get_parser
from tether.structural.pattern import compile_pattern
from tether.structural.query import CandidateQuery
from tether.structural.rewrite import RewriteError, apply, check_template
from tether.structural.search import find_in_tree


def rewrite(lang: str, pattern: str, template: str, code: str) -> tuple[str, int]:
    p = compile_pattern(pattern, lang)
    src = code.encode()
    tree = get_parser(lang).parse(src)
    new, n = apply(template, src, find_in_tree(p, CandidateQuery(p), tree.root_node, src))
    return new.decode(), n


CASES = [
    ("dart", "dispose($X)", "$X.dispose()", "void f() {\n  dispose(a);\n  dispose(b.c);\n}\n", "void f() {\n  a.dispose();\n  b.c.dispose();\n}\n", 2),
    ("python", "foo($A, $B)", "foo($B, $A)", "x = foo(1, 2)\n", "x = foo(2, 1)\n", 1),
    ("python", "foo($X)", "bar($X)", "foo(foo(1))\n", "bar(foo(1))\n", 1),  # outermost only
    ("python", "print($$$A)", "log($$$A)", "print(1, 2)\nprint()\n", "log(1, 2)\nlog()\n", 2),
    # a multi-line capture re-indented to where the metavariable sits (spaces)
    ("python", "wrap($X)", "if ok:\n    $X", "def f():\n    wrap(g(1,\n          2))\n", "def f():\n    if ok:\n        g(1,\n              2)\n", 1),
    # tabs are carried as they are
    ("go", "log($X)", "if debug {\n\tlog($X)\n}", "package p\nfunc f() {\n\tlog(a)\n}\n", "package p\nfunc f() {\n\tif debug {\n\t\tlog(a)\n\t}\n}\n", 1),
    ("javascript", "$A && $A()", "$A?.()", "cb && cb();\ncb && other();\n", "cb?.();\ncb && other();\n", 1),
]  # fmt: skip


@pytest.mark.parametrize(("lang", "pattern", "template", "code", "expected", "count"), CASES)
def test_rewrite(lang, pattern, template, code, expected, count):
    assert rewrite(lang, pattern, template, code) == (expected, count)


def test_template_with_unbound_metavariable_is_an_error():
    with pytest.raises(
        RewriteError, match=r"uses \$Y, which the pattern does not bind \(it binds: \$X\)"
    ):
        check_template("bar($Y)", frozenset({"X"}))
