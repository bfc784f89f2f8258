"""The documents open in the server, and when each last changed there.

`Documents` knows the texts and builds the messages; `Texts` sends them (through the
io port) and remembers when a document was last sent (`changed_at`, uri -> time): a push
server's unversioned publish is fresh only if it came after that and went quiet.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tether.json_types import JSONObject
from tether.lsp.documents import Document, Documents, uri_of
from tether.lsp.positions import to_character
from tether.lsp.session.table import SessionIO


class Texts:
    def __init__(self, docs: Documents, io: SessionIO, now: Callable[[], float]) -> None:
        self.docs, self.io, self.now = docs, io, now
        self.changed_at: dict[str, float] = {}  # uri -> when we last sent a change/open

    def open(self, path: Path) -> Document | str:
        """`path`, open in the server with its current text; or why it cannot be."""
        doc, msgs = self.docs.ensure_open(path)
        self._send(msgs)
        if msgs:
            self.changed_at[uri_of(path)] = self.now()
        if doc is None:
            return self.docs.problem(path) or f"cannot read {path}: no such file"
        return doc

    def ensure_open(self, path: Path) -> None:
        """Open `path` for the server's sake (a warm-up, a project to search): its
        diagnostics are nobody's question yet."""
        _doc, msgs = self.docs.ensure_open(path)
        self._send(msgs)

    def sync(self, paths: list[Path], created: set[Path]) -> list[Document]:
        """Send the files' new text and save them; the documents still there."""
        docs, msgs = self.docs.sync(paths, created)
        self._send(msgs)
        now = self.now()
        for d in docs:
            self.changed_at[d.uri] = now
        return docs

    def changed(self, paths: list[Path], created: set[Path]) -> None:
        """Files an edit rewrote: re-sync them (`sync`), each counted as changed now."""
        _docs, msgs = self.docs.sync(paths, created)
        self._send(msgs)
        now = self.now()
        for p in paths:
            self.changed_at[uri_of(p)] = now

    def touch(self, doc: Document) -> None:
        """Resend `doc` unchanged (a server that diagnoses on change only)."""
        self.io.write(self.docs.touch(doc))
        self.changed_at[doc.uri] = self.now()

    def version(self, uri: str) -> int:
        doc = self.docs.open.get(uri)
        return doc.version if doc else 0

    def _send(self, msgs: list[bytes]) -> None:
        for m in msgs:
            self.io.write(m)


def position(doc: Document, line0: int, char: int, encoding: str) -> JSONObject:
    """A 0-based line and code-point index as an LSP position in `encoding`."""
    lines = doc.lines
    text = lines[line0] if 0 <= line0 < len(lines) else ""
    return {"line": line0, "character": to_character(text, char, encoding)}
