"""Differential suite against the ast-grep CLI (dev-only), case by case (cli_cases.py).

Each case is one pattern and one small source file. The CLI (`ast-grep run -p PATTERN -l
LANG --json=compact FILE`) and our matcher must find the same byte ranges; a pattern one
side refuses must be refused by the other. Per group and in all, the number of matches
must be equal and non-zero (a suite that finds nothing proves nothing). A case where we
choose to differ is named in `cli_cases.DIVERGENCES` with its reason, and is checked to
differ: a divergence that goes away, or a new one, fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from cli_cases import CASES, DIVERGENCES

from tether.structural.languages import get_parser
from tether.structural.pattern import PatternError, compile_pattern
from tether.structural.query import CandidateQuery
from tether.structural.search import find_in_tree

CLI = shutil.which("ast-grep", path=str(Path(sys.prefix) / "bin")) or shutil.which("ast-grep")
pytestmark = pytest.mark.skipif(CLI is None, reason="needs the ast-grep CLI (dev)")

SUFFIX = {
    "bash": "sh", "c": "c", "cpp": "cpp", "csharp": "cs", "css": "css", "dart": "dart",
    "elixir": "ex", "go": "go", "haskell": "hs", "hcl": "hcl", "html": "html", "java": "java",
    "javascript": "js", "json": "json", "kotlin": "kt", "lua": "lua", "markdown": "md", "nix": "nix",
    "php": "php", "python": "py", "ruby": "rb", "rust": "rs", "scala": "scala",
    "solidity": "sol", "swift": "swift", "tsx": "tsx", "typescript": "ts", "yaml": "yml",
}  # fmt: skip

Found = frozenset[tuple[int, int]] | str  # byte ranges, or "refused"


def ours(lang: str, pattern: str, source: str) -> Found:
    try:
        compiled = compile_pattern(pattern, lang)
    except PatternError:
        return "refused"
    data = source.encode()
    tree = get_parser(lang).parse(data)
    found = find_in_tree(compiled, CandidateQuery(compiled), tree.root_node, data)
    return frozenset((m.start, m.end) for m in found)


def theirs(lang: str, pattern: str, source: str, where: Path) -> Found:
    path = where / f"case.{SUFFIX[lang]}"
    path.write_text(source)
    out = subprocess.run(
        [CLI, "run", "-p", pattern, "-l", lang, "--json=compact", str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if out.returncode != 0 and not out.stdout.strip():
        return "refused"
    hits = json.loads(out.stdout or b"[]")
    return frozenset(
        (h["range"]["byteOffset"]["start"], h["range"]["byteOffset"]["end"]) for h in hits
    )


def _id(case: tuple[str, str, str, str]) -> str:
    return f"{case[0]}:{case[1]}:{case[2]}"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[tuple[str, str, str, str], tuple[Found, Found]]:
    where = tmp_path_factory.mktemp("cli")
    return {case: (ours(*case[1:]), theirs(*case[1:], where)) for case in CASES}


def _count(found: Found) -> int:
    return 0 if isinstance(found, str) else len(found)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_same_matches_as_the_cli(case, results):
    mine, cli = results[case]
    key = (case[1], case[2])
    if key in DIVERGENCES:
        assert mine != cli, f"divergence {DIVERGENCES[key]!r} no longer happens: drop it"
        return
    assert mine == cli, f"ours {sorted(mine) if mine != 'refused' else mine}, CLI {cli}"


def test_totals_per_group_are_equal_and_not_zero(results):
    mine: Counter[str] = Counter()
    cli: Counter[str] = Counter()
    for case, (m, c) in results.items():
        if (case[1], case[2]) in DIVERGENCES:
            continue
        mine[case[0]] += _count(m)
        cli[case[0]] += _count(c)
    groups = {case[0] for case in CASES}
    assert {g: mine[g] for g in groups} == {g: cli[g] for g in groups}
    assert all(mine[g] > 0 for g in groups), mine


def test_divergences_name_cases_of_the_suite():
    assert set(DIVERGENCES) <= {(c[1], c[2]) for c in CASES}
    assert len({c[1] for c in CASES}) >= 20
