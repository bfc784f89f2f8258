"""Grammar ids, inference from extensions, close-id suggestions, every bundled grammar."""

from __future__ import annotations

import pytest

from tether.structural.languages import (
    LANGUAGES,
    LanguageError,
    get_parser,
    infer,
    language_for_path,
    metavar_char,
    normalize,
)
from tether.structural.pattern import compile_pattern


@pytest.mark.parametrize(
    ("path", "lang"),
    [("lib/a.dart", "dart"), ("x.py", "python"), ("x.pyi", "python"), ("m.rs", "rust"),
     ("a.tsx", "tsx"), ("a.ts", "typescript"), ("a.mjs", "javascript"), ("k.kt", "kotlin"),
     ("h.hpp", "cpp"), ("m.go", "go"), ("R.java", "java"), ("s.swift", "swift"),
     ("x.unknownext", None)],
)  # fmt: skip
def test_language_for_path(path, lang):
    assert language_for_path(path) == lang


def test_aliases_and_case():
    assert normalize("TS") == "typescript" and normalize("golang") == "go"
    assert normalize("C#") == "csharp" and normalize("Python") == "python"


def test_unknown_id_lists_close_ids():
    with pytest.raises(
        LanguageError, match=r"unknown language 'typscript'\. Did you mean 'typescript'"
    ):
        normalize("typscript")


def test_infer_needs_language_for_directories():
    assert infer(None, "lib/a.dart") == "dart"
    assert infer("rust", None) == "rust"
    with pytest.raises(LanguageError, match="cannot infer the language of 'notes.xyz'"):
        infer(None, "notes.xyz")


def test_bundled_grammars_are_many():
    for lang in ("dart", "python", "rust", "c", "cpp", "go", "javascript", "typescript",
                 "tsx", "java", "kotlin", "swift", "ruby", "csharp"):  # fmt: skip
        assert lang in LANGUAGES


@pytest.mark.slow
@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_every_grammar_loads_and_probes(lang):
    assert get_parser(lang).language is not None
    ch = metavar_char(lang)
    assert ch is not None and len(ch) == 1, f"{lang} has no metavariable character"


def test_cobol_is_refused_not_parsed():
    # tree-sitter-cobol's parse() never returns: the id is refused before any parse
    assert "cobol" not in LANGUAGES
    with pytest.raises(LanguageError, match="'cobol' is bundled but not offered"):
        normalize("cobol")
    assert metavar_char("cobol") is None


def test_a_pattern_without_metavariables_is_literal():
    assert compile_pattern("print(x)", "lua").metavars == frozenset()
