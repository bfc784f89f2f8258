"""Language servers: one `LanguageServerActor` per (server, root), shared by every run.

Modules, one concept each: `servers` (the table + the intersection rule), `jsonrpc`
(client state, server->client requests), `positions` (line + symbol -> position),
`documents` (open/version/sync), `diagnostics` (normalising + freshness), `ledger`
(per-run "already reported"), `workspace_edit` (all-or-nothing WorkspaceEdit), `session`
(the sans-io state machine: a subpackage), `actor` (the thespian shell), `render` (model-facing text).
"""

from __future__ import annotations

from tether.supervisors.spec import ChildSpec, KindSpec, Restart, Scope

KINDS: list[KindSpec] = [
    KindSpec(
        kind="language_server",
        actor_class="tether.actors.language_server.actor:LanguageServerActor",
        scope=Scope.SHARED,
        # A server that crashes is restarted (transient); five crashes in a minute and the
        # supervisor gives up, which `lsp status` reports with the last reason.
        child=ChildSpec(
            restart=Restart.TRANSIENT,
            shutdown_timeout=3.0,
            max_restarts=5,
            period=60.0,
            backoff_initial=0.1,
            backoff_max=2.0,
            idle_ttl=1800.0,
        ),
    )
]
