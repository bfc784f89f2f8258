"""Diagnostics: normalising the server's, and deciding when they are fresh.

Freshness is decided by document version, never by a fixed sleep (DESIGN.md):
- pull (`textDocument/diagnostic`, advertised statically or registered dynamically): the
  answer to a pull sent after the change is about the current text by construction;
- push only: a `publishDiagnostics` whose `version` equals the version we sent is fresh at
  once; an unversioned publish counts once it arrived after our change AND no further
  publish for that document follows within the row's quiet window (tsserver publishes
  syntax diagnostics, then semantic ones);
- under a hard cap (default 2.5 s on write): past it the document is reported "pending"
  rather than with diagnostics about an older text.

`FreshWait` is the state of one waiting call; the session feeds it events and timers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tether.json_types import JSONObject
from tether.lsp.narrow import obj, text, whole
from tether.lsp.positions import from_character
from tether.messages.calls import Call
from tether.messages.language_server_ops import DiagnosticRecord

DEFAULT_CAP = 2.5
SEVERITY_NAMES = {1: "error", 2: "warning", 3: "info", 4: "hint"}


def normalize(
    path: Path, items: list[JSONObject], line_of: Callable[[Path, int], str], encoding: str
) -> list[DiagnosticRecord]:
    """LSP Diagnostic[] -> records {path, line, column, end_line, end_column (1-based,
    code points), severity (1..4), code, message, source}."""
    out: list[DiagnosticRecord] = []
    for d in items or []:
        r = obj(d.get("range"))
        s, e = obj(r.get("start")), obj(r.get("end"))
        sl = whole(s.get("line"))
        el = whole(e.get("line"), sl)
        code = d.get("code")
        if isinstance(code, dict):  # never in 3.17, but some servers send {value, target}
            code = code.get("value")
        out.append(
            {
                "path": str(path),
                "line": sl + 1,
                "column": from_character(line_of(path, sl), whole(s.get("character")), encoding)
                + 1,
                "end_line": el + 1,
                "end_column": from_character(line_of(path, el), whole(e.get("character")), encoding)
                + 1,
                "severity": whole(d.get("severity")) or 1,
                "code": "" if code is None else str(code),
                "message": str(d.get("message", "")),
                "source": text(d.get("source")),
            }
        )
    out.sort(key=lambda x: (x["line"], x["column"]))
    return out


@dataclass
class Published:
    version: int | None
    items: list[JSONObject]
    at: float


@dataclass
class FreshWait:
    """One call waiting for fresh diagnostics of `targets` (uri -> version we sent)."""

    wid: int
    token: Call  # the call that waits
    targets: dict[str, int]
    started: float
    cap_at: float
    pull: bool
    fresh: dict[str, list[JSONObject]] = field(default_factory=dict)  # uri -> raw items
    others: dict[str, list[JSONObject]] = field(default_factory=dict)  # other files
    candidate_at: dict[str, float] = field(default_factory=dict)  # unversioned publish seen
    before: dict[str, list[JSONObject] | None] = field(default_factory=dict)  # others
    before_known: bool = False  # push: `before` snapshots every published document
    latest: dict[str, list[JSONObject]] = field(default_factory=dict)  # last unversioned
    outstanding_pulls: int = 0
    grace_armed: bool = False

    @property
    def targets_done(self) -> bool:
        return all(u in self.fresh for u in self.targets)

    @property
    def complete(self) -> bool:
        return self.targets_done and self.outstanding_pulls <= 0

    @property
    def pending(self) -> list[str]:
        return [u for u in self.targets if u not in self.fresh]

    def on_publish(
        self, uri: str, version: int | None, items: list[JSONObject], now: float
    ) -> bool:
        """Returns True when a quiet-window timer should be armed for `uri`."""
        if uri not in self.targets:
            if now >= self.started:
                self.others[uri] = items
                if uri not in self.before and self.before_known:
                    self.before[uri] = None  # first publish ever for it: nothing to compare
            return False
        want = self.targets[uri]
        if version is not None:
            if version >= want:
                self.fresh[uri] = items
                self.candidate_at.pop(uri, None)
            return False
        self.fresh.pop(uri, None)
        self.candidate_at[uri] = now
        self.latest[uri] = items
        return True

    def on_quiet(self, now: float, quiet: float) -> None:
        for uri, at in list(self.candidate_at.items()):
            if now - at >= quiet - 1e-3:
                self.fresh[uri] = self.latest[uri]
                del self.candidate_at[uri]
