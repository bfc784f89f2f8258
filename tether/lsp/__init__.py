"""Language servers as a library: everything between a tool call and a server but the actor.

Pure code, imported by the host-side tools (`tether.tools.lsp`) and by the thin actor
shell `tether.actors.language_server` (one `LanguageServerActor` per (server, root)).
It imports nothing of actors, supervisors, the runtime or the tools (tests/test_layout.py).

Modules, one concept each: `servers` (the table + the intersection rule), `checkers` (the
project checkers' output parsers), `jsonrpc` (client state, server->client requests),
`positions` (line + symbol -> position), `documents` (open/version/sync), `diagnostics`
(normalising + freshness), `ledger` (per-run "already reported"), `workspace_edit`
(all-or-nothing WorkspaceEdit), `session` (the sans-io state machine: a subpackage),
`render` (model-facing text).
"""
