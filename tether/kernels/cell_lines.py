"""Where a cell's statements begin: the lines an IPython idiom may stand on.

A magic (`%cd /tmp`) or shell escape (`!ls`) is only a magic when it starts a statement.
The same text inside a triple-quoted string, a template literal or an open bracket is
data or an operand (`x = (a\\n% b)` is a modulo), so it must be left alone. Regexes on raw
lines cannot tell these apart; a tokenizer can.

Python: the standard `tokenize` module yields the first token of every logical line. A
magic line is not Python and may itself hold an unbalanced quote or bracket (`!echo it's`)
that would derail everything after it, so each magic line found is masked (replaced by
`pass` at its indentation) and the cell is tokenized again from the top: one pass per
magic line, each one clean up to the line it finds.

JavaScript/TypeScript: no tokenizer in the standard library, so `JsScanner` walks the
characters, tracking strings, template literals (with `${}` nesting), comments, regex
literals (by the previous significant character, the usual heuristic) and open
parentheses/brackets, line by line. The caller decides at each line start whether the line
is a magic before its characters are scanned, so a magic line never disturbs the state.
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


def indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


# ---- Python --------------------------------------------------------------------------------


def python_magic_lines(lines: list[str], is_magic: Callable[[str], bool]) -> list[int]:
    """Indexes of the lines that begin a statement and that `is_magic` accepts, in order."""
    masked = list(lines)
    found: list[int] = []
    while True:
        after = found[-1] if found else -1
        index = next(
            (i for i in _statement_starts(masked) if i > after and is_magic(lines[i])), None
        )
        if index is None:
            return found
        found.append(index)
        masked[index] = indentation(lines[index]) + "pass\n"


def _statement_starts(lines: list[str]) -> Iterator[int]:
    """Indexes of the lines where a logical line begins, until the tokenizer gives up.

    Python 3.11's tokenizer passes `!` and `$` as ERRORTOKEN; newer ones may raise on
    them instead, so a failure on a line where a statement was due to begin still
    reports that line."""
    source = io.StringIO("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    skipped = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    at_start = True
    try:
        for token in tokenize.generate_tokens(source.readline):
            if token.type in skipped:
                continue
            if token.type == tokenize.NEWLINE:
                at_start = True
            elif token.type == tokenize.ENDMARKER:
                return
            elif at_start:
                at_start = False
                yield token.start[0] - 1
    except tokenize.TokenError as error:
        if at_start and isinstance(error.args[1], tuple):
            yield error.args[1][0] - 1
    except SyntaxError as error:  # IndentationError, and newer tokenizers' refusals
        if at_start and error.lineno:
            yield error.lineno - 1


def python_string_continuations(lines: list[str]) -> set[int]:
    """Indexes of the lines that begin inside a multi-line string: their leading
    whitespace is string content, so re-indenting them would change the program."""
    source = io.StringIO("".join(lines))
    inside: set[int] = set()
    try:
        for token in tokenize.generate_tokens(source.readline):
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
        c, pair = line[i], line[i : i + 2]
        if self.block_comment:
            if pair == "*/":
                self.block_comment = False
                return 2, False
            return 1, False
        if self.quote:
            return self._in_string(c)
        if self.regex:
            return self._in_regex(c)
        if self.modes[-1] == "template":
            return self._in_template(c, pair)
        return self._in_code(c, pair)

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
        if not c.isspace():
            self._significant(c)
        return 1, False

    def _word_before(self) -> bool:
        return self.last_word in _REGEX_AFTER_WORDS and self.last.isalpha()

    def _significant(self, c: str) -> None:
        if c.isalnum() or c in "_$":
            self.last_word = self.last_word + c if (self.last.isalnum() or self.last in "_$") else c
        else:
            self.last_word = ""
        self.last = c


def javascript_magic_lines(lines: list[str], is_magic: Callable[[str], bool]) -> list[int]:
    """Indexes of the lines that begin a statement and that `is_magic` accepts, in order."""
    scanner = JsScanner()
    found = []
    for index, line in enumerate(lines):
        if scanner.at_statement_start() and line.strip() and is_magic(line):
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
