"""Jupyter kernels' cells as a library: what goes in, and what comes out.

Pure code (no actors, no kernel processes) that the kernel actor runs around each cell:

- `magics`: `rewrite(language, code)` turns IPython idioms (`%pip`, `!cmd`, `%%bash`, ...)
  into plain Python or Deno code before the cell runs, or raises `MagicError`;
  `prelude(language)` is the code a fresh kernel runs once to define the helpers the
  rewritten cells call (plus inline matplotlib and the DataFrame table formatter).
- `outputs`: `CellOutput` accumulates a cell's iopub messages and `render(caps)` gives
  the text, images, notes on what was cut, and a clean traceback (`RenderedCell`).
- `session`: `KernelSession`, what happens to a kernel's cells (sans-io: fed the kernel's
  messages and timers, it acts through a small `CellIO`); the kernel actor drives it.

It imports nothing of actors, supervisors, the runtime or the tools (tests/test_layout.py).
"""

from tether.kernels.caps import OutputCaps
from tether.kernels.magics import MagicError, Rewritten, prelude, rewrite
from tether.kernels.outputs import CellOutput, Image, RenderedCell

__all__ = [
    "CellOutput",
    "Image",
    "MagicError",
    "OutputCaps",
    "RenderedCell",
    "Rewritten",
    "prelude",
    "rewrite",
]
