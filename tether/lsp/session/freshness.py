"""Diagnostics ops and their freshness: `diagnostics` and `sync` (after a write).

A call waits (a `FreshWait` in `waits`) until the diagnostics of its files are about the
text we sent - by pull (`textDocument/diagnostic`), or by a versioned or quiet publish -
or until its cap, when the files still waiting are reported "pending" (see
`tether/lsp/diagnostics.py` for the rules). A write's answer also says what changed
in other files ("others"): push servers publish them on their own; a pull server is asked,
after the written files, about the open files that import one of them. What lands within
the row's `others_grace` after the written files are fresh is in the answer; what comes
later rides on the next write's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from tether.json_types import JSONObject, JSONValue
from tether.lsp.diagnostics import DEFAULT_CAP, FreshWait, Published, normalize
from tether.lsp.documents import Document, path_of, uri_of
from tether.lsp.jsonrpc import (
    CONTENT_MODIFIED,
    REQUEST_CANCELLED,
)
from tether.lsp.narrow import obj, objs, text, whole
from tether.lsp.servers import ServerRow
from tether.lsp.session.link import Answer
from tether.lsp.session.serving import Serving
from tether.lsp.session.table import Op
from tether.lsp.session.timers import Cap, FreshnessTag, Grace, Quiet
from tether.messages.language_server_ops import (
    DiagnosticRecord,
    Diagnostics,
    DiagnosticsReply,
    Sync,
)

# tsserver's three kinds of file diagnostics, asked one by one by `_check_clean`
CLEAN_CHECKS = ("syntacticDiagnosticsSync", "semanticDiagnosticsSync", "suggestionDiagnosticsSync")
MAX_OTHER_PULLS = 4  # open importers pulled with a write (the files it may have broken)


def importers(paths: Iterable[Path], open_texts: Mapping[str, str]) -> list[str]:
    """The open documents (uri -> text, least recently used first) a write to `paths` may
    have broken, most recently used first: those with an import-like line (import / from /
    #include / require / use / export ... from) naming a written file's module (its stem;
    the package for __init__)."""
    paths = list(paths)
    stems = {p.parent.name if p.stem == "__init__" else p.stem for p in paths} - {""}
    if not stems:
        return []
    words = "|".join(re.escape(st) for st in sorted(stems))
    pattern = re.compile(
        rf"^\s*(?:from|import|#\s*include|require|use|export)\b.*\b(?:{words})\b", re.M
    )
    written = {uri_of(p) for p in paths}
    newest_first = reversed(list(open_texts))
    return [u for u in newest_first if u not in written and pattern.search(open_texts[u])]


class Freshness:
    """The diagnostics part: what the server published or answered, and the calls waiting
    for fresh diagnostics (`waits`)."""

    def __init__(
        self,
        serving: Serving,
        after: Callable[[float, FreshnessTag], None],
        now: Callable[[], float],
    ) -> None:
        self.s = serving
        self.row: ServerRow = serving.row
        self.after, self.now = after, now
        self.waits: dict[int, tuple[Op, FreshWait]] = {}  # calls waiting for diagnostics
        self.published: dict[str, Published] = {}
        # uri -> (resultId, items, document version the pull was sent for)
        self.pull_cache: dict[str, tuple[JSONValue, list[JSONObject], int]] = {}
        # other files changed since a reply: uri -> (items before, items after)
        self.carry: dict[str, tuple[list[JSONObject] | None, list[JSONObject]]] = {}
        self.other_pulls: set[int] = set()  # request ids of pulls for not-written files
        self.unchecked_writes: list[Path] = []  # written; their importers' pulls not all answered

    # --- input ----------------------------------------------------------------------------
    def on_refresh(self) -> None:
        """`workspace/diagnostic/refresh`: pull again what the waiting calls still need."""
        for op, w in list(self.waits.values()):
            if w.pull and not w.complete:
                self._pull(op, w, list(w.pending))

    def on_publish(self, p: JSONObject) -> None:
        """`textDocument/publishDiagnostics`."""
        uri, items = text(p.get("uri")), objs(p.get("diagnostics"))
        sent_version = p.get("version")
        version = sent_version if isinstance(sent_version, int) else None
        now = self.now()
        prev = self.published.get(uri)
        self.published[uri] = Published(version, items, now)
        if not any(uri in w.targets for _, w in self.waits.values()) and not any(
            w.before_known for _, w in self.waits.values()
        ):
            self._carry(uri, prev.items if prev else None, items)
        for op, w in list(self.waits.values()):
            if w.on_publish(uri, version, items, now):
                self.after(self.row.push_quiet_window, Quiet(op.oid))
            self._maybe_finish(op, w)

    def on_timer(self, tag: FreshnessTag) -> None:
        match tag:
            case Quiet(oid=oid) if oid in self.waits:
                op, w = self.waits[oid]
                w.on_quiet(self.now(), self.row.push_quiet_window)
                self._maybe_finish(op, w)
            case Cap(oid=oid) | Grace(oid=oid) if oid in self.waits:
                self._finish_wait(*self.waits[oid])
            case _:
                pass  # the call was answered meanwhile

    def forget(self, op: Op) -> None:
        """`op` settled (answered, failed, cancelled): it waits no more."""
        self.waits.pop(op.oid, None)

    def clear(self) -> None:
        """The server is gone: nothing it publishes is awaited."""
        self.waits.clear()

    # --- ops ------------------------------------------------------------------------------
    def diagnostics(self, op: Op, req: Diagnostics) -> None:
        doc = self.s.open(op, req.path)
        if doc is None:
            return
        self._diagnose(op, [doc], req.cap or 10.0, others=False)

    def sync(self, op: Op, req: Sync) -> None:
        # importer checks still running for an earlier write are about stale text, and a
        # single-threaded server would answer this write only after them: cancel them, and
        # check those importers again with this write's
        if self.other_pulls:
            for rid in list(self.other_pulls):
                self.s.link.cancel(rid)
            self.other_pulls.clear()
        else:
            self.unchecked_writes = []
        paths = [Path(p) for p in req.paths]
        docs = self.s.texts.sync(paths, {Path(p) for p in req.created})
        synced = {d.uri for d in docs}
        op.skipped = {
            str(p): why for p in paths if (why := self.s.texts.docs.problem(p)) is not None
        }
        op.deleted = [str(p) for p in paths if uri_of(p) not in synced and str(p) not in op.skipped]
        self.unchecked_writes.extend(p for p in paths if p not in self.unchecked_writes)
        self._diagnose(op, docs, req.cap or DEFAULT_CAP, others=True)

    def _diagnose(self, op: Op, docs: list[Document], cap: float, others: bool) -> None:
        now = self.now()
        w = FreshWait(
            op.oid,
            op.token,
            {d.uri: d.version for d in docs},
            now,
            min(now + cap, op.deadline),
            self.s.pull_supported(),
        )
        self.waits[op.oid] = (op, w)
        if others and not w.pull:
            w.before = {u: p.items for u, p in self.published.items() if u not in w.targets}
            w.before_known = True
        if w.pull:
            broken = []
            if others:  # the open files this write (or an unchecked earlier one) may break
                open_texts = {u: d.text for u, d in self.s.texts.docs.open.items()}
                broken = importers(self.unchecked_writes, open_texts)
            self._pull(op, w, [d.uri for d in docs] + broken[:MAX_OTHER_PULLS])
        else:
            for d in docs:  # already fresh from an earlier publish?
                pub = self.published.get(d.uri)
                if pub is None:
                    continue
                if pub.version is not None and pub.version >= d.version:
                    w.fresh[d.uri] = pub.items
                elif (
                    pub.version is None
                    and pub.at >= self.s.texts.changed_at.get(d.uri, 0.0)
                    and now - pub.at >= self.row.push_quiet_window
                ):
                    w.fresh[d.uri] = pub.items
            if isinstance(op.request, Diagnostics) and self.row.nudge_for_diagnostics:
                for d in docs:
                    if d.uri not in w.fresh:
                        self.s.texts.touch(d)
                        w.targets[d.uri] = d.version
            command = self.row.clean_check_command
            if command and self.s.caps.offers_command(command):
                for d in docs:
                    if d.uri not in w.fresh:
                        self._check_clean(op, w, d.uri, CLEAN_CHECKS)
        if not self._maybe_finish(op, w):
            self.after(max(0.0, w.cap_at - now), Cap(op.oid))

    def _pull_identifier(self) -> JSONValue:
        ident: JSONValue = None
        for m, o in self.s.caps.dynamic.values():
            if m == "textDocument/diagnostic" and isinstance(o, dict):
                ident = o.get("identifier")
        dp = self.s.caps.static.get("diagnosticProvider")
        if isinstance(dp, dict) and dp.get("identifier"):
            ident = dp["identifier"]
        return ident

    def _pull_params(
        self, uri: str, ident: JSONValue
    ) -> tuple[JSONObject, list[JSONObject] | None, int]:
        """A diagnostic pull for `uri`: its params (with the result id we hold, so the server
        may answer "unchanged"), the items that id stands for, and the document's version."""
        params: JSONObject = {"textDocument": {"uri": uri}}
        if ident:
            params["identifier"] = ident
        prev, prev_items, _v = self.pull_cache.get(uri, (None, None, 0))
        if prev:
            params["previousResultId"] = prev
        return params, prev_items, self.s.texts.version(uri)

    def _pull(self, op: Op, w: FreshWait, uris: list[str]) -> None:
        ident = self._pull_identifier()
        oid = op.oid
        for uri in uris:
            params, prev_items, version = self._pull_params(uri, ident)
            target = uri in w.targets
            if not target:
                w.before[uri] = prev_items  # None: never seen, so no judgement possible
            w.outstanding_pulls += 1

            def cont(
                resp: Answer,
                uri: str = uri,
                target: bool = target,
                sent: list[JSONObject] | None = prev_items,
                v: int = version,
            ) -> None:
                w.outstanding_pulls -= 1
                self.other_pulls.discard(resp.id)
                if not target and not self.other_pulls and not resp.error:
                    self.unchecked_writes = []  # every importer of those writes answered
                live = oid in self.waits
                if resp.error:
                    code = resp.error.get("code")
                    if target and live and code in (CONTENT_MODIFIED, REQUEST_CANCELLED):
                        self._pull(op, w, [uri])  # server-side cancel: pull again
                        return
                    if target:
                        w.fresh[uri] = []  # the server refused; report none rather than hang
                else:
                    r = obj(resp.result)
                    items = self._report_items(uri, r, sent, v)
                    if target:
                        w.fresh[uri] = items
                    elif live:
                        w.others[uri] = items
                    else:  # arrived after the call was answered: tell the next write
                        self._carry(uri, w.before.get(uri), items)
                    for rel_uri, rel in obj(r.get("relatedDocuments")).items():
                        if rel_uri not in w.targets:
                            rel_items = self._report_items(rel_uri, obj(rel), None, -1)
                            if live:
                                w.others[rel_uri] = rel_items
                if live:
                    self._maybe_finish(op, w)

            # the other documents' pulls outlive the call (their answers are carried to the
            # next write), so they are not tied to the op: context op None
            # the request may outlive the cap (the cap answers "pending", the answer is late)
            rid = self.s.link.request(
                "textDocument/diagnostic", params, op.deadline, op if target else None, cont
            )
            if not target:
                self.other_pulls.add(rid)

    def _check_clean(self, op: Op, w: FreshWait, uri: str, kinds: tuple[str, ...]) -> None:
        """Ask tsserver for `uri`'s diagnostics of each kind in turn (after the text we sent:
        the server flushes its pending changes before a request); all empty is a fresh "no
        diagnostics" - a server that stays silent about a clean file will publish nothing.
        Anything else waits for the publish, which a non-empty kind always brings."""
        params: JSONObject = {
            "command": self.row.clean_check_command,
            "arguments": [kinds[0], {"file": uri}],
        }

        def cont(resp: Answer) -> None:
            if resp.error or obj(resp.result).get("body") != [] or op.oid not in self.waits:
                return  # not clean, refused, or answered meanwhile
            if kinds[1:]:
                self._check_clean(op, w, uri, kinds[1:])
            elif uri not in w.fresh:  # (a publish still in its quiet window: older text)
                w.fresh[uri] = []
                w.candidate_at.pop(uri, None)
                self._maybe_finish(op, w)

        # not tied to the op: a check outliving its budget must not fail the call (its cap
        # answers "pending", as without the check)
        self.s.link.request("workspace/executeCommand", params, op.deadline, None, cont)

    def _carry(self, uri: str, before: list[JSONObject] | None, after: list[JSONObject]) -> None:
        """Diagnostics of another file that changed after a write was answered."""
        if uri in self.carry:
            before = self.carry[uri][0]
        if before != after:
            self.carry[uri] = (before, after)
        else:
            self.carry.pop(uri, None)

    def _report_items(
        self, uri: str, r: JSONObject, sent: list[JSONObject] | None, version: int
    ) -> list[JSONObject]:
        """Items of a pull answer. "unchanged" means: the same as the result whose id we SENT
        (not whatever the cache holds now: a late answer for an older version may have
        landed in between). The cache keeps the newest version's result only."""
        if r.get("kind") == "unchanged":
            return list(sent or [])
        items = objs(r.get("items"))
        cached = self.pull_cache.get(uri)
        if cached is None or version >= cached[2]:
            result_id = r.get("resultId")  # sent back as it came (previousResultId)
            self.pull_cache[uri] = (result_id, items, version)
        return items

    def _maybe_finish(self, op: Op, w: FreshWait) -> bool:
        if op.oid not in self.waits:
            return False
        if w.complete:
            self._finish_wait(op, w)
            return True
        if w.targets_done and not w.grace_armed:
            # the written files are fresh; other files get a short grace, then are carried
            w.grace_armed = True
            self.after(self.row.others_grace, Grace(op.oid))
        return False

    def _finish_wait(self, op: Op, w: FreshWait) -> None:
        self.waits.pop(op.oid, None)
        enc = self.s.caps.position_encoding
        line = self.s.texts.docs.line

        def norm(u: str, items: list[JSONObject] | None) -> list[DiagnosticRecord] | None:
            return None if items is None else normalize(path_of(u), items, line, enc)

        files = {str(path_of(u)): norm(u, items) for u, items in w.fresh.items()}
        changed: dict[str, tuple[list[JSONObject] | None, list[JSONObject]]] = {}
        if isinstance(op.request, Sync):
            changed.update(self.carry)
            self.carry.clear()
        for u, items in w.others.items():
            if u not in w.targets:
                before = changed[u][0] if u in changed else w.before.get(u)
                changed[u] = (before, items)
        others = {
            str(path_of(u)): {"before": norm(u, b), "after": norm(u, a)}
            for u, (b, a) in changed.items()
            if u not in w.targets and a != b
        }
        reply = DiagnosticsReply(
            files=files,
            others=others,
            pending=[str(path_of(u)) for u in w.pending],
            deleted=op.deleted,
            skipped=op.skipped,
            waited=round(self.now() - w.started, 4),
            mode="pull" if w.pull else "push",
        )
        self.s.table.done(op, reply)

    def raw_diagnostics_on(self, uri: str, line0: int) -> list[JSONObject]:
        """The server's diagnostics on a line (the context of a code_actions request)."""
        items = self.pull_cache.get(uri, (None, [], 0))[1] or (
            self.published[uri].items if uri in self.published else []
        )
        out = []
        for d in items:
            r = obj(d.get("range"))
            start, end = obj(r.get("start")), obj(r.get("end"))
            if whole(start.get("line"), -1) <= line0 <= whole(end.get("line"), -1):
                out.append(d)
        return out
