"""The ops of the language server kind (`tether.actors.language_server`, served by
`tether.lsp.session.Session`), and the reply each one declares (`op.reply`).

Paths are absolute; a position is a 0-based line and a code-point index into it, already
resolved on the host from the model's `line` + `symbol`. The session converts it to the
server's encoding.

Replies: frozen dataclasses, one per shape of answer. A reply crosses the wire as the
`Reply` payload, its fields flat (`reply_payload`: the same keys as before replies were
typed, so any peer reading the payload reads the same thing); the host builds the op's
declared reply class back from it (`read_reply`), which checks every field is there with
its type (`Vocabulary.build`). Records inside a reply (a location, a symbol, a diagnostic)
are JSON objects, each shape a TypedDict below (a dict on the wire; the Vocabulary checks
the outer list): the host turns them into model records with the file's text.
`server_ms` is the language server's own share of the call (absent: no request was sent).
`notes` are what the model is told beside the answer: this answer came from a server
started again after an eviction (a cold start: the base actor adds it to the first reply of
a successor, `tether.capacity.usage.evicted_note`), or after its predecessor hit its memory
ceiling (`tether.capacity.ceiling`); always on the wire, so the actor can append to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal, NotRequired, TypedDict, TypeVar

from tether.json_types import JSONValue  # noqa: F401 (get_type_hints reads Wire here)
from tether.messages.calls import Wire, WireValue
from tether.messages.ops import Records, Vocabulary, op_args

LANGUAGE_SERVER = Vocabulary("language_server", idempotent=False)  # (its queries are)
REPLIES = Records("language_server reply")  # checks a reply as it comes off the wire


# --- records: the shapes inside replies -----------------------------------------------------
class Span(TypedDict):
    """A range: 1-based lines, characters in the server's negotiated encoding."""

    line: int
    character: int
    end_line: int
    end_character: int


class LocationRecord(Span):
    path: str


class SymbolRecord(LocationRecord):
    name: str
    kind: str  # "class", "function", ... (SYMBOL_KINDS)
    container: str  # the dotted name of what holds it ("" at the top)
    detail: str


class HierarchyRecord(LocationRecord):
    """A call or type hierarchy item at its name; a caller or callee has its call sites
    (`sites`, the first SITES_CAP of `sites_total`, in the file `sites_path`)."""

    name: str
    kind: str
    detail: str
    sites: NotRequired[list[Span]]
    sites_total: NotRequired[int]
    sites_path: NotRequired[str]


class CodeActionRecord(TypedDict):
    title: str
    kind: str
    preferred: bool
    files: int  # how many files its edit changes
    command: str
    diagnostics: list[str]  # the messages of the diagnostics it fixes


