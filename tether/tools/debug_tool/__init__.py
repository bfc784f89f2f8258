"""The `debug` tool (exec): drive a debugger (SPEC.md "debug").

Modules: `actions` (the ops: validated, resolved, sent to the run's debug session actor,
its answer rendered), `kept` (what the run keeps: its breakpoints, sent with every
launch), `render` (what the model reads of an answer), `specs` (the tool's description
and schema). The registry needs only `specs()`.
"""

from tether.tools.debug_tool.kept import FAMILY
from tether.tools.debug_tool.specs import specs

__all__ = ["FAMILY", "specs"]
