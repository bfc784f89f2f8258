"""Grammar ids, file extensions, scaffold contexts and the metavariable-character probe.

Every grammar bundled by tree-sitter-language-pack 0.13.0 is usable by its id. A file's
language is inferred from its extension. An unknown id is an error that lists the closest
ids, never a silent fallback.

The metavariable character is probed per grammar instead of hard-coded: `$ABC` is a
single node in JavaScript or Dart, but an ERROR in Python, where `µABC` is an identifier.
The pattern compiler rewrites `$` to the probed character (as ast-grep's `expando_char`).
"""

from __future__ import annotations

import difflib
import functools
import typing
from dataclasses import dataclass
from pathlib import Path

import tree_sitter_language_pack as _pack
from tree_sitter import Language, Parser

# Bundled grammars we refuse to run, with the reason the model is told. tree-sitter-cobol in
# the 0.13.0 pack never returns from parse(), even on b"x", and loops holding the GIL: in the
# host it would freeze the agent server, in a parser actor it would wedge a pool slot.
BROKEN: dict[str, str] = {
    "cobol": "its parser in tree-sitter-language-pack 0.13.0 never returns from parse()",
}

# `php` is the PHP-only grammar (tree-sitter-php's `php_only`, as ast-grep's): a pattern
# fragment or a file of PHP code parses without a leading `<?php`. The pack's `php` grammar,
# which reads text until `<?php` (PHP inside HTML), stays reachable as `php_html`.
PHP_HTML = "php_html"

LANGUAGES: tuple[str, ...] = tuple(
    sorted((set(typing.get_args(_pack.SupportedLanguage)) - set(BROKEN)) | {PHP_HTML})
)

ALIASES: dict[str, str] = {
    "js": "javascript",
    "jsx": "javascript",
    "node": "javascript",
    "ts": "typescript",
    "py": "python",
    "python3": "python",
    "rs": "rust",
    "golang": "go",
    "c++": "cpp",
    "cxx": "cpp",
    "c#": "csharp",
    "cs": "csharp",
    "c_sharp": "csharp",
    "kt": "kotlin",
    "rb": "ruby",
    "sh": "bash",
    "shell": "bash",
    "yml": "yaml",
    "objective-c": "objc",
    "objectivec": "objc",
    "hs": "haskell",
    "ex": "elixir",
    "exs": "elixir",
    "tf": "terraform",
    "md": "markdown",
}

# Extension (lower case, without the dot) -> grammar id. Mirrors ast-grep's defaults where
# it has one (so the differential test and the benchmark scan the same files).
EXTENSIONS: dict[str, str] = {
    "py": "python", "py3": "python", "pyi": "python", "bzl": "starlark",
    "js": "javascript", "mjs": "javascript", "cjs": "javascript", "jsx": "javascript",
    "ts": "typescript", "mts": "typescript", "cts": "typescript", "tsx": "tsx",
    "dart": "dart", "rs": "rust", "go": "go", "c": "c", "h": "c",
    "cc": "cpp", "cpp": "cpp", "cxx": "cpp", "hpp": "cpp", "hxx": "cpp", "hh": "cpp", "c++": "cpp",
    "cu": "cuda", "cuh": "cuda", "m": "objc", "mm": "objc",
    "java": "java", "kt": "kotlin", "kts": "kotlin", "swift": "swift", "rb": "ruby",
    "cs": "csharp", "scala": "scala", "sc": "scala", "php": "php", "lua": "lua", "luau": "luau",
    "sh": "bash", "bash": "bash", "zsh": "bash", "ex": "elixir", "exs": "elixir",
    "erl": "erlang", "hrl": "erlang", "hs": "haskell", "ml": "ocaml", "mli": "ocaml_interface",
    "html": "html", "htm": "html", "css": "css", "scss": "scss", "json": "json",
    "yaml": "yaml", "yml": "yaml", "toml": "toml", "sql": "sql", "zig": "zig", "nim": "nim",
    "jl": "julia", "r": "r", "clj": "clojure", "cljs": "clojure", "el": "elisp",
    "elm": "elm", "gleam": "gleam", "hcl": "hcl", "tf": "terraform", "nix": "nix",
    "proto": "proto", "sol": "solidity", "v": "v", "vue": "vue", "svelte": "svelte",
    "groovy": "groovy", "gradle": "groovy", "pl": "perl", "pm": "perl", "ps1": "powershell",
    "fish": "fish", "cmake": "cmake", "md": "markdown", "tex": "latex", "graphql": "graphql",
    "d": "d", "f90": "fortran", "f95": "fortran", "hx": "haxe", "odin": "odin", "wgsl": "wgsl",
    "glsl": "glsl", "hlsl": "hlsl", "fs": "fsharp", "fsi": "fsharp_signature",
}  # fmt: skip


