"""IPython idioms rewritten into plain code before a cell runs: `rewrite(language, code)`.

Models type notebook reflexes - `%pip install x`, `!ls`, `%%bash`, `%cd` - into a
persistent interpreter. Rather than lean on IPython's own transformers (absent in Deno,
and whose `%pip` leaves stale modules behind), eval turns each idiom into a call of a
`_tether_*` helper the kernel got from `prelude(language)`, one line for one line so a
traceback's line numbers still match the cell. An idiom is recognised only where a
statement begins (`cell_lines`), never inside a string or an open bracket. One eval
cannot run raises `MagicError` naming the line and what to write instead, before the
kernel sees the cell.

The tables of what becomes what: `magics_python` and `magics_javascript`.
"""

from __future__ import annotations

import re

from tether.kernels.magic_syntax import MagicError, Rewritten, language_of
from tether.kernels.magics_javascript import rewrite_javascript
from tether.kernels.magics_python import rewrite_python
from tether.kernels.prelude import prelude

__all__ = ["MagicError", "Rewritten", "prelude", "rewrite"]

# a line starting with % or !, or with `names = %` / `names = !`: only then is a look worth it
_MAYBE_IDIOM = re.compile(r"^[ \t]*(?:[A-Za-z_][\w., \t]*=[ \t]*)?[%!]", re.MULTILINE)


def rewrite(language: str, code: str) -> Rewritten:
    """`code` with its IPython idioms turned into plain `language` code (python or
    javascript); raises MagicError for an idiom that has no plain equivalent."""
    python = language_of(language) == "python"
    if not _MAYBE_IDIOM.search(code):  # most cells: no line could be an idiom
        return Rewritten(code)
    lines = code.splitlines(keepends=True)
    if python:
        return rewrite_python(lines)
    return rewrite_javascript(lines)
