"""Language servers as a library: everything between a tool call and a server but the actor.

Pure code, imported by the host-side tools (`tether.tools.lsp_tool`) and by the thin actor
shell `tether.actors.language_server` (one `LanguageServerActor` per (server, root)).
It imports nothing of actors, supervisors, the runtime or the tools (tests/test_layout.py).

Modules, one concept each: `servers` (the table + the intersection rule), `checkers` (the
project checkers' output parsers), `jsonrpc` (client state, server->client requests),
`narrow` (a server's JSON read as the shape the code expects),
`positions` (line + symbol -> position), `documents` (open/version/sync), `diagnostics`
(normalising + freshness), `workspace_edit` (all-or-nothing WorkspaceEdit), `session`
(the sans-io state machine: a subpackage). The model-facing text and the per-run ledger
live with the tool (`tether.tools.lsp_tool.render`, `.ledger`).
"""
