"""What a served conversation's run holds host-side, kept in the state dir to outlive the server.

A `tether serve` that is restarted, or drained and replaced by a new one on the same state
dir, resumes a conversation by its handle (`conversations.Conversations.resume`). Most of
what the conversation did lives in processes that die with the server's tree - a kernel's
variables, a debug session, a running worker - and cannot be carried over: those are said,
in the next result that touches them (`resume_notes`). What the run holds host-side is
plain data and is carried over (written by `run_store`:
`<state dir>/serve-runs/<handle>.state`):

- staged edits not yet resolved (`ast_edit`'s, and an isolated vibe worker's change), with
  the hash of each file as it was staged: `resolve accept` after the restart writes them,
  or refuses, naming the files that changed meanwhile (`structural.staging.commit`);
- the diagnostics ledger (`tether.tools.lsp_tool.ledger`): what the agent was told is not new again;
- the breakpoints the run set (`ctx.state["debug"]`): sent with the next launch;
- the card numbering, and which permission cards the human approved. An approval is for
  one call ("run it this time": `tools.registry.permission` keeps none), so there is no
  standing grant to carry: the record only keeps card numbers unique and says so.

The file is read as untrusted input: the state dir is private, but a file there may be an
older format, truncated, or written by something else. `decode` checks every field (types,
ranges, the handle and workdir it belongs to, every path inside that workdir) and refuses
the whole file with what was wrong, rather than restoring half of it or writing a staged
edit to a path the conversation could never have staged.

It is saved after each call of a tool that can change it (`KEPT_TOOLS`), on a saver thread
(never the event loop: an fsync), newest state each time; a drain saves everything before
it closes the runs.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from tether.debug import breakpoints as bp
from tether.json_types import JSONValue
from tether.messages.debug_ops import FunctionSpec, LineSpec
from tether.questions import ALLOW, Answer, AnswerStatus, Card, CardKind
from tether.structural.staging import ABSENT, StagedEdit, StagedFile
from tether.tools.debug_tool.kept import Kept
from tether.tools.lsp_tool.ledger import Key, Ledger
from tether.tools.lsp_tool.notes import LspState
from tether.tools.structural import run_staging
from tether.tools.vibe_changes import CONFLICT

if TYPE_CHECKING:
    from tether.run import Run

FORMAT = "tether-run-state"
VERSION = 1
HANDLE = re.compile(r"c-[A-Za-z0-9_-]{16}")  # conversations mint "c-" + token_urlsafe(12)
HASH = re.compile(r"[0-9a-f]{64}")
# the tools after which the kept state may have changed (all others only read it); eval
# too, as a cell may call ast_edit or write through its tool() bridge
KEPT_TOOLS = frozenset(
    {"ast_edit", "resolve", "write", "edit", "apply_patch", "lsp_rename", "debug", "eval",
     "ask_user", "vibe_spawn", "vibe_send", "vibe_wait", "vibe_kill", "vibe_list"}
)  # fmt: skip


class RunStateError(ValueError):
    """A state file that is not one this server can take: what is wrong, and what to do."""


# ---- the document (what `snapshot` builds, and `decode` checks a file holds) ----------------


class ApprovedCard(TypedDict):
    card: int
    tool: str


class FileDoc(TypedDict):
    """One file of a staged edit (a `StagedFile`; `new` base64, None: the file goes)."""

    rel: str
    path: str
    old_hash: str
    new: str | None
    replacements: int
    mode: int | None


class EditDoc(TypedDict):
    edit_id: str
    pattern: str
    rewrite: str
    again: str
    files: list[FileDoc]


class StagedDoc(TypedDict):
    counter: int
    edits: list[EditDoc]


# a ledger entry: [severity, code, message, count, lines] (a JSON array)
LedgerRow = list[int | str | list[int]]


class DebugDoc(TypedDict):
    breakpoints: dict[str, list[LineSpec]]  # path -> line specs (tether.debug.breakpoints)
    functions: list[FunctionSpec]
    exceptions: list[str] | None


class CardsDoc(TypedDict):
    last: int
    approved: list[ApprovedCard]


class HeldDoc(TypedDict):
    """What lived in the old server's processes: said gone after a restart."""

    kernels: list[str]
    debugged: bool
    workers: list[str]


# the whole file
class RunStateDoc(TypedDict):
    format: str  # FORMAT
    version: int
    conversation: str  # its handle
    workdir: str
    staged: StagedDoc
    ledger: dict[str, list[LedgerRow]]  # path -> entries
    debug: DebugDoc
    cards: CardsDoc
    held: HeldDoc
    unsaid: dict[str, str]  # tool -> the note of an earlier restart not said yet


