"""What every op does around its requests, in one place: open the file, check the server
offers the method, convert the position, send, retry once on a modified document, settle.

`Serving` owns no state: it holds the parts an op needs (the row, the server's
capabilities, the open texts, the wire, the table) and is handed to the parts that serve
ops (`queries`, `hierarchy`, `freshness`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tether.json_types import JSONObject
from tether.lsp.documents import Document
from tether.lsp.jsonrpc import CONTENT_MODIFIED, REQUEST_CANCELLED, Capabilities
from tether.lsp.servers import ServerRow
from tether.lsp.session.link import Answer, ServerLink
from tether.lsp.session.table import Op, OpTable
from tether.lsp.session.texts import Texts, position
from tether.messages.calls import ErrorCode


@dataclass(frozen=True)
class Serving:
    row: ServerRow
    caps: Capabilities
    texts: Texts
    link: ServerLink
    table: OpTable

    def open(self, op: Op, file: str) -> Document | None:
        """`file` open in the server (the op fails, saying why, if it cannot be read)."""
        doc = self.texts.open(Path(file))
        if isinstance(doc, str):
            self.table.fail(op, ErrorCode.BAD_REQUEST, doc)
            return None
        return doc

    def open_for(self, op: Op, method: str, path: str) -> Document | None:
        """`path`, open in the server, if the server offers `method`; else None (and the op
        has failed, saying why)."""
        if not self.supports(op, method):
            return None
        return self.open(op, path)

    def position(self, doc: Document, line0: int, char: int) -> JSONObject:
        return position(doc, line0, char, self.caps.position_encoding)

    def supports(self, op: Op, method: str) -> bool:
        if self.caps.supports(method):
            return True
        self.table.fail(
            op,
            ErrorCode.UNAVAILABLE,
            f"{self.row.name} does not offer {method} (not in its advertised capabilities)",
        )
        return False

    def response_error(self, op: Op, resp: Answer, retry: Callable[[], None]) -> bool:
        """Whether `resp` is an error (then the op is retried once or has failed)."""
        if not resp.error:
            return False
        code = resp.error.get("code")
        if code in (CONTENT_MODIFIED, REQUEST_CANCELLED) and not op.retried:
            op.retried = True  # the document changed under the request: one transparent retry
            retry()
            return True
        self.table.fail(
            op,
            ErrorCode.FAILED,
            f"{self.row.name} answered {resp.method} with an error: "
            f"{resp.error.get('message', '')} (code {code})",
        )
        return True

    def pull_supported(self) -> bool:
        return self.caps.supports("textDocument/diagnostic")
