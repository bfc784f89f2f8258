"""Agreement with ast-grep's own unit-test cases: each pattern-vs-source case run through our matcher.

    python benchmarks/astgrep_unit_cases.py PATH_TO_AST_GREP_CHECKOUT [--json OUT] [--quiet]

ast-grep's crates test their pattern matcher with small helpers that take a pattern and a
source text and assert that the pattern is found somewhere in it, or is not. This script
reads those calls out of a local ast-grep source checkout (nothing of it is copied here),
runs each case through `compile_pattern` + `search_source` (the API the differential
suite uses), and compares our outcome with the outcome ast-grep's test asserts.

What is counted (a case = one helper call with string-literal arguments):

- `crates/language/src/*.rs`: the file's `test_match(pattern, source)` and
  `test_non_match(pattern, source)` wrappers (the language is the one the wrapper passes
  to `test_match_lang` / `test_non_match_lang`), and direct `test_match_lang(pattern,
  source, Lang)` / `test_non_match_lang(...)` calls (JavaScript's, in lib.rs);
- `crates/core/src/matcher/pattern.rs` and `crates/core/src/match_tree/mod.rs`: their
  `test_match` / `test_non_match` helpers, which use the TSX grammar;
- reported apart, and in the combined figure: `test_replace(source, pattern, replacer)`
  in the language crate, which asserts that a replacement happened, i.e. that the pattern
  matched somewhere (the rewritten text is not compared).

Excluded, and why: calls in tests marked `#[ignore]` (ast-grep does not run them); calls
whose pattern or source is neither a string literal nor a name bound to one by a
`let` in the test or a `const`/`static` in the file (`format!`, a loop variable: counted
and listed as skipped); `crates/core/src/match_tree/strictness.rs` (it sets a strictness
other than ast-grep's default `smart`, a knob we do not have); tests that build a
`Pattern` by hand (`Pattern::contextual` with a selector, a strictness, `fixed_string`,
`potential_kinds`: not pattern-vs-source); `crates/config` (rules in YAML, not patterns).

Outcome per case: `agree` when we find a match exactly where the test expects one (or
none where it expects none); `refused` when our compiler refuses the pattern (always a
disagreement: ast-grep's helper accepted it); `disagree` otherwise. A divergence we
chose on purpose (tests/structural/cli_cases.py DIVERGENCES) that one of these cases
touches is still counted as a disagreement. Target (issue #25): agreement >= 97%.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tether.structural.pattern import PatternError, compile_pattern  # noqa: E402
from tether.structural.search import search_source  # noqa: E402

# ast-grep's language type in its tests -> our grammar id.
RUST_LANGS = {
    "Bash": "bash", "C": "c", "Cpp": "cpp", "CSharp": "csharp", "Css": "css", "Dart": "dart",
    "Elixir": "elixir", "Go": "go", "Haskell": "haskell", "Hcl": "hcl", "Html": "html",
    "Java": "java", "JavaScript": "javascript", "Json": "json", "Kotlin": "kotlin",
    "Lua": "lua", "Markdown": "markdown", "Nix": "nix", "Php": "php", "Python": "python",
    "Ruby": "ruby", "Rust": "rust", "Scala": "scala", "Solidity": "solidity",
    "Swift": "swift", "Tsx": "tsx", "TypeScript": "typescript", "Yaml": "yaml",
}  # fmt: skip

CORE_FILES = ("crates/core/src/matcher/pattern.rs", "crates/core/src/match_tree/mod.rs")
# helper name -> (index of the pattern, index of the source, expects a match, kind)
WRAPPERS = {
    "test_match": (0, 1, True, "match"),
    "test_non_match": (0, 1, False, "match"),
    "test_replace": (1, 0, True, "replace"),
}
DIRECT = {"test_match_lang": True, "test_non_match_lang": False}


@dataclass(frozen=True)
class Case:
    where: str  # file:line
    lang: str
    kind: str  # "match" (test_match/test_non_match) or "replace" (test_replace)
    pattern: str
    source: str
    expect: bool  # the test asserts a match


@dataclass(frozen=True)
class Outcome:
    case: Case
    verdict: str  # agree | refused | disagree
    detail: str  # the refusal, or what we found


# ---- a small Rust tokenizer: enough for test files (strings, comments, braces, idents)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


@dataclass(frozen=True)
class Tok:
    kind: str  # ident | str | punct
    text: str  # the ident, the decoded string, or the punctuation character
    pos: int


def _cooked(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n == "\n":  # a line continuation skips the newline and the next line's indent
            i += 2
            while i < len(body) and body[i] in " \t\r\n":
                i += 1
        elif n == "u":
            end = body.index("}", i)
            out.append(chr(int(body[i + 3 : end], 16)))
            i = end + 1
        elif n == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        else:
            out.append(_ESCAPES[n])
            i += 2
    return "".join(out)


def tokenize(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
        elif src.startswith("//", i):
            eol = src.find("\n", i)
            i = n if eol < 0 else eol
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (raw := re.match(r'b?r(#*)"', src[i:])) is not None:
            close = '"' + raw.group(1)
            start = i + raw.end()
            end = src.index(close, start)
            toks.append(Tok("str", src[start:end], i))
            i = end + len(close)
        elif c == '"' or src.startswith('b"', i):
            start = i + (2 if c == "b" else 1)
            j = start
            while src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            toks.append(Tok("str", _cooked(src[start:j]), i))
            i = j + 1
        elif c == "'":  # a char literal, or a lifetime
            if src[i + 1] == "\\":
                i = src.index("'", i + 2) + 1
            elif i + 2 < n and src[i + 2] == "'":
                i += 3
            else:
                i += 1
        elif (m := _IDENT.match(src, i)) is not None:
            toks.append(Tok("ident", m.group(), i))
            i = m.end()
        else:
            toks.append(Tok("punct", c, i))
            i += 1
    return toks


def _close(toks: list[Tok], i: int) -> int:
    """Index of the bracket closing the one at toks[i]."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    opener, closer, depth = toks[i].text, pairs[toks[i].text], 0
    for j in range(i, len(toks)):
        if toks[j].kind == "punct" and toks[j].text == opener:
            depth += 1
        elif toks[j].kind == "punct" and toks[j].text == closer:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {opener!r} at offset {toks[i].pos}")