class DiagnosticRecord(TypedDict):
    """A server's diagnostic: 1-based lines and code-point columns, severity 1 (error)
    .. 4 (hint)."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    severity: int
    code: str
    message: str
    source: str


class RenameFile(TypedDict):
    path: str
    edits: int  # the text edits applied to it


# --- replies ------------------------------------------------------------------------------
@REPLIES.op
@dataclass(frozen=True)
class HoverReply:
    hover: str  # markdown
    server_ms: float | None = None
    notes: list[str] = field(default_factory=list)  # for the model (a cold start)


@REPLIES.op
@dataclass(frozen=True)
class LocationsReply:
    """definition, type_definition, implementation, references: the first `limit`
    locations (characters in the server's `encoding`), of `total`."""

    locations: list[LocationRecord]
    total: int
    encoding: str
    server_ms: float | None = None
    notes: list[str] = field(default_factory=list)  # for the model (a cold start)


@REPLIES.op
@dataclass(frozen=True)
class CodeActionsReply:
    actions: list[CodeActionRecord]
    server_ms: float | None = None
    notes: list[str] = field(default_factory=list)  # for the model (a cold start)


@REPLIES.op
@dataclass(frozen=True)
class HierarchyReply:
    """One level: the first `limit` items of `total` (callers or callees with their call
    sites, or types), and the item(s) the position prepared to (`origin`)."""

    items: list[HierarchyRecord]
    total: int
    origin: list[HierarchyRecord]
    encoding: str
    server_ms: float | None = None
    notes: list[str] = field(default_factory=list)  # for the model (a cold start)


@REPLIES.op
@dataclass(frozen=True)
class SymbolsReply:
    symbols: list[SymbolRecord]
    encoding: str
    server_ms: float | None = None
    notes: list[str] = field(default_factory=list)  # for the model (a cold start)


@REPLIES.op
@dataclass(frozen=True)
class DiagnosticsReply:
    """Diagnostics and Sync: each file's fresh diagnostics (None: never seen), what changed
    in other files (path -> {"before", "after"}), the files still `pending` at the cap, the
    written files that are gone (`deleted`) or refused (`skipped`: path -> why)."""

    files: dict[str, list[DiagnosticRecord] | None]
    others: dict[str, dict[str, list[DiagnosticRecord] | None]]
    pending: list[str]
    deleted: list[str]
    skipped: dict[str, str]
    waited: float  # s
    mode: Literal["pull", "push"]
    server_ms: float | None = None
    notes: list[str] = field(default_factory=list)  # for the model (a cold start)

    def changed(self) -> list[tuple[str, list[DiagnosticRecord] | None, list[DiagnosticRecord]]]:
        """The other files whose diagnostics changed: (path, before - None: never seen
        before, after)."""
        return [(p, ba.get("before"), ba.get("after") or []) for p, ba in self.others.items()]


@REPLIES.op
@dataclass(frozen=True)
class RenameReply:
    """What the applied rename wrote: files (path, edits), created, renamed ([from, to]),
    deleted; and the files the server's own edits changed during the call."""

    files: list[RenameFile]
    created: list[str]
    renamed: list[list[str]]
    deleted: list[str]
    server_edits: list[str] = field(default_factory=list)
    server_ms: float | None = None
    notes: list[str] = field(default_factory=list)  # for the model (a cold start)


@REPLIES.op
@dataclass(frozen=True)
class StatusReply:
    """The session's view (server .. messages), then the actor's own (pid .. stderr_tail);
    `reloaded`: the answer to a Reload, once the new server has initialized."""

    server: str
    root: str
    state: str
    indexing: list[str]
    error: str
    uptime: float
    encoding: str
    diagnostics_mode: Literal["pull", "push"]
    open_documents: int
    pending_requests: int
    cancelled_requests: int
    messages: list[str]
    pid: int | None = None
    binary: str = ""
    reloads: int = 0
    restarts: int = 0
    stderr_tail: str = ""
    reloaded: bool = False
    cancellation: str = ""  # how a request is cancelled (`tether.lsp.cancellation`)
    server_ms: float | None = None
    notes: list[str] = field(default_factory=list)  # for the model (a cold start)


LanguageServerReply = (
    HoverReply
    | LocationsReply
    | CodeActionsReply
    | HierarchyReply
    | SymbolsReply
    | DiagnosticsReply
    | RenameReply
    | StatusReply
)
R = TypeVar("R", bound=LanguageServerReply)


def reply_payload(reply: LanguageServerReply) -> Wire:
    """A reply as the `Reply` payload: its fields, flat (msgpack-able); `server_ms` only
    when the server was asked (as before replies were typed); `notes` always, empty or
    not (the base actor appends an eviction's cold-start note to a payload that has it)."""
    payload = op_args(reply)
    if payload["server_ms"] is None:
        del payload["server_ms"]
    return payload


def read_reply(expect: type[R], payload: Mapping[str, WireValue]) -> R:
    """The `Reply` payload back as `expect` (OpError if a field is missing or mistyped)."""
    reply: R = REPLIES.build(expect, payload)
    return reply


# --- ops ----------------------------------------------------------------------------------

NavAction = Literal[
    "definition", "type_definition", "implementation", "references", "hover", "code_actions"
]
NavReply = HoverReply | CodeActionsReply | LocationsReply


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Navigate:
    """One position query; `end_char` ends the range of code_actions; `limit` caps the
    locations that cross back (0: all)."""

    action: NavAction
    path: str
    line0: int
    char: int
    end_char: int = 0
    limit: int = 0
    idempotent: ClassVar[bool] = True  # a query: retried once on the restarted server

    @property
    def reply(self) -> type[NavReply]:
        """hover: HoverReply; code_actions: CodeActionsReply; the others: LocationsReply."""
        if self.action == "hover":
            return HoverReply
        return CodeActionsReply if self.action == "code_actions" else LocationsReply


# incoming / outgoing: call hierarchy; supertypes / subtypes: type hierarchy (LSP 3.17)
HierarchyDirection = Literal["incoming", "outgoing", "supertypes", "subtypes"]


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Hierarchy:
    """One level of the call or type hierarchy at a position: who calls the symbol there or
    what it calls, its supertypes or subtypes. `limit` caps the items that cross back (0:
    all)."""

    direction: HierarchyDirection
    path: str
    line0: int
    char: int
    limit: int = 0
    reply: ClassVar[type[HierarchyReply]] = HierarchyReply
    idempotent: ClassVar[bool] = True

    @property
    def action(self) -> str:
        """The `lsp` action it serves: call_hierarchy or type_hierarchy."""
        return "call_hierarchy" if self.direction in ("incoming", "outgoing") else "type_hierarchy"


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class DocumentSymbols:
    path: str
    reply: ClassVar[type[SymbolsReply]] = SymbolsReply
    idempotent: ClassVar[bool] = True


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class WorkspaceSymbols:
    query: str
    reply: ClassVar[type[SymbolsReply]] = SymbolsReply
    idempotent: ClassVar[bool] = True


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Diagnostics:
    """The diagnostics of one file, once fresh, or after `cap` s marked pending."""

    path: str
    cap: float = 10.0
    reply: ClassVar[type[DiagnosticsReply]] = DiagnosticsReply
    idempotent: ClassVar[bool] = True


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Sync:
    """After a write: send the files' new text (`created`: new files), save, and answer
    their fresh diagnostics and what changed in other files (`cap`: None, the default)."""

    paths: list[str]
    created: list[str] = field(default_factory=list)
    cap: float | None = None
    reply: ClassVar[type[DiagnosticsReply]] = DiagnosticsReply


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Rename:
    """Rename the symbol at the position and apply the edit, all or nothing, inside
    `confine` (the run's workspace; [] for the server's root). `write_tier`: the call comes
    from a write-tier tool (lsp_rename), so while it is served the server's own edits
    (`workspace/applyEdit`) may land too, inside the same bounds; never otherwise."""

    path: str
    line0: int
    char: int
    new_name: str
    confine: list[str] = field(default_factory=list)
    write_tier: bool = False
    reply: ClassVar[type[RenameReply]] = RenameReply


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Status:
    """The server's state, indexing, pid, restarts, stderr tail."""

    reply: ClassVar[type[StatusReply]] = StatusReply


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Reload:
    """Restart the server in the same actor; answered once the new one has initialized."""

    reply: ClassVar[type[StatusReply]] = StatusReply


LanguageServerOp = (
    Navigate
    | Hierarchy
    | DocumentSymbols
    | WorkspaceSymbols
    | Diagnostics
    | Sync
    | Rename
    | Status
    | Reload
)
