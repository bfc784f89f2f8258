"""Applying an LSP WorkspaceEdit all or nothing (DESIGN.md invariant 2: no partial write).

Accepts both shapes (LSP 3.17 "WorkspaceEdit"): `changes` (uri -> TextEdit[]) and
`documentChanges` (TextDocumentEdit | CreateFile | RenameFile | DeleteFile, applied in
order). The whole edit is first played against an in-memory view of the files (`plan`):
every range checked, every versioned document checked against the version we sent, every
resource operation checked against its options. Only a plan that succeeded is committed,
and the commit snapshots every touched file first and restores all of them if any write
fails.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.lsp.documents import path_of, read_text
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

    @property
    def touched(self) -> list[Path]:
        return list(self.final)


def _apply_text_edits(text: str, edits: list[dict[str, Any]], encoding: str, where: str) -> str:
    spans = []
    for e in edits:
        r = e.get("range") or {}
        s, en = r.get("start") or {}, r.get("end") or {}
        a = offset_of(text, int(s.get("line", 0)), int(s.get("character", 0)), encoding)
        b = offset_of(text, int(en.get("line", 0)), int(en.get("character", 0)), encoding)
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
    edit: dict[str, Any],
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

    def text_edit(uri: str, edits: list, version: int | None) -> None:
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
        for dc in edit["documentChanges"]:
            kind = dc.get("kind")
            opts = dc.get("options") or {}
            if kind is None:
                td = dc.get("textDocument") or {}
                text_edit(td.get("uri", ""), dc.get("edits") or [], td.get("version"))
            elif kind == "create":
                path = path_of(dc["uri"])
                if current(path) is not None:
                    if opts.get("ignoreIfExists") and not opts.get("overwrite"):
                        continue
                    if not opts.get("overwrite"):
                        raise EditError(f"create {path}: it already exists")
                view[path] = ""
                p.created.append(path)
            elif kind == "rename":
                old, new = path_of(dc["oldUri"]), path_of(dc["newUri"])
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
                path = path_of(dc["uri"])
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
        for uri, edits in (edit.get("changes") or {}).items():
            text_edit(uri, edits or [], None)
    for path, text in view.items():
        before = read(path)
        if text != before:
            p.final[path] = text
    return p


def commit(p: Plan) -> None:
    """Write the plan's final state; on any failure restore every file and raise EditError."""
    snapshot: dict[Path, bytes | None] = {}
    for path in p.final:
        try:
            snapshot[path] = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            snapshot[path] = None
        except OSError as e:
            raise EditError(f"cannot read {path} before writing it: {e}") from e
    done: list[Path] = []
    failing = Path()
    try:
        for path, text in p.final.items():
            failing = path
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.tether-tmp")
                tmp.write_bytes(text.encode("utf-8"))
                if snapshot[path] is not None:
                    try:
                        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
                    except OSError:
                        pass
                os.replace(tmp, path)
            done.append(path)
    except OSError as e:
        for path in [*done, failing]:
            old = snapshot.get(path)
            try:
                if old is None:
                    path.unlink(missing_ok=True)
                else:
                    path.write_bytes(old)
            except OSError:
                pass
        raise EditError(f"writing {failing} failed ({e}); every file was restored") from e
