"""One client session with one language server process: the state machine behind the actor.

Sans-io: the session never reads a pipe, sleeps or starts a timer itself. Its owner (the
`LanguageServerActor`, or a plain test harness) feeds it the server's stdout bytes, the
calls, the timers it asked for, and the process's exit; the session answers through a
small `SessionIO` (write bytes, arm a timer, settle a call). So the message loop of the
actor never blocks: a call either settles at once or waits in a table keyed by our own
operation id, settled by a later response, publish, or timer (its deadline).

Operations: the ops of `tether.messages.language_server_ops` (paths are absolute, positions
code-point indexes already resolved host-side from `line` + `symbol`): Navigate (definition,
type_definition, implementation, references, hover, code_actions), Hierarchy (one level of
the call or type hierarchy), DocumentSymbols, WorkspaceSymbols, Diagnostics, Sync (after a
write: sync+save+diagnose), Rename, Status; `Session.serve` dispatches them with one `match`.

Layout: `core` (SessionCore: lifecycle, the op table, deadlines, the server's input),
`freshness` (DiagnosingSession: diagnostics and sync, and when they are fresh),
`hierarchy` (HierarchySession: call and type hierarchy), `queries` (Session: navigation,
symbols, rename), `records` (answers -> records), `capabilities` (what the client
advertises).
"""

from tether.lsp.session.capabilities import client_capabilities
from tether.lsp.session.core import REPLY_MARGIN, Op, SessionIO
from tether.lsp.session.freshness import MAX_OTHER_PULLS
from tether.lsp.session.queries import NAV_METHODS, Session
from tether.lsp.session.records import SYMBOL_KINDS, hover_text

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
