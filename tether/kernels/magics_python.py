"""IPython idioms in a Python cell, rewritten into calls of the prelude's helpers.

Each idiom becomes one line of plain Python at the same indentation (a traceback's line
numbers still match the cell), calling a `_tether_*` helper that `python_prelude` defined
in the kernel. Arguments are passed as string literals: the helper expands `{expr}` and
`$name` at run time in the caller's scope, as IPython does, so nothing is evaluated here.

| idiom                          | becomes                                            |
|--------------------------------|----------------------------------------------------|
| `%pip args`, `!pip args`       | `_tether_pip("args")` (the kernel's own interpreter) |
| `%cd dir`, `%pwd`              | `_tether_cd("dir")`, `_tether_pwd()`               |
| `!cmd`, `x = !cmd`, `!!cmd`    | `_tether_sh("cmd")`, `x = _tether_sh_lines("cmd")` |
| `%ls` `%ll` `%cat` `%cp` `%mv` `%rm` `%mkdir` `%rmdir` | the shell command   |
| `%env`, `%who`, `%who_ls`, `%whos` | `_tether_env(...)`, `_tether_who(...)`, ...    |
| `%time expr`, `%time stmt`     | `_tether_time(lambda: (expr))`, `with _tether_timer(): stmt` |
| `%timeit [-n N] [-r R] stmt`   | `_tether_timeit("stmt", number=N, repeat=R)`        |
| `%matplotlib inline`           | `pass` (figures are inline already)                |
| `%%bash`, `%%sh`               | `_tether_sh("<cell>", shell="bash", expand=False)` |
| `%%timeit [-n N] [-r R] [setup]` | `_tether_timeit("<cell>", setup="setup", ...)`   |
| `%%time`                       | `with _tether_timer():` and the cell indented      |
| `%%writefile [-a] path`        | `_tether_writefile("path", "<cell>", append=...)`  |
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from tether.kernels.cell_lines import python_magic_lines, python_string_continuations
from tether.kernels.magic_syntax import (
    MagicError,
    MagicLine,
    Rewritten,
    parse_magic_line,
    positive_int,
    replace_magic_lines,
    split_options,
)

# a translation: the code for the line (an expression when it can be bound), and a note
Expression = str
_SHELL_ALIASES = {
    "ls": "ls", "ll": "ls -F -l", "cat": "cat", "cp": "cp", "mv": "mv", "rm": "rm",
    "mkdir": "mkdir", "rmdir": "rmdir",
}  # fmt: skip
_PIP_COMMAND = re.compile(r"^(?:pip3?|python3?\s+-m\s+pip)\s+(?P<args>.*)$", re.DOTALL)
_TIMEIT_OPTIONS = {"-n": True, "-r": True}


def rewrite_python(lines: list[str]) -> Rewritten:
    """The cell `lines` (with their line ends) in plain Python."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    head = parse_magic_line(lines[first], first + 1) if first is not None else None
    if head is not None and head.kind == "cell" and first is not None:
        return _cell_magic(head, lines[:first], lines[first + 1 :])
    return _line_magics(lines)


def _line_magics(lines: list[str]) -> Rewritten:
    rows = python_magic_lines(lines, lambda line: parse_magic_line(line) is not None)
    out, notes = replace_magic_lines(lines, rows, _translate)
    return Rewritten("".join(out), notes)


def _translate(magic: MagicLine) -> tuple[str, str | None]:
    if magic.kind == "shell_lines":
        return _bind(magic, f"_tether_sh_lines({magic.args!r})"), None
    if magic.kind == "shell":
        return _shell(magic)
    if magic.name not in LINE_MAGICS:
        raise _unknown(magic)
    translate = LINE_MAGICS[magic.name]
    code, note, is_expression = translate(magic)
    if magic.target is not None and not is_expression:
        raise magic.error("its result cannot be assigned", f"write {magic.shown} on its own line")
    return (_bind(magic, code) if is_expression else code), note


def _bind(magic: MagicLine, expression: Expression) -> str:
    return expression if magic.target is None else f"{magic.target} = {expression}"