class LanguageError(ValueError):
    """An unknown grammar id or an extension no grammar claims; the message says what to do."""


def close_ids(name: str, n: int = 5) -> list[str]:
    """The grammar ids (and aliases) closest to `name`, best first."""
    pool = list(LANGUAGES) + list(ALIASES)
    found = difflib.get_close_matches(name.lower(), pool, n=n, cutoff=0.5)
    out: list[str] = []
    for f in found:
        lang = ALIASES.get(f, f)
        if lang not in out:
            out.append(lang)
    prefix = [lang for lang in LANGUAGES if lang.startswith(name.lower()[:2]) and lang not in out]
    return (out + prefix)[:n]


def normalize(language: str) -> str:
    """A grammar id from what the model typed (case, aliases); LanguageError when unknown."""
    key = language.strip().lower()
    key = ALIASES.get(key, key)
    if key in LANGUAGES:
        return key
    if key in BROKEN:
        raise LanguageError(
            f"language {key!r} is bundled but not offered: {BROKEN[key]}. "
            "Search those files with a text search instead."
        )
    near = close_ids(language)
    hint = f" Did you mean {', '.join(repr(x) for x in near)}?" if near else ""
    raise LanguageError(
        f"unknown language {language!r}.{hint} Pass a bundled grammar id such as "
        f"'python', 'dart', 'rust', 'typescript' ({len(LANGUAGES)} are bundled)."
    )


def language_for_path(path: str | Path) -> str | None:
    """The grammar id a file's extension implies, or None."""
    suffix = Path(path).suffix.lower().lstrip(".")
    return EXTENSIONS.get(suffix)


def extensions_of(lang: str) -> frozenset[str]:
    """The file extensions (without dot) scanned for a grammar id."""
    exts = frozenset(ext for ext, lg in EXTENSIONS.items() if lg == lang)
    return exts or frozenset({lang})


def infer(language: str | None, path: str | None) -> str:
    """Resolve the `language` argument, inferring it from `path` when that names a file."""
    if language:
        return normalize(language)
    if path and Path(path).suffix:
        lang = language_for_path(path)
        if lang:
            return lang
        raise LanguageError(
            f"cannot infer the language of {path!r} from its extension; pass `language` "
            f"(e.g. 'python', 'dart')."
        )
    raise LanguageError(
        "`language` is required when `path` is a directory or omitted: pass a grammar id "
        "such as 'python', 'dart', 'rust', 'typescript'."
    )


@functools.cache
def get_language(lang: str) -> Language:
    if lang == "php":
        return _php_only()
    if lang == PHP_HTML:
        lang = "php"
    return _pack.get_language(typing.cast(_pack.SupportedLanguage, lang))


def _php_only() -> Language:
    import tree_sitter_php  # a dependency (setup.cfg); the pack bundles only the HTML one

    return Language(tree_sitter_php.language_php_only())


_PARSERS: dict[str, Parser] = {}


def get_parser(lang: str) -> Parser:
    """One parser per grammar per process (parsers are not shared across threads here)."""
    p = _PARSERS.get(lang)
    if p is None:
        p = _PARSERS[lang] = Parser(get_language(lang))
    return p


@dataclass(frozen=True)
class Context:
    """A scaffold the pattern fragment is parsed inside: `prefix + fragment + suffix`."""

    name: str  # statement | expression | <container> member | declaration
    prefix: str = ""
    suffix: str = ""

    @property
    def is_member(self) -> bool:
        """A member rung: every member rung that reads the fragment is kept (SPEC.md)."""
        return self.name.endswith(" member")


RAW_STATEMENT = Context("statement")
RAW_DECLARATION = Context("declaration")

_C_LIKE = (
    Context("statement", "void __tether_f(void) {\n", "\n}"),
    Context("expression", "void __tether_f(void) {\n__tether_x = (", ");\n}"),
    RAW_DECLARATION,
)
_CPP = (
    Context("statement", "void __tether_f() {\n", "\n}"),
    Context("expression", "void __tether_f() {\n__tether_x = (", ");\n}"),
    Context("class member", "struct __tether_C {\n", "\n};"),
    RAW_DECLARATION,
)
_JS = (
    RAW_STATEMENT,
    Context("expression", "(", ")"),
    Context("class member", "class __tether_C {\n", "\n}"),
    Context("object member", "({\n", "\n})"),
)
_TS = (
    *_JS,
    Context("interface member", "interface __tether_I {\n", "\n}"),
    Context("object type member", "type __tether_T = {\n", "\n}"),
)

