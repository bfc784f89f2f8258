"""One client session with one language server process: the state machine behind the actor.

Sans-io: the session never reads a pipe, sleeps or starts a timer itself. Its owner (the
`LanguageServerActor`, or a plain test harness) feeds it the server's stdout bytes, the
calls, the timers it asked for, and the process's exit; the session answers through a
small `SessionIO` (write bytes, arm a timer, settle a call: its typed reply, or an error). So the message loop of the
actor never blocks: a call either settles at once or waits in a table keyed by our own
operation id, settled by a later response, publish, or timer (its deadline).

Operations: the ops of `tether.messages.language_server_ops` (paths are absolute, positions
code-point indexes already resolved host-side from `line` + `symbol`): Navigate (definition,
type_definition, implementation, references, hover, code_actions), Hierarchy (one level of
the call or type hierarchy), DocumentSymbols, WorkspaceSymbols, Diagnostics, Sync (after a
write: sync+save+diagnose), Rename, Status; `Session._serve` dispatches them with one
`match`, and each is answered with the reply its op declares (`op.reply`, a frozen dataclass).

Layout, by composition (each part owns its state; `core.Session` holds them and routes):
`table` (the calls in progress, settled once), `link` (requests, deadline and stall
timers), `readiness` (started, warm, workspace listed: the calls waiting for each),
`texts` (open documents), `edits` (workspace edits), `serving` (what every op does around
its requests), `freshness` (diagnostics and sync, and when they are fresh), `queries`
(navigation, symbols, rename), `hierarchy` (call and type hierarchy), `records` (answers
-> records), `budgets` (per-request budgets, stalls), `capabilities` (what the client
advertises), `timers` (the timer tags of all of them: `SessionTimer`).
"""

from tether.lsp.session.capabilities import client_capabilities
from tether.lsp.session.core import Session
from tether.lsp.session.freshness import MAX_OTHER_PULLS
from tether.lsp.session.queries import NAV_METHODS
from tether.lsp.session.records import SYMBOL_KINDS, hover_text
from tether.lsp.session.table import REPLY_MARGIN, Op, SessionIO

__all__ = [
    "MAX_OTHER_PULLS",
    "NAV_METHODS",
    "REPLY_MARGIN",
    "SYMBOL_KINDS",
    "Op",
    "Session",
    "SessionIO",
    "client_capabilities",
    "hover_text",
]
