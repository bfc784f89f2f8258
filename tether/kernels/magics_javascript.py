"""IPython idioms in a JavaScript/TypeScript cell (Deno's kernel), as Deno code.

Deno's kernel knows no magics, so an idiom typed by reflex becomes the Deno equivalent,
calling the `_tether_*` helpers `deno_prelude.js` put on `globalThis`. Arguments are
JSON string literals: no `{expr}` expansion (a template literal would make `${HOME}` a
JavaScript reference), so a command runs as written.

| idiom                           | becomes                                             |
|---------------------------------|-----------------------------------------------------|
| `!cmd`                          | `await _tether_sh("cmd");` (Deno.Command)           |
| `%cd dir`, `%pwd`               | `_tether_cd("dir");`, `Deno.cwd()`                  |
| `%ls` `%ll` `%cat` `%cp` `%mv` `%rm` `%mkdir` `%rmdir` | the shell command    |
| `%env [NAME[=value]]`           | `_tether_env("...")` (Deno.env)                     |
| `%time stmt`                    | `_tether_time_start(); stmt; _tether_time_end();`   |
| `%timeit [-n N] [-r R] stmt`    | `await _tether_timeit(async () => { stmt }, ...);`  |
| `%%bash`, `%%sh`                | `await _tether_sh("<cell>", {shell: "bash"});`      |
| `%%timeit`, `%%time`            | the cell wrapped the same ways (line numbers kept)  |
| `%%writefile [-a] path`         | `_tether_writefile("path", "<cell>", false);`       |

`%pip`, `%who` and `%matplotlib` have no Deno equivalent and get a MagicError saying what
to do instead. `!` is also JavaScript's negation, so a line is read as a shell command
only when it cannot sensibly be JavaScript: `!ls -la`, `!./run.sh` and `!deno --version`
are commands; `!ok`-style single words are commands too, but `!done && next()`,
`!obj.flag`, `!f(x)` and `!!x` stay JavaScript (put such a pipeline under `%%bash`). The
bound forms `x = !cmd` are never rewritten: `const ok = !ready` is everyday JavaScript.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from tether.kernels.cell_lines import javascript_code_end, javascript_magic_lines
from tether.kernels.magic_syntax import (
    MagicError,
    MagicLine,
    Rewritten,
    parse_magic_line,
    positive_int,
    replace_magic_lines,
    single_path,
    split_options,
)

_SHELL_ALIASES = {
    "ls": "ls", "ll": "ls -F -l", "cat": "cat", "cp": "cp", "mv": "mv", "rm": "rm",
    "mkdir": "mkdir", "rmdir": "rmdir",
}  # fmt: skip
_JS_WORDS = {
    "function", "async", "await", "new", "typeof", "this", "void", "delete", "class",
    "true", "false", "null", "undefined", "globalThis", "Deno", "Array", "Object",
    "Number", "String", "Boolean", "Math", "JSON", "isNaN", "window", "document",
}  # fmt: skip
_COMMAND_WORD = re.compile(r"[A-Za-z0-9_./~+-]+")
_MEMBER = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
_JS_OPERATORS = ("&&", "||", "??", "?", "===", "!==", "==", "!=", ")", ";", ",", "+", "*", "/", "=")
_TIMEIT_OPTIONS = {"-n": True, "-r": True}


def rewrite_javascript(lines: list[str]) -> Rewritten:
    """The cell `lines` (with their line ends) in plain JavaScript/TypeScript for Deno."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    head = parse_magic_line(lines[first], first + 1) if first is not None else None
    if head is not None and head.kind == "cell" and first is not None:
        return _cell_magic(head, lines[:first], lines[first + 1 :])
    rows = javascript_magic_lines(lines, _is_idiom)
    out, notes = replace_magic_lines(lines, rows, _translate)
    return Rewritten("".join(out), notes)


def _is_idiom(line: str) -> bool:
    magic = parse_magic_line(line)
    if magic is None or magic.target is not None or magic.kind == "shell_lines":
        return False
    return magic.kind != "shell" or looks_like_shell(line.strip()[1:])


def looks_like_shell(rest: str) -> bool:
    """Whether `!rest` at a statement start is a shell command rather than a negation."""
    word_match = _COMMAND_WORD.match(rest)
    if word_match is None:
        return False
    word, after = word_match.group(), rest[word_match.end() :]
    if word.split(".")[0] in _JS_WORDS:
        return False
    if not after:
        return not _MEMBER.fullmatch(word)
    return after[0].isspace() and not after.strip().startswith(_JS_OPERATORS)


