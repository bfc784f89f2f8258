"""Applying an LSP WorkspaceEdit all or nothing (DESIGN.md invariant 2: no partial write).

Accepts both shapes (LSP 3.17 "WorkspaceEdit"): `changes` (uri -> TextEdit[]) and
`documentChanges` (TextDocumentEdit | CreateFile | RenameFile | DeleteFile, applied in
order). The whole edit is first played against an in-memory view of the files (`plan`):
every range checked, every versioned document checked against the version we sent, every
resource operation checked against its options. Only a plan that succeeded is committed,
in one `tether.atomic_files.commit`: every file lands, or every file is as it was.
`confine` refuses an edit that names any path outside given directories (after resolving
symlinks and `..`) before anything is read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tether import atomic_files
from tether.json_types import JSONObject, JSONValue
from tether.lsp.documents import path_of, read_text
from tether.lsp.narrow import obj
from tether.lsp.positions import offset_of


class EditError(ValueError):
    """The edit cannot be applied as a whole; nothing was written."""


@dataclass
class Plan:
    final: dict[Path, str | None] = field(default_factory=dict)  # None = absent afterwards
    edits: dict[Path, int] = field(default_factory=dict)  # text edits per final path
    created: list[Path] = field(default_factory=list)
    renamed: list[tuple[Path, Path]] = field(default_factory=list)
    deleted: list[Path] = field(default_factory=list)
    origins: dict[Path, Path] = field(default_factory=dict)  # renamed: final path -> original

    @property
    def touched(self) -> list[Path]:
        return list(self.final)


# A malformed edit is refused whole: a field of the wrong type raises TypeError (a missing
# required one KeyError), as indexing the raw JSON did; it is never read as a default.
def _str(o: JSONObject, key: str) -> str:
    value = o[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} is not a string: {value!r:.80}")
    return value


def _int(o: JSONObject, key: str) -> int:
    value = o.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key} is not a number: {value!r:.80}")
    return int(value)


def _objects(value: JSONValue, what: str) -> list[JSONObject]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise TypeError(f"{what} is not a list of objects: {value!r:.80}")
    return [v for v in value if isinstance(v, dict)]


def _changes(edit: JSONObject) -> JSONObject:
    changes = edit.get("changes") or {}
    if not isinstance(changes, dict):
        raise TypeError(f"changes is not an object: {changes!r:.80}")
    return changes


def _apply_text_edits(text: str, edits: list[JSONObject], encoding: str, where: str) -> str:
    spans = []
    for e in edits:
        r = obj(e.get("range"))
        s, en = obj(r.get("start")), obj(r.get("end"))
        a = offset_of(text, _int(s, "line"), _int(s, "character"), encoding)
        b = offset_of(text, _int(en, "line"), _int(en, "character"), encoding)
        if b < a:
            raise EditError(f"edit range ends before it starts in {where}")
        spans.append((a, b, str(e.get("newText", ""))))
    spans.sort(key=lambda t: (t[0], t[1]))
    for (_a1, b1, _), (a2, _b2, _) in zip(spans, spans[1:], strict=False):
        if a2 < b1:
            raise EditError(f"overlapping edits in {where}")
    for a, b, new in reversed(spans):
        text = text[:a] + new + text[b:]
    return text


def plan(
    edit: JSONObject,
    encoding: str,
    version_of: Callable[[Path], int | None] = lambda p: None,
    read: Callable[[Path], str | None] = read_text,
) -> Plan:
    """Play `edit` against the files; raises EditError naming the first problem."""
    p = Plan()
    view: dict[Path, str | None] = {}
    origin: dict[Path, Path] = {}  # current path -> the path it had before renames

    def current(path: Path) -> str | None:
        if path not in view:
            view[path] = read(path)
        return view[path]

    def text_edit(uri: str, edits: list[JSONObject], version: int | None) -> None:
        path = path_of(uri)
        text = current(path)
        if text is None:
            raise EditError(f"edit targets {path}, which does not exist")
        if version is not None:
            ours = version_of(path)
            if ours is not None and ours != version:
                raise EditError(
                    f"{path} changed since the server computed the edit "
                    f"(edit for version {version}, document is at {ours}); retry"
                )
        view[path] = _apply_text_edits(text, edits, encoding, str(path))
        p.edits[path] = p.edits.get(path, 0) + len(edits)

    if edit.get("documentChanges") is not None:
        for dc in _objects(edit["documentChanges"], "documentChanges"):
            kind = dc.get("kind")
            opts = obj(dc.get("options"))
            if kind is None:
                td = obj(dc.get("textDocument"))
                version = td.get("version")
                if version is not None and not isinstance(version, int):
                    raise TypeError(f"version is not an integer: {version!r:.80}")
                uri = td.get("uri", "")
                edits = _objects(dc.get("edits") or [], "edits")
                text_edit(uri if isinstance(uri, str) else _str(td, "uri"), edits, version)
            elif kind == "create":
                path = path_of(_str(dc, "uri"))
                if current(path) is not None:
                    if opts.get("ignoreIfExists") and not opts.get("overwrite"):
                        continue
                    if not opts.get("overwrite"):
                        raise EditError(f"create {path}: it already exists")
                view[path] = ""
                p.created.append(path)
            elif kind == "rename":
                old, new = path_of(_str(dc, "oldUri")), path_of(_str(dc, "newUri"))
                if current(old) is None:
                    raise EditError(f"rename {old}: it does not exist")
                if current(new) is not None:
                    if opts.get("ignoreIfExists") and not opts.get("overwrite"):
                        continue
                    if not opts.get("overwrite"):
                        raise EditError(f"rename to {new}: it already exists")
                view[new], view[old] = view[old], None
                origin[new] = origin.pop(old, old)
                p.edits[new] = p.edits.pop(old, 0)
                p.renamed.append((old, new))
            elif kind == "delete":
                path = path_of(_str(dc, "uri"))
                if path.is_dir():
                    raise EditError(f"delete {path}: deleting directories is not supported")
                if current(path) is None:
                    if opts.get("ignoreIfNotExists"):
                        continue
                    raise EditError(f"delete {path}: it does not exist")
                view[path] = None
                p.edits.pop(path, None)
                p.deleted.append(path)
            else:
                raise EditError(f"unknown documentChanges entry kind {kind!r}")
    else:
        for uri, uri_edits in _changes(edit).items():
            text_edit(uri, _objects(uri_edits or [], "edits"), None)
    for path, text in view.items():
        before = read(path)
        if text != before:
            p.final[path] = text
    p.origins = {new: old for new, old in origin.items() if new != old}
    return p


def named_paths(edit: JSONObject) -> list[Path]:
    """Every path `edit` names (text edits, creations, both ends of renames, deletions)."""
    uris: list[JSONValue] = list(_changes(edit).keys())
    document_changes = edit.get("documentChanges") or []
    if not isinstance(document_changes, list):
        raise TypeError(f"documentChanges is not a list: {document_changes!r:.80}")
    for dc in document_changes:
        if not isinstance(dc, dict):
            continue
        uris += [obj(dc.get("textDocument")).get("uri"), dc.get("uri")]
        uris += [dc.get("oldUri"), dc.get("newUri")]
    return [path_of(u) for u in uris if isinstance(u, str)]


def confine(edit: JSONObject, within: Sequence[Path]) -> None:
    """Refuse `edit` whole (EditError) unless every path it names, after resolving symlinks
    and `..`, is inside one of `within`. Checked before anything is read: an edit naming a
    path outside is never even planned (DESIGN.md invariant 5)."""
    roots = [Path(os.path.realpath(w)) for w in within]
    for path in named_paths(edit):
        if not path.is_absolute():
            raise EditError(f"the edit names {str(path)!r}, which is not a file: URI")
        real = Path(os.path.realpath(path))
        if not any(real == r or r in real.parents for r in roots):
            shown = str(path) if real == path else f"{path} (-> {real})"
            raise EditError(f"the edit would change {shown}, outside {', '.join(map(str, roots))}")


def commit(p: Plan, within: Sequence[Path] | None = None) -> None:
    """Write the plan's final state all or nothing (`tether.atomic_files`); on a failure every
    file is as it was and EditError says which file failed and why. A renamed file keeps
    its mode. `within`: as `atomic_files.commit` (checked again on the resolved targets)."""
    changes: list[atomic_files.Change] = []
    for path, text in p.final.items():
        if text is None:
            changes.append(atomic_files.Delete(path))
            continue
        mode = None
        if path in p.origins:  # the content of a renamed file: it keeps its mode
            try:
                mode = stat.S_IMODE(os.stat(p.origins[path]).st_mode)
            except OSError:
                pass
        changes.append(atomic_files.Write(path, text.encode("utf-8"), mode))
    try:
        atomic_files.commit(changes, within=within)
    except atomic_files.CommitError as e:
        raise EditError(str(e)) from e