@dataclass
class Fn:
    name: str
    attrs: frozenset[str]
    body: tuple[int, int]  # token indices of its braces
    lang: str | None  # the first ast-grep language type named in its body


def functions(toks: list[Tok]) -> list[Fn]:
    fns: list[Fn] = []
    pending: set[str] = set()
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.text == "#" and i + 1 < len(toks) and toks[i + 1].text == "[":
            end = _close(toks, i + 1)
            pending |= {x.text for x in toks[i + 2 : end] if x.kind == "ident"}
            i = end + 1
            continue
        if t.kind == "ident" and t.text == "fn" and toks[i + 1].kind == "ident":
            j = i + 2
            while toks[j].text not in ("{", ";"):
                j = _close(toks, j) + 1 if toks[j].text in ("(", "[") else j + 1
            if toks[j].text == "{":
                end = _close(toks, j)
                lang = next((RUST_LANGS[x.text] for x in toks[j:end] if x.text in RUST_LANGS), None)
                fns.append(Fn(toks[i + 1].text, frozenset(pending), (j, end), lang))
            pending = set()
        elif t.kind == "ident" and t.text in ("pub", "async", "unsafe", "crate"):
            pass
        elif t.text not in ("(", ")"):
            pending = set()
        i += 1
    return fns


def bindings(toks: list[Tok], lo: int, hi: int, words: tuple[str, ...]) -> dict[str, str]:
    """`const NAME: &str = "...";` (words=const, static) or `let NAME = "...";` (let) in
    toks[lo:hi]: NAME -> the string, so a case written with a named source is kept."""
    out: dict[str, str] = {}
    for i in range(lo, hi - 2):
        if toks[i].kind != "ident" or toks[i].text not in words:
            continue
        j = i + 1
        while j < hi and toks[j].text not in ("=", ";"):
            j += 1
        if j + 2 < hi and toks[j].text == "=" and toks[j + 1].kind == "str":
            if toks[j + 2].text == ";":
                out[toks[i + 1].text] = toks[j + 1].text
    return out


def _args(toks: list[Tok], open_paren: int, names: dict[str, str]) -> list[str | None]:
    """A call's arguments: the string of a literal (`"..."`, `&"..."`) or of a name bound
    to one, else None."""
    end = _close(toks, open_paren)
    args: list[list[Tok]] = [[]]
    j = open_paren + 1
    while j < end:
        t = toks[j]
        if t.kind == "punct" and t.text in "([{":
            k = _close(toks, j)
            args[-1].extend(toks[j : k + 1])
            j = k + 1
            continue
        if t.kind == "punct" and t.text == ",":
            args.append([])
        else:
            args[-1].append(t)
        j += 1
    out: list[str | None] = []
    for a in args:
        if not a:
            continue
        a = a[1:] if a[0].text == "&" else a
        if len(a) == 1 and a[0].kind == "str":
            out.append(a[0].text)
        else:
            out.append(names.get(a[0].text) if len(a) == 1 and a[0].kind == "ident" else None)
    return out


@dataclass
class Extracted:
    cases: list[Case]
    ignored: list[str]  # where: calls in #[ignore] tests
    skipped: list[str]  # where: calls with an argument that is no literal


