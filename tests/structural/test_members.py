"""Members wherever they live (issue #25, group 3), against the ast-grep CLI.

A member pattern typed as a user would (`readonly $F: $T;`) is kept in every member rung
that reads it: TypeScript class bodies, interfaces and object types. The CLI's oracle for
one container kind is a rule whose pattern has that container as `context` and the
member's kind as `selector`, `inside` that container's body. On TypeScript's own lib
`.d.ts` files (plus our shapes.ts, which has classes), the counts per container kind must
be equal, and non-zero where the container holds such members.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tether.structural.cache import ParseCache
from tether.structural.languages import get_parser
from tether.structural.ops import syntax_flag
from tether.structural.pattern import compile_pattern
from tether.structural.rewrite import apply
from tether.structural.search import search_paths

HERE = Path(__file__).parent
TS_LIB = Path(sys.prefix) / "lib" / "node_modules" / "typescript" / "lib"
CLI = shutil.which("ast-grep", path=str(Path(sys.prefix) / "bin")) or shutil.which("ast-grep")

pytestmark = pytest.mark.skipif(
    CLI is None or not TS_LIB.is_dir(), reason="needs the ast-grep CLI and typescript (dev)"
)

# container body kind -> (the scaffold the CLI rule uses as context, the member's kind there)
CONTAINERS = {
    "class_body": ("class __tether_C {\n", "\n}"),
    "interface_body": ("interface __tether_I {\n", "\n}"),
    "object_type": ("type __tether_T = {\n", "\n};"),
}
# pattern -> the member kind per container body (as tree-sitter-typescript names them)
MEMBERS = {
    "readonly $F: $T;": {
        "class_body": "public_field_definition",
        "interface_body": "property_signature",
        "object_type": "property_signature",
    },
    "$F?: $T;": {
        "class_body": "public_field_definition",
        "interface_body": "property_signature",
        "object_type": "property_signature",
    },
    "$M($$$P): $R;": {
        "class_body": "method_signature",
        "interface_body": "method_signature",
        "object_type": "method_signature",
    },
}
# where each container holds members of every pattern (the rest may hold none)
NON_ZERO = {
    ("readonly $F: $T;", "interface_body"),
    ("readonly $F: $T;", "object_type"),
    ("readonly $F: $T;", "class_body"),
    ("$F?: $T;", "interface_body"),
    ("$F?: $T;", "object_type"),
    ("$M($$$P): $R;", "interface_body"),
    ("$M($$$P): $R;", "object_type"),
}


def _files() -> list[Path]:
    return sorted(TS_LIB.glob("*.d.ts")) + [HERE / "corpus" / "shapes.ts"]


def _rules() -> str:
    docs = []
    for i, (pattern, kinds) in enumerate(MEMBERS.items()):
        for body, kind in kinds.items():
            prefix, suffix = CONTAINERS[body]
            docs.append(
                json.dumps(
                    {
                        "id": f"{i}:{body}",
                        "language": "typescript",
                        "rule": {
                            "pattern": {"context": prefix + pattern + suffix, "selector": kind},
                            "inside": {"kind": body},
                        },
                    }
                )
            )
    return "\n---\n".join(docs)


@pytest.fixture(scope="module")
def cli_counts(tmp_path_factory) -> Counter[tuple[str, str]]:
    rules = tmp_path_factory.mktemp("rules") / "members.yml"
    rules.write_text(_rules())
    out = subprocess.run(
        [CLI, "scan", "--rule", str(rules), "--json=compact", *map(str, _files())],
        capture_output=True,
        timeout=240,
        check=False,
    )
    hits = json.loads(out.stdout or b"[]")
    patterns = list(MEMBERS)
    counts: Counter[tuple[str, str]] = Counter()
    for h in hits:
        i, body = h["ruleId"].split(":")
        counts[(patterns[int(i)], body)] += 1
    return counts


def _container(root, start: int, end: int) -> str:
    node = root.descendant_for_byte_range(start, end)
    while node.parent is not None and (node.parent.start_byte, node.parent.end_byte) == (
        start,
        end,
    ):
        node = node.parent
    return node.parent.type if node.parent is not None else ""


def _our_counts(pattern: str) -> Counter[str]:
    compiled = compile_pattern(pattern, "typescript")
    counts: Counter[str] = Counter()
    for f in _files():
        results, _ = search_paths(compiled, str(f), ParseCache())
        for r in results:
            root = get_parser("typescript").parse(r.source).root_node
            for m in r.matches:
                counts[_container(root, m.start, m.end)] += 1
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("pattern", list(MEMBERS))
def test_member_counts_per_container_equal_the_cli(pattern, cli_counts):
    compiled = compile_pattern(pattern, "typescript")
    assert set(compiled.contexts) >= {"class member", "interface member", "object type member"}
    ours = _our_counts(pattern)
    for body in CONTAINERS:
        theirs = cli_counts[(pattern, body)]
        assert ours[body] == theirs, f"{pattern!r} in {body}: ours {ours[body]}, CLI {theirs}"
        if (pattern, body) in NON_ZERO:
            assert theirs > 0, f"{pattern!r} in {body}: the case is vacuous"


def test_the_result_says_which_contexts():
    p = compile_pattern("readonly $F: $T;", "typescript")
    assert p.contexts == ("class member", "interface member", "object type member")
    assert len(p.variants) == 2  # an interface's and an object type's member read alike
    assert compile_pattern("foo($X)", "typescript").contexts == ("statement",)


def test_an_edit_of_a_multi_context_pattern_keeps_every_file_parsing(tmp_path):
    code = (
        "class A {\n  readonly a: number;\n}\n"
        "interface B {\n  readonly b: string;\n  c: number\n}\n"
        "type C = { readonly d: boolean, e: 1 };\n"
    )
    path = tmp_path / "m.ts"
    path.write_text(code)
    compiled = compile_pattern("readonly $F: $T;", "typescript")
    (result,), _ = search_paths(compiled, str(path), ParseCache())
    assert result.total == 3
    new, count = apply("$F: $T", result.source, result.matches)
    assert count == 3 and b"readonly" not in new
    tree = get_parser("typescript").parse(result.source)
    assert syntax_flag("typescript", tree, new) == ""
    assert not get_parser("typescript").parse(new).root_node.has_error


@pytest.mark.slow
def test_an_edit_of_every_lib_member_leaves_no_new_error_node():
    # every `readonly` member of TypeScript's lib, in classes, interfaces and object types
    compiled = compile_pattern("readonly $F: $T;", "typescript")
    edited = 0
    for f in _files():
        results, _ = search_paths(compiled, str(f), ParseCache())
        for r in results:
            new, count = apply("$F: $T", r.source, r.matches)
            tree = get_parser("typescript").parse(r.source)
            assert syntax_flag("typescript", tree, new) == "", f.name
            edited += count
    assert edited > 6000
