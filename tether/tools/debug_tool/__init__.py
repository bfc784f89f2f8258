"""The `debug` tool (exec): drive a debugger (SPEC.md "debug").

Modules: `actions` (the ops: validated, resolved, sent to the run's debug session actor,
its answer rendered; the run's kept breakpoints), `render` (what the model reads of an
answer). The registry needs only `specs()`.
"""

from tether.tools.debug_tool.actions import FAMILY, specs

__all__ = ["FAMILY", "specs"]
