"""Open documents as the server sees them: uri, languageId, version, text.

The server answers about the text it was sent, not about the disk; so before every query
the document is opened (`didOpen`) or, if the disk changed since we last sent it (an edit
by a tool that is not wrapped, or by the user), re-sent in full (`didChange`). The check is
a stat (mtime_ns, size), so an unchanged file costs no read. After a write the written
files go through `sync()`: full-text `didChange` with a new version, `didSave`, and
`workspace/didChangeWatchedFiles` (created / changed / deleted), so servers that watch the
disk (gopls, tsserver project files) see it too.

Only regular files within the size limit are read (`file_problem`): a FIFO would block the
actor's message loop on open, and a file of many MB stalls the server for every run on its
root. A refused file that was open is closed. A file under the session's root is read
beneath it (`tether.beneath`): its links are resolved, a path whose links lead out of the
root is not read, and the open follows no symlink, so a link swapped in after the check
cannot send an outside file's text (another run's, a secret) to the server (issue 22).

Sans-io: every method returns the notifications to write, encoded.
"""

from __future__ import annotations

import functools
import os
import stat
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from tether import beneath
from tether.atomic_files import open_regular
from tether.json_types import JSONObject
from tether.lsp.jsonrpc import Capabilities, JsonRpcClient
from tether.lsp.limits import too_large

MAX_OPEN = 200  # least recently used documents beyond this are closed

# FileChangeType (LSP 3.17)
CREATED, CHANGED, DELETED = 1, 2, 3


def uri_of(path: Path | str) -> str:
    name = os.fspath(path)
    if os.path.isabs(name):  # (a relative one depends on the working directory: not kept)
        return _absolute_uri(name)
    return Path(name).absolute().as_uri()


@functools.lru_cache(maxsize=4096)  # each call on a file asks its uri again
def _absolute_uri(name: str) -> str:
    return Path(name).as_uri()


@functools.lru_cache(maxsize=4096)  # a references answer names the same few files many times
def path_of(uri: str) -> Path:
    p = urlparse(uri)
    return Path(unquote(p.path)) if p.scheme == "file" else Path(uri)