def _translate(magic: MagicLine) -> tuple[str, str | None]:
    if magic.kind == "shell":
        return f"await _tether_sh({_js(magic.args)});", None
    if magic.name in _REFUSED:
        problem, instead = _REFUSED[magic.name]
        raise magic.error(problem, instead)
    if magic.name not in LINE_MAGICS:
        raise _unknown(magic)
    return LINE_MAGICS[magic.name](magic), None


def _js(text: str) -> str:
    return json.dumps(text)


def _statement(magic: MagicLine, text: str) -> str:
    statement = javascript_code_end(text).rstrip(";").rstrip()
    if not statement:
        raise magic.error("needs a statement", f"write {magic.shown} followed by a statement")
    return statement


def _timeit_options(magic: MagicLine, options: dict[str, str]) -> str:
    number = positive_int(magic, "-n", options["-n"]) if "-n" in options else 0
    repeat = positive_int(magic, "-r", options["-r"]) if "-r" in options else 7
    return f"{{number: {number}, repeat: {repeat}}}"


def _timeit(magic: MagicLine) -> str:
    options, rest = split_options(magic, magic.args, _TIMEIT_OPTIONS)
    body = _statement(magic, rest)
    return f"await _tether_timeit(async () => {{ {body}; }}, {_timeit_options(magic, options)});"


def _alias(magic: MagicLine) -> str:
    return f"await _tether_sh({_js(f'{_SHELL_ALIASES[magic.name]} {magic.args}'.strip())});"


LINE_MAGICS: dict[str, Callable[[MagicLine], str]] = {
    "cd": lambda magic: f"_tether_cd({_js(single_path(magic, magic.args) if magic.args else '')});",
    "pwd": lambda magic: "Deno.cwd();",
    "env": lambda magic: f"_tether_env({_js(magic.args)});",
    "time": lambda magic: (
        f"_tether_time_start(); {_statement(magic, magic.args)}; _tether_time_end();"
    ),
    "timeit": _timeit,
    **dict.fromkeys(_SHELL_ALIASES, _alias),
}

_REFUSED = {
    "pip": (
        "JavaScript has no pip",
        'import npm packages directly: import chalk from "npm:chalk@5"',
    ),
    "who": ("let/const bindings cannot be listed in JavaScript", "log the names you need"),
    "whos": ("let/const bindings cannot be listed in JavaScript", "log the names you need"),
    "who_ls": ("let/const bindings cannot be listed in JavaScript", "log the names you need"),
    "matplotlib": (
        "there is no matplotlib in JavaScript",
        "plot in Python: eval with language=python",
    ),
}


# ---- cell magics ------------------------------------------------------------------------


def _cell_magic(head: MagicLine, before: list[str], body: list[str]) -> Rewritten:
    if head.name not in CELL_MAGICS:
        raise _unknown(head)
    text = "".join(body)
    return Rewritten("".join(before) + CELL_MAGICS[head.name](head, text))


def _shell_cell(head: MagicLine, text: str) -> str:
    if head.args:
        raise head.error(
            f"takes no arguments here, got {head.args!r}", "write the commands below it"
        )
    shell = "bash" if head.name == "bash" else "sh"
    return f"await _tether_sh({_js(text)}, {{shell: {_js(shell)}}});\n"


def _timeit_cell(head: MagicLine, text: str) -> str:
    options, setup = split_options(head, head.args, _TIMEIT_OPTIONS)
    if setup:
        raise head.error(
            "takes no setup statement in JavaScript", "run the setup in an earlier cell"
        )
    return f"await _tether_timeit(async () => {{\n{text}\n}}, {_timeit_options(head, options)});\n"


def _time_cell(head: MagicLine, text: str) -> str:
    if head.args:
        raise head.error(f"takes no arguments, got {head.args!r}", "write the statements below it")
    return f"_tether_time_start();\n{text}\n_tether_time_end();\n"


def _writefile(head: MagicLine, text: str) -> str:
    options, rest = split_options(head, head.args, {"-a": False, "--append": False})
    if not rest:
        raise head.error("needs a file name", "write %%writefile path/to/file.ts")
    path = single_path(head, rest)
    append = "true" if options else "false"
    return f"_tether_writefile({_js(path)}, {_js(text)}, {append});\n"


CELL_MAGICS: dict[str, Callable[[MagicLine, str], str]] = {
    "bash": _shell_cell,
    "sh": _shell_cell,
    "timeit": _timeit_cell,
    "time": _time_cell,
    "writefile": _writefile,
}


def _unknown(magic: MagicLine) -> MagicError:
    known = ", ".join(f"%{name}" for name in sorted(LINE_MAGICS))
    cells = ", ".join(f"%%{name}" for name in sorted(CELL_MAGICS))
    return magic.error(
        "not supported in eval",
        f"eval rewrites {known}, !cmd, {cells} for JavaScript; write plain JavaScript instead",
    )
