"""The `lsp` tool (read), `lsp_rename` (write) and diagnostics-on-write wrappers.

Host side of the language-server family (SPEC.md "lsp", "lsp_rename", "Diagnostics on
write"). A handler validates and resolves everything it can without a server - the file,
the line + symbol position, which server and which root (the intersection rule: root
marker AND binary, decided now, at call time) - then sends one Call to the
`language_server` actor for (server, root) and renders the reply for a model, with the
same content as records in `ToolResult.data`.

`diagnostics "*"` runs the project's own checker (basedpyright --outputjson, tsc
--noEmit, cc -fsyntax-only, go vet ./..., cargo check, dart analyze) as the subprocess of a
`checker` actor of the tree, which parses its output into the same records.

The wrappers fold only NEW diagnostics into the result of write / edit / apply_patch /
resolve, judged by the run's ledger (`ctx.state["lsp"]`): key (severity, code, message),
position excluded, counted per file, forgotten when gone.

Modules: `actions` (the actions on a file or query, and lsp_rename), `status` (status,
reload), `checker` (diagnostics "*"), `on_write` (the wrappers), `targets` (which server
answers for a file; one call to its actor), `model_records` (actor records -> model
records), `render` (model-facing text), `ledger` (the run's "already reported"
diagnostics), `specs` (the declarations). The registry needs only `specs()` and
`wrappers()`.
"""

from tether.tools.lsp_tool.on_write import FAMILY, wrappers
from tether.tools.lsp_tool.specs import specs

__all__ = ["FAMILY", "specs", "wrappers"]