@dataclass
class Document:
    path: Path
    uri: str
    language_id: str
    version: int
    text: str
    stamp: tuple[int, int]  # (mtime_ns, size) of the disk file when `text` was read
    _lines: list[str] | None = None
    _lines_of: int = -1  # the version `_lines` was split from

    @property
    def lines(self) -> list[str]:
        """The text split on \\n, once per version (positions and records read lines)."""
        if self._lines is None or self._lines_of != self.version:
            self._lines = self.text.split("\n")
            self._lines_of = self.version
        return self._lines


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def file_problem(path: Path, max_bytes: int | None = None) -> str | None:
    """Why `path` is not read: not a regular file, or over `max_bytes` (None: it is fine, or
    missing - the caller tells that apart)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return f"'{path}' is not a regular file (a FIFO, socket or device); it is not read"
    if max_bytes is not None and st.st_size > max_bytes:
        return too_large(str(path), st.st_size, max_bytes)
    return None


def read_text(path: Path, max_bytes: int | None = None, root: Path | None = None) -> str | None:
    """The file's text; None when it is missing, unreadable, not a regular file or larger
    than `max_bytes`. Opened without blocking and checked on the open file, so a path that
    became a FIFO after any earlier check cannot hang the caller. With `root`, a path
    lexically under it is opened beneath it, no symlink followed (`open_regular`): None
    when its links lead out of the root or one was swapped in; a path outside the root (a
    library file a definition names) is opened following no link after it was resolved."""
    where = None if root is None else beneath.root_for(path, (root,))
    try:
        with open_regular(path, follow=True, root=where) as f:
            if max_bytes is not None and os.fstat(f.fileno()).st_size > max_bytes:
                return None
            return f.read().decode("utf-8", errors="replace")
    except OSError:  # missing, unreadable, not a regular file (NotRegularFile)
        return None


class Documents:
    def __init__(
        self,
        caps: Capabilities,
        language_of: Callable[[Path], str | None],
        max_bytes: int | None = None,
        root: Path | None = None,
    ) -> None:
        self.caps = caps
        self.language_of = language_of
        self.max_bytes = max_bytes
        self.root = root  # (files under it are read beneath it: `read_text`)
        self.open: OrderedDict[str, Document] = OrderedDict()  # by uri, LRU order
        self._disk_lines: dict[Path, tuple[tuple[int, int], list[str]]] = {}

    def get(self, path: Path) -> Document | None:
        return self.open.get(uri_of(path))

    def ensure_open(self, path: Path) -> tuple[Document | None, list[bytes]]:
        """Open `path` or bring it up to date with the disk. (None, []) when unreadable;
        (None, [didClose]) when it was open and is now refused (`problem` says why)."""
        uri = uri_of(path)
        doc = self.open.get(uri)
        if self.problem(path) is not None:
            if doc is None:
                return None, []
            del self.open[uri]
            return None, [self._close_msg(doc)]
        stamp = _stamp(path)
        if doc is not None:
            self.open.move_to_end(uri)
            if stamp is None or stamp == doc.stamp:
                return doc, []
            text = read_text(path, self.max_bytes, self.root)
            if text is None:
                return doc, []
            doc.stamp = stamp
            if text == doc.text:
                return doc, []
            return doc, [self._change(doc, text)]
        text = read_text(path, self.max_bytes, self.root) if stamp is not None else None
        if text is None:
            return None, []
        doc = Document(path, uri, self.language_of(path) or "plaintext", 1, text, stamp or (0, 0))
        self.open[uri] = doc
        out = [
            JsonRpcClient.notify(
                "textDocument/didOpen",
                {
                    "textDocument": {
                        "uri": uri,
                        "languageId": doc.language_id,
                        "version": doc.version,
                        "text": text,
                    }
                },
            )
        ]
        while len(self.open) > MAX_OPEN:
            _, old = self.open.popitem(last=False)
            out.append(self._close_msg(old))
        return doc, out

    def problem(self, path: Path) -> str | None:
        """Why `path` is not given to the server (see `file_problem`); None: it may be."""
        return file_problem(path, self.max_bytes)

    def _change(self, doc: Document, text: str) -> bytes:
        doc.version += 1
        doc.text = text
        # A change event without a range replaces the whole document; valid for servers that
        # asked for incremental sync too (LSP 3.17 TextDocumentContentChangeEvent).
        return JsonRpcClient.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": doc.uri, "version": doc.version},
                "contentChanges": [{"text": text}],
            },
        )

    def touch(self, doc: Document) -> bytes:
        """Re-send the same text under a new version: makes a push server diagnose again."""
        return self._change(doc, doc.text)

    def _close_msg(self, doc: Document) -> bytes:
        return JsonRpcClient.notify("textDocument/didClose", {"textDocument": {"uri": doc.uri}})

    def _save_msg(self, doc: Document) -> bytes:
        params: JSONObject = {"textDocument": {"uri": doc.uri}}
        if self.caps.save_includes_text():
            params["text"] = doc.text
        return JsonRpcClient.notify("textDocument/didSave", params)

    def sync(
        self, paths: list[Path], created: set[Path] | frozenset[Path] = frozenset()
    ) -> tuple[list[Document], list[bytes]]:
        """After a write: bring every path up to date, save it, tell the watchers.

        `created`: paths the write created (announced as new files). Returns the documents
        now open for the written paths (deleted ones are closed) and the notifications to
        send, in order.
        """
        out: list[bytes] = []
        docs: list[Document] = []
        changes: list[JSONObject] = []
        for path in paths:
            uri = uri_of(path)
            doc = self.open.get(uri)
            if _stamp(path) is None:  # deleted
                if doc is not None:
                    del self.open[uri]
                    out.append(self._close_msg(doc))
                changes.append({"uri": uri, "type": DELETED})
                continue
            was_open = doc is not None
            doc, msgs = self.ensure_open(path)
            out.extend(msgs)  # a refused file is closed, and is neither synced nor deleted
            if doc is None:
                continue
            if msgs or was_open:
                out.append(self._save_msg(doc))
            if path in created:
                # a new file (new module: import resolution changes). An open document that
                # changed is not announced again: the server has its text from didChange,
                # and pyright answers a watched-file change with a costly re-scan.
                changes.append({"uri": uri, "type": CREATED})
            docs.append(doc)
        if changes:
            out.append(
                JsonRpcClient.notify("workspace/didChangeWatchedFiles", {"changes": [*changes]})
            )
        return docs, out

    def line(self, path: Path, line0: int) -> str:
        """One line of a file as the server sees it (open text, else the disk)."""
        doc = self.open.get(uri_of(path))
        if doc is not None:
            lines = doc.lines
        else:
            stamp = _stamp(path)
            cached = self._disk_lines.get(path)
            if cached is None or cached[0] != stamp:
                text = read_text(path, self.max_bytes, self.root) or ""
                lines = text.split("\n")
                if len(self._disk_lines) > 256:
                    self._disk_lines.clear()
                self._disk_lines[path] = (stamp or (0, 0), lines)
            else:
                lines = cached[1]
        if 0 <= line0 < len(lines):
            return lines[line0].rstrip("\r")
        return ""