# ---- the card log: numbering and approvals -----------------------------------------------


@dataclass
class CardLog:
    """The cards a run showed: the last number, and the permission cards approved."""

    last: int = 0
    approved: list[ApprovedCard] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, card: Card, answer: Answer) -> None:
        with self.lock:
            self.last = max(self.last, card.number)
            if (
                card.kind is CardKind.PERMISSION
                and answer.status is AnswerStatus.ANSWERED
                and ALLOW in answer.choices
            ):
                self.approved.append({"card": card.number, "tool": card.tool})


# ---- snapshot: the run's state as a document ---------------------------------------------


def snapshot(
    run: Run, handle: str, cards: CardLog, unsaid: Mapping[str, str] | None = None
) -> RunStateDoc:
    """The kept state of `run` (takes each family's own lock). `unsaid`: the notes of an
    earlier restart not said yet (tool -> note), kept so a second restart still says them.
    May raise RuntimeError when another thread reshapes a dict meanwhile: the caller tries
    again later."""
    with cards.lock:
        card_doc = CardsDoc(last=cards.last, approved=[a.copy() for a in cards.approved])
    return {
        "format": FORMAT,
        "version": VERSION,
        "conversation": handle,
        "workdir": str(run.workdir),
        "staged": _staged_doc(run),
        "ledger": _ledger_doc(run),
        "debug": _debug_doc(run),
        "cards": card_doc,
        "held": _held_doc(run),
        "unsaid": dict(unsaid or {}),
    }


def _staged_doc(run: Run) -> StagedDoc:
    state = run.state
    if "structural" not in state:
        return {"counter": 0, "edits": []}
    staging, lock = run_staging(state)
    with lock:
        edits = [e for e in staging.edits.values() if e.status == "staged"]
        counter = staging.counter
    return {"counter": counter, "edits": [_edit_doc(e) for e in edits]}


def _edit_doc(edit: StagedEdit) -> EditDoc:
    files = [
        FileDoc(
            rel=f.rel,
            path=f.path,
            old_hash=f.old_hash,
            new=None if f.new is None else base64.b64encode(f.new).decode("ascii"),
            replacements=f.replacements,
            mode=f.mode,
        )
        for f in edit.files
    ]
    return {"edit_id": edit.edit_id, "pattern": edit.pattern, "rewrite": edit.rewrite,
            "again": edit.again, "files": files}  # fmt: skip


def _ledger_doc(run: Run) -> dict[str, list[LedgerRow]]:
    state = run.state
    lsp = state.get("lsp") or {}
    ledger = lsp.get("ledger")
    if not isinstance(ledger, Ledger):
        return {}
    with lsp.get("lock") or contextlib.nullcontext():
        return {
            path: [
                [k[0], k[1], k[2], n, sorted(ledger.lines.get(path, {}).get(k, ()))]
                for k, n in counts.items()
            ]
            for path, counts in ledger.counts.items()
        }


def _debug_doc(run: Run) -> DebugDoc:
    state = run.state
    debug: Kept = state.get("debug") or {}
    return {
        "breakpoints": {p: [s.copy() for s in v] for p, v in (debug.get("breakpoints") or {}).items()},
        "functions": [s.copy() for s in debug.get("functions") or []],
        "exceptions": None if debug.get("exceptions") is None else list(debug["exceptions"]),
    }  # fmt: skip


def _held_doc(run: Run) -> HeldDoc:
    """What lived in processes (and cannot be carried over), to say so after a restart."""
    state = run.state
    settings = state.get("eval")
    workers = state.get("vibe")
    return {
        "kernels": sorted(getattr(settings, "kernels", ()) or ()),
        "debugged": bool((state.get("debug") or {}).get("features")),
        "workers": list(getattr(workers, "live_ids", list)()),
    }


def encode(doc: RunStateDoc) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


# ---- decode: the file, checked field by field --------------------------------------------


