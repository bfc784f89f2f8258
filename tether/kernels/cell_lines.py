"""Where a cell's statements begin: the lines an IPython idiom may stand on.

A magic (`%cd /tmp`) or shell escape (`!ls`) is only a magic when it starts a statement.
The same text inside a triple-quoted string, a template literal or an open bracket is
data or an operand (`x = (a\\n% b)` is a modulo), so it must be left alone. Regexes on raw
lines cannot tell these apart; a tokenizer can.

Python: the standard `tokenize` module yields the first token of every logical line. Lines
are tokenized without their indentation: where a statement begins depends only on
strings, brackets and backslashes, and without INDENT/DEDENT a tokenizer can start at any
statement boundary (no IndentationError for a fragment). That matters because a magic
line is not Python and may hold an unbalanced quote or bracket (`!echo it's`) that would
derail everything after it: once one is found, a fresh tokenizer starts on the next line.
One pass over the cell, and none at all past the last line that could be an idiom.

JavaScript/TypeScript: no tokenizer in the standard library, so `JsScanner` walks the
characters, tracking strings, template literals (with `${}` nesting), comments, regex
literals (by the previous significant character, the usual heuristic) and open
parentheses/brackets, line by line. The caller decides at each line start whether the line
is a magic before its characters are scanned, so a magic line never disturbs the state.
"""

from __future__ import annotations

import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


def indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


# ---- Python --------------------------------------------------------------------------------


def python_magic_lines(lines: list[str], is_magic: Callable[[str], bool]) -> list[int]:
    """Indexes of the lines that begin a statement and that `is_magic` accepts, in order."""
    candidates = {i for i, line in enumerate(lines) if is_magic(line)}
    found: list[int] = []
    start = 0
    while candidates and start <= max(candidates):
        index = next((i for i in _statement_starts(lines, start) if i in candidates), None)
        if index is None:
            break
        found.append(index)
        candidates = {i for i in candidates if i > index}
        start = index + 1  # the idiom ends its line: the next one starts clean
    return found


def _statement_starts(lines: list[str], start: int) -> Iterator[int]:
    """Indexes of the lines from `start` on where a logical line begins, as far as the
    tokenizer gets. Python 3.11's tokenizer passes `!` and `$` as ERRORTOKEN; newer ones
    may raise on them instead, so a failure where a statement was due still reports it."""
    unindented = (line.lstrip(" \t") for line in lines[start:])
    skipped = (tokenize.NL, tokenize.COMMENT)
    at_start = True
    try:
        for token in tokenize.generate_tokens(lambda: next(unindented, "")):
            if token.type in skipped:
                continue
            if token.type == tokenize.NEWLINE:
                at_start = True
            elif token.type == tokenize.ENDMARKER:
                return
            elif at_start:
                at_start = False
                yield start + token.start[0] - 1
    except tokenize.TokenError as error:
        if at_start and isinstance(error.args[1], tuple):
            yield start + error.args[1][0] - 1
    except SyntaxError as error:  # newer tokenizers' refusals
        if at_start and error.lineno:
            yield start + error.lineno - 1


def python_string_continuations(lines: list[str]) -> set[int]:
    """Indexes of the lines that begin inside a multi-line string: their leading
    whitespace is string content, so re-indenting them would change the program."""
    unindented = (line.lstrip(" \t") for line in lines)
    inside: set[int] = set()
    try:
        for token in tokenize.generate_tokens(lambda: next(unindented, "")):
            first, last = token.start[0] - 1, token.end[0] - 1
            if token.type == tokenize.STRING or tokenize.tok_name[token.type].startswith("FSTRING"):
                inside.update(range(first + 1, last + 1))
    except (tokenize.TokenError, SyntaxError):
        pass
    return inside


# ---- JavaScript / TypeScript ---------------------------------------------------------------

# after one of these a `/` starts a regex literal, and a new line continues the expression
_OPERATOR_TAIL = set("=+-*/%&|^!~?:,.<>([{;")
_CONTINUES_EXPRESSION = set("=+-*/%&|^!~?:,.<>([")
_REGEX_AFTER_WORDS = {
    "return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void",
    "throw", "yield", "await", "instanceof",
}  # fmt: skip
_CODE_RUN = re.compile(r"[^'\"`/()\[\]{}]+")
_WORD_TAIL = re.compile(r"[A-Za-z0-9_$]+$")
_STRING_STOPS = {"'": re.compile(r"[\\']"), '"': re.compile(r'[\\"]')}
_TEMPLATE_STOPS = re.compile(r"[\\`]|\$\{")