# The scaffold ladder per grammar, in the order SPEC.md gives (statement, expression, class
# member, declaration). Grammars not listed parse the fragment raw (their top level already
# accepts statements).
CONTEXTS: dict[str, tuple[Context, ...]] = {
    "python": (RAW_STATEMENT, Context("expression", "__tether_x = (", ")")),
    "javascript": _JS,
    "typescript": _TS,
    "tsx": _TS,
    "dart": (
        Context("statement", "void __tether_f() {\n", "\n}"),
        Context("expression", "var __tether_x = ", ";"),
        Context("class member", "class __tether_C {\n", "\n}"),
        RAW_DECLARATION,
    ),
    "c": _C_LIKE,
    "cpp": _CPP,
    "cuda": _CPP,
    "objc": _C_LIKE,
    "go": (
        Context("statement", "package __tether\nfunc __tether_f() {\n", "\n}"),
        Context("expression", "package __tether\nvar __tether_x = ", "\n"),
        RAW_DECLARATION,
        Context("declaration", "package __tether\n", "\n"),
    ),
    "rust": (
        Context("statement", "fn __tether_f() {\n", "\n}"),
        Context("expression", "fn __tether_f() {\nlet __tether_x = ", ";\n}"),
        Context("impl member", "impl __tether_C {\n", "\n}"),
        Context("trait member", "trait __tether_T {\n", "\n}"),
        Context("match arm", "fn __tether_f() {\nmatch __tether_x {\n", "\n}\n}"),
        RAW_DECLARATION,
    ),
    "java": (
        Context("statement", "class __tether_C { void __tether_f() {\n", "\n} }"),
        Context("expression", "class __tether_C { Object __tether_x = ", "; }"),
        Context("class member", "class __tether_C {\n", "\n}"),
        Context("interface member", "interface __tether_I {\n", "\n}"),
        RAW_DECLARATION,
    ),
    "csharp": (
        Context("statement", "class __tether_C { void __tether_f() {\n", "\n} }"),
        Context("expression", "class __tether_C { object __tether_x = ", "; }"),
        Context("class member", "class __tether_C {\n", "\n}"),
        Context("interface member", "interface __tether_I {\n", "\n}"),
        RAW_DECLARATION,
    ),
    "kotlin": (
        Context("statement", "fun __tether_f() {\n", "\n}"),
        Context("class member", "class __tether_C {\n", "\n}"),
        Context("interface member", "interface __tether_I {\n", "\n}"),
        RAW_DECLARATION,
    ),
    "swift": (
        RAW_STATEMENT,
        Context("class member", "class __tether_C {\n", "\n}"),
        Context("protocol member", "protocol __tether_P {\n", "\n}"),
    ),
    "scala": (
        Context("statement", "object __tether_O { def __tether_f() = {\n", "\n} }"),
        Context("class member", "class __tether_C {\n", "\n}"),
        Context("trait member", "trait __tether_T {\n", "\n}"),
        RAW_DECLARATION,
    ),
    "php": (
        RAW_STATEMENT,
        Context("expression", "$__tether_x = (", ");\n"),
        Context("class member", "class __tether_C {\n", "\n}"),
        Context("interface member", "interface __tether_I {\n", "\n}"),
    ),
    PHP_HTML: (
        Context("statement", "<?php\n", "\n"),
        Context("expression", "<?php\n$__tether_x = (", ");\n"),
        Context("class member", "<?php\nclass __tether_C {\n", "\n}"),
    ),
    "ruby": (RAW_STATEMENT, Context("class member", "class TetherC\n", "\nend")),
    # Solidity statements live in a contract's function; its top level takes only
    # declarations (`import`, `pragma`, `contract`), so `require($C, $M);` read raw found
    # nothing (as the CLI, which reads it so)
    "solidity": (
        Context("statement", "contract __tether_C { function __tether_f() public {\n", "\n} }"),
        Context("contract member", "contract __tether_C {\n", "\n}"),
        RAW_DECLARATION,
    ),
    # a Nix file is one expression: a binding (`$K = $V;`) lives in an attribute set
    "nix": (RAW_STATEMENT, Context("binding", "{\n", "\n}")),
}

# Tokens appended inside the fragment when no context accepts it as written: Dart, C and
# Java statements need their closing `;` (SPEC.md: "Dart needs a function body and a
# closing `;`").
CLOSERS: tuple[str, ...] = ("", ";")


