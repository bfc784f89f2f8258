"""tether: the built-in, server-bound tools of a coding-agent runtime, each backed by a
supervised actor. The public API:

    from tether import Runtime, Surface, ToolResult
    with Runtime.start() as rt:
        run = rt.open_run("conv-1", workdir="checkout")
        res = run.call("lsp", {...})
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.tools.results import ToolResult
from tether.tools.spec import Surface, Tier

if TYPE_CHECKING:
    from tether.run import Run
    from tether.runtime import Runtime

__all__ = ["Run", "Runtime", "Surface", "Tier", "ToolResult"]


def __getattr__(name: str) -> type[Runtime] | type[Run]:
    # Runtime and Run load lazily: importing tether must not boot (or patch) thespian, and
    # must not fail while a part of the package is still being written.
    if name == "Runtime":
        from tether.runtime import Runtime

        return Runtime
    if name == "Run":
        from tether.run import Run

        return Run
    raise AttributeError(f"module 'tether' has no attribute {name!r}")
