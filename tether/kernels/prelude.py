"""The code a kernel runs once at start, before any cell: `prelude(language)`.

The helpers live in real source files beside this module - `python_prelude.py` (linted
and type-checked with the package, never imported by tether) and `deno_prelude.js` - and
are sent as text. Each runs under a file name of its own, so tracebacks can tell its
frames from the user's (`tracebacks.clean_traceback` drops them).
"""

from __future__ import annotations

import json
from importlib import resources

from tether.kernels.caps import OutputCaps
from tether.kernels.magic_syntax import language_of

PYTHON_PRELUDE_FILE = "<tether-prelude>"
JAVASCRIPT_PRELUDE_FILE = "tether-prelude.js"


def prelude(language: str, caps: OutputCaps | None = None) -> str:
    """Code to run once in a fresh kernel of `language` (silently, before the first cell):
    the `_tether_*` helpers rewritten idioms call, inline matplotlib and the DataFrame
    table formatter (sized by `caps`) for Python."""
    caps = caps or OutputCaps()
    if language_of(language) == "python":
        source = _source("python_prelude.py")
        install = (caps.table_rows, caps.table_columns, caps.table_cell_chars)
        scope = (
            f"{{'__name__': 'tether_prelude', '_tether_install_into': (globals(), *{install!r})}}"
        )
        return f"exec(compile({source!r}, {PYTHON_PRELUDE_FILE!r}, 'exec'), {scope})\n"
    source = _source("deno_prelude.js") + f"\n//# sourceURL={JAVASCRIPT_PRELUDE_FILE}\n"
    return f"(0, eval)({json.dumps(source)});\n"


def _source(name: str) -> str:
    return resources.files("tether.kernels").joinpath(name).read_text(encoding="utf-8")