def _shell(magic: MagicLine) -> tuple[str, str | None]:
    pip = _PIP_COMMAND.match(magic.args)
    if pip and magic.target is None:
        return _pip_call(pip["args"]), "!pip runs as %pip: the kernel's own interpreter's pip"
    helper = "_tether_sh" if magic.target is None else "_tether_sh_lines"
    return _bind(magic, f"{helper}({magic.args!r})"), None


# ---- line magics: each returns (code, note, is_expression) ------------------------------

LineMagic = Callable[[MagicLine], tuple[str, str | None, bool]]


def _pip_call(args: str) -> str:
    return f"_tether_pip({args.strip()!r})"


def _pip(magic: MagicLine) -> tuple[str, str | None, bool]:
    return _pip_call(magic.args), None, True


def _call(helper: str) -> LineMagic:
    def translate(magic: MagicLine) -> tuple[str, str | None, bool]:
        return f"{helper}({magic.args!r})", None, True

    return translate


def _pwd(magic: MagicLine) -> tuple[str, str | None, bool]:
    return "_tether_pwd()", None, True


def _alias(magic: MagicLine) -> tuple[str, str | None, bool]:
    command = f"{_SHELL_ALIASES[magic.name]} {magic.args}".strip()
    return f"_tether_sh({command!r})", None, True


def _matplotlib(magic: MagicLine) -> tuple[str, str | None, bool]:
    if magic.args not in ("", "inline"):
        raise magic.error(
            f"backend {magic.args!r} is not available here",
            "figures come back as PNG images with the inline backend; drop the line",
        )
    return "pass", "%matplotlib inline is the default here: the line does nothing", False


def _time(magic: MagicLine) -> tuple[str, str | None, bool]:
    body = _parse_statement(magic, magic.args)
    segments = [ast.get_source_segment(magic.args, node) or "" for node in body]
    only = body[0]
    if len(body) == 1 and isinstance(only, ast.Expr) and not _awaits(only):
        return f"_tether_time(lambda: ({segments[0]}))", None, True
    if any(isinstance(node, _COMPOUND) for node in body):
        raise magic.error(
            "a compound statement cannot follow %time on one line",
            "put %%time on the first line of the cell instead",
        )
    return f"with _tether_timer(): {'; '.join(segments)}", None, False


_COMPOUND = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match,
)  # fmt: skip


def _parse_statement(magic: MagicLine, text: str) -> list[ast.stmt]:
    if not text.strip():
        raise magic.error("nothing to time", f"write {magic.shown} followed by a statement")
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        tree = compile(text, "<magic>", "exec", flags=flags, dont_inherit=True)
    except SyntaxError as error:
        raise magic.error(f"the statement does not parse ({error.msg})", "fix it") from None
    assert isinstance(tree, ast.Module)
    return tree.body


def _awaits(node: ast.AST) -> bool:
    return any(isinstance(child, ast.Await) for child in ast.walk(node))


def _timeit(magic: MagicLine) -> tuple[str, str | None, bool]:
    options, statement = split_options(magic, magic.args, _TIMEIT_OPTIONS)
    _parse_statement(magic, statement)
    return f"_tether_timeit({statement!r}{_timeit_options(magic, options)})", None, True


def _timeit_options(magic: MagicLine, options: dict[str, str]) -> str:
    number = positive_int(magic, "-n", options["-n"]) if "-n" in options else 0
    repeat = positive_int(magic, "-r", options["-r"]) if "-r" in options else 7
    return f", number={number}, repeat={repeat}"


LINE_MAGICS: dict[str, LineMagic] = {
    "pip": _pip,
    "cd": _call("_tether_cd"),
    "pwd": _pwd,
    "env": _call("_tether_env"),
    "who": _call("_tether_who"),
    "who_ls": _call("_tether_who_ls"),
    "whos": _call("_tether_whos"),
    "time": _time,
    "timeit": _timeit,
    "matplotlib": _matplotlib,
    "sx": lambda magic: (f"_tether_sh_lines({magic.args!r})", None, True),
    "system": lambda magic: (f"_tether_sh_lines({magic.args!r})", None, True),
    **dict.fromkeys(_SHELL_ALIASES, _alias),
}


