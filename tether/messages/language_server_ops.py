"""The ops of the language server kind (`tether.actors.language_server`, served by
`tether.lsp.session.Session`).

Paths are absolute; a position is a 0-based line and a code-point index into it, already
resolved on the host from the model's `line` + `symbol`. The session converts it to the
server's encoding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tether.messages.ops import Vocabulary

LANGUAGE_SERVER = Vocabulary("language_server")

NavAction = Literal[
    "definition", "type_definition", "implementation", "references", "hover", "code_actions"
]


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

    @property
    def action(self) -> str:
        """The `lsp` action it serves: call_hierarchy or type_hierarchy."""
        return "call_hierarchy" if self.direction in ("incoming", "outgoing") else "type_hierarchy"


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class DocumentSymbols:
    path: str


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class WorkspaceSymbols:
    query: str


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Diagnostics:
    """The diagnostics of one file, once fresh, or after `cap` s marked pending."""

    path: str
    cap: float = 10.0


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Sync:
    """After a write: send the files' new text (`created`: new files), save, and answer
    their fresh diagnostics and what changed in other files (`cap`: None, the default)."""

    paths: list[str]
    created: list[str] = field(default_factory=list)
    cap: float | None = None


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


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Status:
    """The server's state, indexing, pid, restarts, stderr tail."""


@LANGUAGE_SERVER.op
@dataclass(frozen=True)
class Reload:
    """Restart the server in the same actor; answered once the new one has initialized."""


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
