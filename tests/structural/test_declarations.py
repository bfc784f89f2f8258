"""Declarations, class members, fields and arms compile to the right shape (issue #17,
problems 1 and 2): one table per family, each case a pattern, the code, and the captures
of every match in file order. A case that compiles to the wrong rung finds nothing or the
wrong code, so every case expects at least one match and names one near miss that must
not match."""

from __future__ import annotations

import pytest

from tether.structural.pattern import compile_pattern
from tether.structural.search import search_source

# (language, pattern, code, [captures of each match, in order], rung)
CASES: list[tuple[str, str, str, list[dict[str, str]], str]] = [
    # TypeScript members: methods, accessors, fields (a statement rung read them as a call
    # then a block, or as a labeled statement)
    ("typescript", "private $F($$$P): $R { $$$B }",
     "class A {\n  private foo(a: number): string { return 'x'; }\n  bar(): void {}\n}\n",
     [{"F": "foo", "P": "a: number", "R": "string", "B": "return 'x';"}], "class member"),
    ("typescript", "get $NAME() { $$$B }",
     "class A {\n  get size() { return 1; }\n  size2() { return 2; }\n}\n",
     [{"NAME": "size", "B": "return 1;"}], "class member"),
    ("typescript", "async $M($$$P) { $$$B }",
     "class A {\n  async load(x) { await x; }\n  sync(y) { }\n}\n",
     [{"M": "load", "P": "x", "B": "await x;"}], "class member"),
    ("typescript", "private $F: $T = $V;",
     "class A {\n  private count: number = 0;\n  other = 1;\n}\n",
     [{"F": "count", "T": "number", "V": "0"}], "class member"),
    ("typescript", "static $F = $V;",
     "class A {\n  static n = 1;\n  m = 2;\n}\n",
     [{"F": "n", "V": "1"}], "class member"),
    # Java
    ("java", "public void $M($$$P) { $$$B }",
     "class A {\n  public void run(int x) { go(); }\n  private int n() { return 1; }\n}\n",
     [{"M": "run", "P": "int x", "B": "go();"}], "class member"),
    ("java", "private final $T $F = $V;",
     "class A {\n  private final int n = 1;\n  private int m = 2;\n}\n",
     [{"T": "int", "F": "n", "V": "1"}], "class member"),
    # Kotlin
    ("kotlin", "fun $F($$$P) { $$$B }",
     "fun main(args: Array<String>) { println(1) }\nval x = 1\n",
     [{"F": "main", "P": "args: Array<String>", "B": "println(1)"}], "statement"),
    ("kotlin", "override fun $F($$$P): $R = $E",
     "class A : B {\n  override fun size(): Int = 3\n  fun other(): Int = 4\n}\n",
     [{"F": "size", "P": "", "R": "Int", "E": "3"}], "class member"),
    # Rust: pub fn, match arms
    ("rust", "pub fn $F($$$P) -> $R { $$$B }",
     "pub fn add(a: i32) -> i32 { a }\nfn private(b: u8) -> u8 { b }\n",
     [{"F": "add", "P": "a: i32", "R": "i32", "B": "a"}], "statement"),
    ("rust", "Some($X) => $Y",
     "fn f(o: Option<i32>) -> i32 { match o { Some(v) => v + 1, None => 0 } }\n",
     [{"X": "v", "Y": "v + 1"}], "match arm"),
    ("rust", "Err($E) => return Err($E.into()),",
     "fn f() { match r { Ok(v) => v, Err(e) => return Err(e.into()), } }\n",
     [{"E": "e"}], "match arm"),
    # C#: properties
    ("csharp", "public int $P { get; set; }",
     "class A {\n  public int Count { get; set; }\n  public int Size { get; }\n}\n",
     [{"P": "Count"}], "class member"),
    ("csharp", "public $T $P => $E;",
     "class A {\n  public int Twice => n * 2;\n  public int N() => n;\n}\n",
     [{"T": "int", "P": "Twice", "E": "n * 2"}], "class member"),
    # Go: functions and methods with receivers (a function literal is the wrong shape)
    ("go", "func $F($$$P) { $$$B }",
     "package p\nfunc main() { run() }\nvar f = func() { }\n",
     [{"F": "main", "P": "", "B": "run()"}], "declaration"),
    ("go", "func ($R $T) $M($$$P) $RET { $$$B }",
     "package p\nfunc (s *S) Len() int { return 0 }\nfunc Free() int { return 1 }\n",
     [{"R": "s", "T": "*S", "M": "Len", "P": "", "RET": "int", "B": "return 0"}],
     "declaration"),
    # Ruby and PHP: `$` starts their own variables, so `$$$P` was no whole node (Ruby read
    # it as a call of `$$`) and the method was refused; the metavariable character is `µ`
    ("ruby", "def $M($$$P)\n  $$$B\nend",
     "class A\n  def run(x)\n    go(x)\n  end\n  attr_reader :y\nend\n",
     [{"M": "run", "P": "x", "B": "go(x)"}], "statement"),
    ("php", "public function $M($$$P) { $$$B }",
     "<?php\nclass A {\n  public function run($x) { go($x); }\n  private function no() {}\n}\n",
     [{"M": "run", "P": "$x", "B": "go($x);"}], "class member"),
    # C preprocessor: the directive's node carries its newline; `# define` is a define
    ("c", "#define $NAME $VALUE",
     "#define MAX 10\n#define SQ(x) ((x)*(x))\n# define MIN 0\nint x;\n",
     [{"NAME": "MAX", "VALUE": "10"}, {"NAME": "MIN", "VALUE": "0"}], "statement"),
    ("c", "#include $H",
     "#include <stdio.h>\n#  include \"local.h\"\n",
     [{"H": "<stdio.h>"}, {"H": '"local.h"'}], "statement"),
]  # fmt: skip


def _id(case: tuple) -> str:
    return f"{case[0]}:{case[1]}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_declaration_family_matches_with_its_captures(case: tuple) -> None:
    lang, pattern, code, expected, rung = case
    compiled = compile_pattern(pattern, lang)
    assert compiled.context.startswith(rung), compiled.context
    assert compiled.repairs == 0, f"{pattern!r} needed repairs as {compiled.context}"
    got = [m["captures"] for m in search_source(compiled, code)]
    assert expected and got == expected