# Words that begin a class member and never a statement: a fragment starting with one is
# tried as a class member first (`private final int $F = $V;` is also a well-formed local
# declaration to the Java grammar, which then never matches a field).
MEMBER_KEYWORDS: dict[str, frozenset[str]] = {
    "java": frozenset({"public", "private", "protected", "abstract", "static", "synchronized"}),
    "kotlin": frozenset(
        {"override", "public", "private", "protected", "internal", "open", "abstract"}
    ),
    "csharp": frozenset(
        {"public", "private", "protected", "internal", "override", "virtual", "abstract"}
    ),
    "typescript": frozenset({"public", "private", "protected", "readonly", "static"}),
    "tsx": frozenset({"public", "private", "protected", "readonly", "static"}),
    "javascript": frozenset({"static"}),
    "dart": frozenset({"static", "@override"}),
    "php": frozenset({"public", "private", "protected", "abstract", "static", "final"}),
    "swift": frozenset({"override", "public", "private", "fileprivate", "internal", "open"}),
}


def contexts_for(lang: str, fragment: str = "") -> tuple[Context, ...]:
    """The scaffold ladder for `lang`; class members first when `fragment` starts with a
    word only a member starts with."""
    ladder = CONTEXTS.get(lang, (RAW_STATEMENT,))
    words = fragment.split(None, 1)
    if words and words[0] in MEMBER_KEYWORDS.get(lang, ()):
        members = tuple(c for c in ladder if c.is_member)
        ladder = members + tuple(c for c in ladder if not c.is_member)
    return ladder


# Candidate metavariable characters, tried in order. ast-grep uses `$` where the grammar
# accepts it in identifiers, a letter elsewhere (`µ`; `_` for CSS and Nix, `z` for HTML,
# whose tag names take only ASCII letters). The compiler tries the others too, per pattern
# and per ladder rung, when the preferred one leaves a metavariable that is no whole node.
METAVAR_CANDIDATES: tuple[str, ...] = ("$", "µ", "ǂ", "_", "z")

# Places an expression or a name may stand in many grammars: the probe also looks there,
# since some grammars' top level takes neither (JSON, Lua, CSS).
_PROBE_HOLES: tuple[Context, ...] = (
    Context("probe", "x = ", "\n"),
    Context("probe", "f(", ")"),
    Context("probe", "[", "]"),
    Context("probe", ".a { color: ", "; }"),
    Context("probe", "<", ">"),
)


def _spans_exactly(lang: str, text: str, level: int) -> bool:
    """Whether `text` parses, in some context, as one node spanning exactly it. Level 0:
    an error-free parse and a leaf; 1: error-free, any node (Ruby reads `$$$ABC` as a
    call of `$$`: the compiler recognises a metavariable by the text of any node, as
    ast-grep does); 2: any node, an ERROR node too, in a parse with errors elsewhere."""
    parser = get_parser(lang)
    holes = contexts_for(lang) + (_PROBE_HOLES if level == 2 else ())
    for closer in CLOSERS:
        for ctx in holes:
            src = (ctx.prefix + text + closer + ctx.suffix).encode()
            start = len(ctx.prefix.encode())
            end = start + len(text.encode())
            tree = parser.parse(src)
            if level < 2 and tree.root_node.has_error:
                continue
            node = tree.root_node.descendant_for_byte_range(start, end)
            if node is not None and node.start_byte == start and node.end_byte == end:
                if level > 0 or node.child_count == 0:
                    return True
    return False


@functools.cache
def metavar_char(lang: str) -> str | None:
    """The character this grammar reads best as the start of a metavariable name; None
    when no candidate makes `$ABC` one node anywhere."""
    if lang in BROKEN:
        return None  # never run a refused grammar: the probe would not return
    for level in (0, 1, 2):
        # first a character that makes `$$$ABC` one leaf too: Ruby reads `$$$P` as a call
        # of `$$`, which `def $M($$$P)` cannot hold (ast-grep finds that method; `µ` works)
        for ch in METAVAR_CANDIDATES:
            if _spans_exactly(lang, f"{ch}ABC", level) and _spans_exactly(
                lang, f"{ch * 3}ABC", level
            ):
                return ch
    return None


def metavar_chars(lang: str) -> tuple[str, ...]:
    """Every candidate character, the probed one first."""
    best = metavar_char(lang)
    rest = tuple(c for c in METAVAR_CANDIDATES if c != best)
    return (best, *rest) if best is not None else rest