def extract(root: Path) -> Extracted:
    files = sorted((root / "crates/language/src").glob("*.rs")) + [root / f for f in CORE_FILES]
    got = Extracted([], [], [])
    for path in files:
        src = path.read_text()
        toks = tokenize(src)
        fns = functions(toks)
        helpers = {f.name: f.lang for f in fns if f.name in WRAPPERS and "test" not in f.attrs}
        rel = path.relative_to(root).as_posix()
        consts = bindings(toks, 0, len(toks), ("const", "static"))
        for f in fns:
            if "test" not in f.attrs:
                continue
            lo, hi = f.body
            names = consts | bindings(toks, lo, hi, ("let",))
            for i in range(lo, hi):
                t = toks[i]
                if t.kind != "ident" or toks[i + 1].text != "(" or toks[i - 1].text == "fn":
                    continue
                where = f"{rel}:{src.count(chr(10), 0, t.pos) + 1}"
                if t.text in helpers:
                    p_at, s_at, expect, kind = WRAPPERS[t.text]
                    lang = helpers[t.text]
                elif t.text in DIRECT:
                    p_at, s_at, expect, kind = 0, 1, DIRECT[t.text], "match"
                    third = toks[_close(toks, i + 1) - 1].text
                    lang = RUST_LANGS.get(third)
                else:
                    continue
                if "ignore" in f.attrs:
                    got.ignored.append(where)
                    continue
                args = _args(toks, i + 1, names)
                pattern, source = args[p_at], args[s_at]
                if pattern is None or source is None or lang is None:
                    got.skipped.append(where)
                    continue
                got.cases.append(Case(where, lang, kind, pattern, source, expect))
    return got


def run(case: Case) -> Outcome:
    try:
        compiled = compile_pattern(case.pattern, case.lang)
    except PatternError as e:
        return Outcome(case, "refused", str(e).splitlines()[0])
    found = search_source(compiled, case.source)
    ok = bool(found) == case.expect
    detail = f"{len(found)} match(es)" + (f", first {found[0]['text']!r}" if found else "")
    return Outcome(case, "agree" if ok else "disagree", detail)


def _short(s: str, n: int = 70) -> str:
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[: n - 1] + "…"


def _table(outs: list[Outcome], title: str) -> None:
    by_lang: dict[str, Counter[str]] = {}
    for o in outs:
        by_lang.setdefault(o.case.lang, Counter())[o.verdict] += 1
    print(f"\n{title}")
    print(f"{'language':<12}{'cases':>6}{'agree':>7}{'refused':>9}{'disagree':>10}{'%':>8}")
    total: Counter[str] = Counter()
    for lang in sorted(by_lang):
        c = by_lang[lang]
        total += c
        n = sum(c.values())
        pct = 100 * c["agree"] / n
        print(f"{lang:<12}{n:>6}{c['agree']:>7}{c['refused']:>9}{c['disagree']:>10}{pct:>7.1f}%")
    n = sum(total.values())
    pct = 100 * total["agree"] / n if n else 0.0
    print(
        f"{'total':<12}{n:>6}{total['agree']:>7}{total['refused']:>9}{total['disagree']:>10}"
        f"{pct:>7.1f}%  ({len(by_lang)} languages)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("checkout", type=Path, help="a local ast-grep source tree (its crates/ dir)")
    ap.add_argument("--json", type=Path, help="write every case's outcome here")
    ap.add_argument("--quiet", action="store_true", help="tables only, no case lists")
    args = ap.parse_args()
    root: Path = args.checkout
    if not (root / "crates/language/src").is_dir():
        ap.error(f"{root} has no crates/language/src: pass the root of an ast-grep checkout")
    rev = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    got = extract(root)
    outs = [run(c) for c in got.cases]
    print(f"ast-grep checkout: {root}" + (f" at {rev}" if rev else ""))
    print(
        f"{len(got.cases)} cases; excluded: {len(got.ignored)} in #[ignore] tests, "
        f"{len(got.skipped)} with a non-literal argument"
    )
    matches = [o for o in outs if o.case.kind == "match"]
    _table(matches, "test_match / test_non_match helpers (the headline figure)")
    _table([o for o in outs if o.case.kind == "replace"], "test_replace (pattern must match)")
    _table(outs, "all cases")
    if not args.quiet:
        for verdict in ("refused", "disagree"):
            bad = [o for o in outs if o.verdict == verdict]
            print(f"\n{verdict} ({len(bad)}):")
            for o in bad:
                c = o.case
                want = "match" if c.expect else "no match"
                print(f"  {c.where} [{c.lang}, {c.kind}] want {want}: {o.detail}")
                print(f"      pattern {_short(c.pattern)!s}")
                print(f"      source  {_short(c.source)!s}")
        for label, wheres in (("ignored", got.ignored), ("skipped", got.skipped)):
            if wheres:
                print(f"\n{label}: " + ", ".join(wheres))
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outs], indent=1))
    agree = sum(o.verdict == "agree" for o in matches)
    return 0 if matches and agree / len(matches) >= 0.97 else 1


if __name__ == "__main__":
    sys.exit(main())
