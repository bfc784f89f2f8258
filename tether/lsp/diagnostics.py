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
from typing import Any

from tether.lsp.positions import from_character

DEFAULT_CAP = 2.5
SEVERITY_NAMES = {1: "error", 2: "warning", 3: "info", 4: "hint"}


def normalize(
    path: Path, items: list[dict[str, Any]], line_of: Callable[[Path, int], str], encoding: str
) -> list[dict[str, Any]]:
    """LSP Diagnostic[] -> records {path, line, column, end_line, end_column (1-based,
    code points), severity (1..4), code, message, source}."""
    out = []
    for d in items or []:
        r = d.get("range") or {}
        s, e = r.get("start") or {}, r.get("end") or {}
        sl, el = int(s.get("line", 0)), int(e.get("line", s.get("line", 0)))
        code = d.get("code")
        if isinstance(code, dict):  # never in 3.17, but some servers send {value, target}
            code = code.get("value")
        out.append(
            {
                "path": str(path),
                "line": sl + 1,
                "column": from_character(line_of(path, sl), int(s.get("character", 0)), encoding)
                + 1,
                "end_line": el + 1,
                "end_column": from_character(
                    line_of(path, el), int(e.get("character", 0)), encoding
                )
                + 1,
                "severity": int(d.get("severity") or 1),
                "code": "" if code is None else str(code),
                "message": str(d.get("message", "")),
                "source": str(d.get("source") or ""),
            }
        )
    out.sort(key=lambda x: (x["line"], x["column"]))
    return out


@dataclass
class Published:
    version: int | None
    items: list[dict[str, Any]]
    at: float


@dataclass
class FreshWait:
    """One call waiting for fresh diagnostics of `targets` (uri -> version we sent)."""

    wid: int
    token: Any
    targets: dict[str, int]
    started: float
    cap_at: float
    pull: bool
    fresh: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # uri -> raw items
    others: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # other files
    candidate_at: dict[str, float] = field(default_factory=dict)  # unversioned publish seen
    before: dict[str, list[dict[str, Any]] | None] = field(default_factory=dict)  # others
    before_known: bool = False  # push: `before` snapshots every published document
    latest: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # last unversioned
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
        self, uri: str, version: int | None, items: list[dict[str, Any]], now: float
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