def decode(data: bytes, handle: str, workdir: Path) -> RunStateDoc:
    """The document in `data`, for conversation `handle` on `workdir`, or RunStateError."""
    try:
        doc: JSONValue = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise RunStateError(f"it is not JSON ({e})") from None
    if not (isinstance(doc, dict) and doc.get("format") == FORMAT):
        raise RunStateError('it is not a tether run-state file (no "format": "tether-run-state")')
    _check(doc.get("version") == VERSION,
           f"it is version {doc.get('version')!r}; this server reads version {VERSION}")  # fmt: skip
    _check(doc.get("conversation") == handle,
           f"it belongs to conversation {doc.get('conversation')!r}, not {handle!r}")  # fmt: skip
    _check(doc.get("workdir") == str(workdir),
           f"it was kept for the workdir {doc.get('workdir')!r}, not {str(workdir)!r}")  # fmt: skip
    root = os.path.realpath(workdir)
    _staged_check(doc.get("staged"), workdir, root)
    _ledger_check(doc.get("ledger"))
    _debug_check(doc.get("debug"), root)
    _cards_check(doc.get("cards"))
    _held_check(doc.get("held"))
    unsaid = doc.get("unsaid")
    _check(isinstance(unsaid, dict) and all(isinstance(v, str) for v in unsaid.values()),
           "its notes not yet said are malformed")  # fmt: skip
    return cast(RunStateDoc, doc)  # (every field checked above)


def _check(ok: bool, why: str) -> None:
    if not ok:
        raise RunStateError(why)


