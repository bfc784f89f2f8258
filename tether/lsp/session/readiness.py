"""When the server may be asked: started, warm, and (for a workspace search) done listing.

Three gates, each with the calls waiting at it:
- `queued`: before `initialize` is answered (and, for a server that registers pull
  diagnostics late, before that registration, or `Registration` past its wait);
- `held`: before the warm-up on a first file is over (`ServerRow.warmup_progress`: the
  progress it reports then has ended, none began within `WarmWindow`, or `WarmCap`);
- `awaiting_load`: a workspace search, before the server logged that it listed the
  workspace (`ServerRow.workspace_loaded_log`; `LoadCap`: asked anyway, later).
The gates return the calls they release; the session serves them (those still live).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from tether.json_types import JSONObject
from tether.lsp.narrow import obj
from tether.lsp.servers import ServerRow, sample_file
from tether.lsp.session.table import Op
from tether.lsp.session.texts import Texts
from tether.lsp.session.timers import LoadCap, ReadinessTag, Registration, WarmCap, WarmWindow
from tether.messages.language_server_ops import (
    Diagnostics,
    DocumentSymbols,
    Hierarchy,
    Navigate,
    Rename,
    WorkspaceSymbols,
)


class Readiness:
    def __init__(
        self,
        row: ServerRow,
        root: Path,
        texts: Texts,
        after: Callable[[float, ReadinessTag], None],
        arm: Callable[[float], None],
    ) -> None:
        self.row, self.root, self.texts = row, root, texts
        self.after = after  # io.after: a timer tag of ours, handed back to on_timer
        self.arm = arm  # make sure the deadline timer fires by then (a waiting call's)
        self.state = "starting"  # starting | registering | ready | failed | exited
        self.error_text = ""
        self.progress: dict[int | str, str] = {}  # active $/progress token -> title
        self.queued: list[Op] = []
        self.warm = not row.warmup_progress  # see ServerRow.warmup_progress
        self._warming = False
        self._warm_token: int | str | None = None
        self.held: list[Op] = []
        self._loaded_re = re.compile(row.workspace_loaded_log) if row.workspace_loaded_log else None
        self.workspace_loaded = self._loaded_re is None
        self.awaiting_load: list[Op] = []
        self._load_capped = False

    # --- start ----------------------------------------------------------------------------
    @property
    def starting(self) -> bool:
        return self.state in ("starting", "registering")

    @property
    def unusable(self) -> bool:
        return self.state in ("failed", "exited")

    def queue(self, op: Op) -> None:
        self.queued.append(op)
        self.arm(op.deadline)

    def registering(self) -> None:
        """initialize is answered; the pull registration may still come."""
        self.state = "registering"
        self.after(self.row.await_pull_registration, Registration())

    def ready(self) -> list[Op]:
        self.state = "ready"
        queued, self.queued = self.queued, []
        return queued

    def failed(self, why: str) -> list[Op]:
        """The server cannot serve (did not start, corrupt output, stuck): the calls queued
        for its start, to fail."""
        self.state = "failed"
        self.error_text = why
        queued, self.queued = self.queued, []
        return queued

    # --- warm-up --------------------------------------------------------------------------
    def hold(self, op: Op) -> None:
        """Hold `op` until the server is warm, starting the warm-up if it has not begun."""
        self.held.append(op)
        self.arm(op.deadline)
        warm_path = None if self._warming else self._warm_path(op)
        if warm_path is not None:
            self._warming = True
            self.texts.ensure_open(Path(warm_path))
            self.after(self.row.warmup_window, WarmWindow())
            self.after(self.row.startup_timeout, WarmCap())
        elif not self._warming:
            self.after(self.row.warmup_window, WarmWindow())
            self._warming = True

    def _warm_path(self, op: Op) -> str | None:
        """The file whose opening warms the server up for `op`: its own, or for a workspace
        search on a server that needs an open document, one file of the root."""
        match op.request:
            case Navigate(path=path) | DocumentSymbols(path=path) | Diagnostics(path=path):
                return path
            case Rename(path=path) | Hierarchy(path=path):
                return path
            case WorkspaceSymbols() if self.row.symbols_need_open and not self.texts.docs.open:
                sample = sample_file(self.row, self.root)
                return str(sample) if sample else None
        return None

    def _warmed(self) -> list[Op]:
        if self.warm:
            return []
        self.warm = True
        held, self.held = self.held, []
        return held

    def on_progress(self, params: JSONObject) -> list[Op]:
        """A `$/progress`: the calls it releases (the warm-up's progress ended)."""
        v = obj(params.get("value"))
        kind = v.get("kind")
        token = params.get("token")
        if not isinstance(token, int | str):  # a ProgressToken is one of these (LSP 3.17)
            return []
        if kind == "begin":
            title = str(v.get("title") or "working")
            self.progress[token] = title
            if not self.warm and any(title.startswith(t) for t in self.row.warmup_progress):
                self._warm_token = token
        elif kind == "end":
            self.progress.pop(token, None)
            if not self.warm and self._warm_token is not None and token == self._warm_token:
                return self._warmed()
        return []

    # --- the workspace listing ------------------------------------------------------------
    def await_load(self, op: Op) -> bool:
        """Hold `op` until the server has listed the workspace (False: it has)."""
        if self.workspace_loaded:
            return False
        if not self._load_capped:  # a server that never logs it is asked anyway, later
            self._load_capped = True
            self.after(self.row.startup_timeout, LoadCap())
        if op not in self.awaiting_load:
            self.awaiting_load.append(op)
            self.arm(op.deadline)
        return True

    def on_log(self, message: str) -> list[Op]:
        """A log or shown message: the calls it releases (it says the workspace is listed)."""
        if self._loaded_re is not None and not self.workspace_loaded:
            if self._loaded_re.search(message):
                return self._loaded()
        return []

    def _loaded(self) -> list[Op]:
        self.workspace_loaded = True
        waiting, self.awaiting_load = self.awaiting_load, []
        return waiting

    # --- timers and settled calls ---------------------------------------------------------
    def on_timer(self, tag: ReadinessTag) -> list[Op]:
        """One of our timers: the calls it releases."""
        match tag:
            case WarmWindow() if self._warm_token is None:
                return self._warmed()  # no initial progress began: nothing to wait for
            case WarmCap():
                return self._warmed()
            case LoadCap() if not self.workspace_loaded:
                return self._loaded()
            case Registration() if self.state == "registering":
                return self.ready()  # no pull registration came: diagnostics by publish
        return []

    def waiting(self, op: Op) -> bool:
        """Whether `op` waits at a gate (not yet sent to the server)."""
        return op in self.queued or op in self.held or op in self.awaiting_load

    def forget(self, op: Op) -> None:
        for gate in (self.queued, self.held, self.awaiting_load):
            if op in gate:
                gate.remove(op)

    def hint(self) -> str:
        """What the server may be busy with, for a message about a late answer."""
        if not self.workspace_loaded:
            return "it has not finished listing the workspace's files"
        if self.progress:
            return "it is still indexing: " + ", ".join(sorted(set(self.progress.values())))
        return "it may be busy or stuck"