@dataclass
class JsScanner:
    """Line-by-line lexical state of JavaScript/TypeScript source (see the module doc)."""

    # each frame is "code" (with its `{` depth), "template" or "regex-class"
    modes: list[str] = field(default_factory=lambda: ["code"])
    braces: list[int] = field(default_factory=lambda: [0])
    depth: int = 0  # open ( and [ in code
    quote: str = ""  # inside a '...' or "..." string
    block_comment: bool = False
    regex: bool = False
    last: str = ""  # last significant character of code
    last_word: str = ""

    def at_statement_start(self) -> bool:
        """A new line here begins a statement: nothing open, no operator pending."""
        return (
            self.modes == ["code"]
            and self.depth == 0
            and not (self.quote or self.block_comment or self.regex)
            and self.last not in _CONTINUES_EXPRESSION
        )

    def feed_line(self, line: str) -> int | None:
        """Scan one line; return the column where a `//` comment starts on it, if any."""
        i = 0
        while i < len(line):
            step, comment = self._step(line, i)
            if comment:
                return i
            i += step
        if self.quote and not line.rstrip("\n").endswith("\\"):
            self.quote = ""  # an unterminated string ends at the line's end
        if self.regex:  # so did a `/` misread as a regex: limit the damage to its line
            self.regex = False
            while self.modes[-1] == "regex-class":
                self.modes.pop()
        return None

    def _step(self, line: str, i: int) -> tuple[int, bool]:
        """Consume from `i`: a whole run of plain text at once, else one token's start."""
        if self.block_comment:
            end = line.find("*/", i)
            self.block_comment = end < 0
            return (len(line) if end < 0 else end + 2) - i, False
        if self.quote:
            stop = _STRING_STOPS[self.quote].search(line, i)
            if stop is None:
                return len(line) - i, False
            return stop.start() - i + self._in_string(stop.group())[0], False
        if self.regex:
            return self._in_regex(line[i])
        if self.modes[-1] == "template":
            stop = _TEMPLATE_STOPS.search(line, i)
            if stop is None:
                return len(line) - i, False
            at = stop.start()
            return at - i + self._in_template(line[at], line[at : at + 2])[0], False
        run = _CODE_RUN.match(line, i)
        if run:
            self._plain(run.group())
            return run.end() - i, False
        return self._in_code(line[i], line[i : i + 2])

    def _in_string(self, c: str) -> tuple[int, bool]:
        if c == "\\":
            return 2, False
        if c == self.quote:
            self.quote = ""
            self._significant(c)
        return 1, False

    def _in_regex(self, c: str) -> tuple[int, bool]:
        if c == "\\":
            return 2, False
        if self.modes[-1] == "regex-class":
            if c == "]":
                self.modes.pop()
        elif c == "[":
            self.modes.append("regex-class")
        elif c == "/":
            self.regex = False
            self._significant(c)
            self.last = "x"  # a regex literal is an operand
        return 1, False

    def _in_template(self, c: str, pair: str) -> tuple[int, bool]:
        if c == "\\":
            return 2, False
        if c == "`":
            self.modes.pop()
            self.braces.pop()
            self._significant(c)
        elif pair == "${":
            self.modes.append("code")
            self.braces.append(0)
            return 2, False
        return 1, False

    def _in_code(self, c: str, pair: str) -> tuple[int, bool]:
        if pair == "//":
            return 0, True
        if pair == "/*":
            self.block_comment = True
            return 2, False
        if c in "'\"":
            self.quote = c
        elif c == "`":
            self.modes.append("template")
            self.braces.append(0)
        elif c == "/" and (self.last in _OPERATOR_TAIL or not self.last or self._word_before()):
            self.regex = True
        elif c in "([":
            self.depth += 1
        elif c in ")]":
            self.depth = max(0, self.depth - 1)
        elif c == "{":
            self.braces[-1] += 1
        elif c == "}":
            if self.braces[-1] == 0 and len(self.modes) > 1:
                self.modes.pop()  # the end of a template's ${ }
                self.braces.pop()
                return 1, False
            self.braces[-1] = max(0, self.braces[-1] - 1)
        self._significant(c)
        return 1, False

    def _word_before(self) -> bool:
        return self.last_word in _REGEX_AFTER_WORDS and self.last.isalpha()

    def _plain(self, text: str) -> None:
        """A run of code without quotes, slashes or brackets: only its end matters."""
        text = text.rstrip()
        if text:
            self.last = text[-1]
            word = _WORD_TAIL.search(text)
            self.last_word = word.group() if word else ""

    def _significant(self, c: str) -> None:
        self.last, self.last_word = c, ""


def javascript_magic_lines(lines: list[str], is_magic: Callable[[str], bool]) -> list[int]:
    """Indexes of the lines that begin a statement and that `is_magic` accepts, in order."""
    candidates = {i for i, line in enumerate(lines) if line.strip() and is_magic(line)}
    scanner = JsScanner()
    found = []
    for index, line in enumerate(lines[: max(candidates, default=-1) + 1]):
        if index in candidates and scanner.at_statement_start():
            found.append(index)
            scanner.last = ";"  # the translation ends its statement
            continue
        scanner.feed_line(line)
    return found


def javascript_code_end(text: str) -> str:
    """`text` without a trailing `//` comment (so code can be appended on the same line)."""
    scanner = JsScanner()
    column = scanner.feed_line(text)
    return (text if column is None else text[:column]).rstrip()