def _is_int(v: JSONValue, low: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def _strings(v: JSONValue) -> bool:
    return isinstance(v, list) and all(isinstance(s, str) for s in v)


def _inside(path: JSONValue, root: str) -> bool:
    """`path` is absolute and, its symlinks resolved, under `root` (itself resolved)."""
    if not isinstance(path, str) or not os.path.isabs(path):
        return False
    real = os.path.realpath(path)
    return os.path.commonpath([real, root]) == root


def _staged_check(staged: JSONValue, workdir: Path, root: str) -> None:
    if not (isinstance(staged, dict) and _is_int(staged.get("counter"))
            and isinstance(edits := staged.get("edits"), list)):  # fmt: skip
        raise RunStateError("its staged edits are not a list")
    for edit in edits:
        if not (isinstance(edit, dict) and isinstance(edit_id := edit.get("edit_id"), str)
                and all(isinstance(edit.get(k), str) for k in ("pattern", "rewrite", "again"))
                and isinstance(files := edit.get("files"), list) and files):  # fmt: skip
            raise RunStateError(f"a staged edit is malformed ({str(edit)[:80]})")
        for f in files:
            where = f"staged edit {edit_id}"
            if not (isinstance(f, dict) and isinstance(rel := f.get("rel"), str)
                    and isinstance(old := f.get("old_hash"), str)):  # fmt: skip
                raise RunStateError(f"{where}: a file is malformed")
            expected = os.path.normpath(workdir / rel)
            _check(f.get("path") == expected and _inside(expected, root),
                   f"{where}: {rel!r} is not a file of the workdir {str(workdir)!r}")  # fmt: skip
            _check(bool(HASH.fullmatch(old)) or old in (ABSENT, CONFLICT),
                   f"{where}: {rel!r} has no content hash")  # fmt: skip
            new = f.get("new")
            _check(new is None or (isinstance(new, str) and _b64(new) is not None),
                   f"{where}: the new content of {rel!r} is not base64")  # fmt: skip
            _check(_is_int(f.get("replacements")), f"{where}: {rel!r} has no replacement count")
            mode = f.get("mode")
            _check(mode is None or (isinstance(mode, int) and _is_int(mode) and mode <= 0o7777),
                   f"{where}: {rel!r} has a bad file mode {mode!r}")  # fmt: skip


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return None


def _ledger_check(ledger: JSONValue) -> None:
    if not isinstance(ledger, dict):
        raise RunStateError("its diagnostics ledger is not a map of file to entries")
    for path, rows in ledger.items():
        if not isinstance(rows, list):
            raise RunStateError(f"the ledger of {path!r} is not a list")
        for row in rows:
            _check(isinstance(row, list) and len(row) == 5 and _is_int(row[0], 1)
                   and isinstance(row[1], str) and isinstance(row[2], str)
                   and _is_int(row[3], 1) and isinstance(lines := row[4], list)
                   and all(_is_int(n) for n in lines),
                   f"a ledger entry of {path!r} is malformed ({str(row)[:80]})")  # fmt: skip


def _debug_check(debug: JSONValue, root: str) -> None:
    if not (isinstance(debug, dict) and isinstance(lines := debug.get("breakpoints"), dict)
            and isinstance(functions := debug.get("functions"), list)):  # fmt: skip
        raise RunStateError("its breakpoints are malformed")
    try:
        for path, specs in lines.items():
            _check(_inside(path, root), f"a breakpoint file {path!r} is outside the workdir")
            if not (isinstance(specs, list) and all(isinstance(s, dict) for s in specs)):
                raise RunStateError(f"the breakpoints of {path!r} are not a list of lines")
            for s in specs:
                assert isinstance(s, dict)  # (checked just above)
                _check(isinstance(s.get("text", ""), str), f"a breakpoint of {path!r} is malformed")
                bp.line_specs([{k: v for k, v in s.items() if k != "text"}])
        bp.function_specs(functions)
        exceptions = debug.get("exceptions")
        if exceptions is not None:
            if not isinstance(exceptions, list):
                raise RunStateError("its exception breakpoints are malformed")
            bp.exception_kinds(exceptions)
    except bp.BreakpointError as e:
        raise RunStateError(f"a breakpoint in it is not valid: {e}") from None


def _cards_check(cards: JSONValue) -> None:
    _check(isinstance(cards, dict) and _is_int(cards.get("last"))
           and isinstance(approved := cards.get("approved"), list)
           and all(isinstance(a, dict) and _is_int(a.get("card"), 1)
                   and isinstance(a.get("tool"), str) for a in approved),
           "its card record is malformed")  # fmt: skip


def _held_check(held: JSONValue) -> None:
    _check(isinstance(held, dict) and _strings(held.get("kernels"))
           and isinstance(held.get("debugged"), bool) and _strings(held.get("workers")),
           "its record of what the old server held is malformed")  # fmt: skip


# ---- restore: a decoded document back into a new run -------------------------------------


@dataclass
class Restored:
    """What came back, for the resumed conversation's notes."""

    edits: list[str]
    breakpoints: int
    ledger_files: int
    approved: list[int]
    held: HeldDoc
    unsaid: dict[str, str] = field(default_factory=dict)


def restore(run: Run, doc: RunStateDoc, cards: CardLog) -> Restored:
    """Put a `decode`d document into `run` (a new run of the same conversation)."""
    staged = doc["staged"]
    staging, lock = run_staging(run.state)
    with lock:
        for e in staged["edits"]:
            edit = StagedEdit(
                e["edit_id"], e["pattern"], e["rewrite"], [_file(f) for f in e["files"]]
            )
            edit.again = e["again"]
            staging.edits[edit.edit_id] = edit
        staging.counter = max(staging.counter, staged["counter"])
    counts: dict[str, Counter[Key]] = {}
    lines: dict[str, dict[Key, set[int]]] = {}
    for path, rows in doc["ledger"].items():
        entries = [_entry(r) for r in rows]
        counts[path] = Counter({key: n for key, n, _ in entries})
        lines[path] = {key: set(at) for key, _, at in entries}
    run.state.setdefault("lsp", LspState())["ledger"] = Ledger(counts, lines)
    debug = doc["debug"]
    kept = run.state.setdefault("debug", Kept())
    if debug["breakpoints"]:
        kept["breakpoints"] = {p: list(v) for p, v in debug["breakpoints"].items()}
    if debug["functions"]:
        kept["functions"] = list(debug["functions"])
    if debug["exceptions"] is not None:
        kept["exceptions"] = list(debug["exceptions"])
    with cards.lock:
        cards.last = max(cards.last, doc["cards"]["last"])
        cards.approved = [a.copy() for a in doc["cards"]["approved"]]
    # (Run numbers its cards from an itertools.count: the new run goes on from the old
    # one's last, so "card #3" still means one card in this conversation)
    run._cards = itertools.count(cards.last + 1)
    return Restored(
        edits=[e["edit_id"] for e in staged["edits"]],
        breakpoints=sum(len(v) for v in debug["breakpoints"].values()) + len(debug["functions"]),
        ledger_files=len(counts),
        approved=[a["card"] for a in cards.approved],
        held=doc["held"].copy(),
        unsaid=dict(doc["unsaid"]),
    )


def _entry(row: LedgerRow) -> tuple[Key, int, list[int]]:
    """A ledger row (checked by `_ledger_check`) as its key, count and lines."""
    severity, code, message, count, at = row
    assert isinstance(severity, int) and isinstance(code, str) and isinstance(message, str)
    assert isinstance(count, int) and isinstance(at, list)
    return (severity, code, message), count, at


def _file(f: FileDoc) -> StagedFile:
    new = None if f["new"] is None else _b64(f["new"])
    return StagedFile(f["rel"], f["path"], f["old_hash"], new, f["replacements"], f["mode"])