# ---- cell magics ------------------------------------------------------------------------


def _cell_magic(head: MagicLine, before: list[str], body: list[str]) -> Rewritten:
    if head.name not in CELL_MAGICS:
        raise _unknown(head)
    code, notes = CELL_MAGICS[head.name](head, "".join(body), body)
    return Rewritten("".join(before) + code, notes)


def _shell_cell(head: MagicLine, text: str, body: list[str]) -> tuple[str, list[str]]:
    if head.args:
        raise head.error(
            f"takes no arguments here, got {head.args!r}", "write the commands below it"
        )
    shell = "bash" if head.name == "bash" else "sh"
    return f"_tether_sh({text!r}, shell={shell!r}, expand=False)\n", []


def _timeit_cell(head: MagicLine, text: str, body: list[str]) -> tuple[str, list[str]]:
    options, setup = split_options(head, head.args, _TIMEIT_OPTIONS)
    _parse_statement(head, text)
    setup_arg = f", setup={setup!r}" if setup else ""
    return f"_tether_timeit({text!r}{setup_arg}{_timeit_options(head, options)})\n", []


def _time_cell(head: MagicLine, text: str, body: list[str]) -> tuple[str, list[str]]:
    if head.args:
        raise head.error(f"takes no arguments, got {head.args!r}", "write the statements below it")
    inner = _line_magics(body)
    lines = inner.code.splitlines(keepends=True)
    if not any(line.strip() for line in lines):
        return "with _tether_timer(): pass\n", inner.notes
    unit = "\t" if any(line.startswith("\t") for line in lines) else "    "
    keep = python_string_continuations(lines)
    indented = [
        line if i in keep or not line.strip() else unit + line for i, line in enumerate(lines)
    ]
    note = "%%time: the cell runs inside a with block, so its last expression is not echoed"
    return "with _tether_timer():\n" + "".join(indented), [*inner.notes, note]


def _writefile(head: MagicLine, text: str, body: list[str]) -> tuple[str, list[str]]:
    options, path = split_options(head, head.args, {"-a": False, "--append": False})
    if not path:
        raise head.error("needs a file name", "write %%writefile path/to/file.py")
    append = bool(options)
    return f"_tether_writefile({path!r}, {text!r}, append={append})\n", []


CellMagic = Callable[[MagicLine, str, list[str]], tuple[str, list[str]]]
CELL_MAGICS: dict[str, CellMagic] = {
    "bash": _shell_cell,
    "sh": _shell_cell,
    "timeit": _timeit_cell,
    "time": _time_cell,
    "writefile": _writefile,
}


# ---- what to say about the rest -------------------------------------------------------------

_ADVICE = {
    "load_ext": "modules are not reloaded automatically: call importlib.reload(module), or eval with reset=true",
    "autoreload": "call importlib.reload(module), or eval with reset=true",
    "reload_ext": "call importlib.reload(module), or eval with reset=true",
    "run": "run a script with !python path/to/script.py, or exec(open(path).read())",
    "conda": "install Python packages with %pip",
    "mamba": "install Python packages with %pip",
    "capture": "bind the output instead: lines = !cmd, or use contextlib.redirect_stdout",
    "html": "display it: from IPython.display import HTML, display; display(HTML(text))",
    "markdown": "display it: from IPython.display import Markdown, display; display(Markdown(text))",
    "debug": "use the debug tool",
    "pdb": "use the debug tool",
    "prun": "profile with cProfile: import cProfile; cProfile.run('f()')",
    "config": "IPython configuration is not available; set options in plain Python",
}


def _unknown(magic: MagicLine) -> MagicError:
    advice = _ADVICE.get(magic.name)
    if advice is None:
        known = ", ".join(f"%{name}" for name in sorted(LINE_MAGICS))
        cells = ", ".join(f"%%{name}" for name in sorted(CELL_MAGICS))
        advice = f"eval rewrites {known}, !cmd, {cells}; write plain Python instead"
    return magic.error("not supported in eval", advice)
