"""Unified diffs, sans-io: parse a patch into per-file hunks and apply hunks to text.

No file system here: `tether.tools.harness.apply_patch` reads the files, applies every
hunk in memory with `apply_hunks`, and only then commits (all files or none).

Lenient where models are sloppy, strict where guessing would be wrong: hunk line numbers
are a hint (the context is searched nearest-first, exact then ignoring trailing
whitespace), `@@` without numbers is accepted, padded empty lines at a hunk's end are
dropped when the header counts say so, and git's a/ b/ prefixes are stripped. A hunk whose
context is not in the file is an error that shows what was expected and the closest line;
so is a hunk with no '-' or '+' line (a header with a body lost or unmarked).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field


def split_lines(text: str) -> tuple[list[str], str, bool]:
    """Lines without line endings, the file's line ending, and whether it ends with one."""
    eol = "\r\n" if "\r\n" in text else "\n"
    if text == "":
        return [], eol, True
    final = text.endswith(eol) or text.endswith("\n")
    body = text[: -len(eol)] if text.endswith(eol) else text[:-1] if final else text
    return body.split(eol) if eol == "\r\n" else body.split("\n"), eol, final


def join_lines(lines: list[str], eol: str, final: bool) -> str:
    if not lines:
        return ""
    return eol.join(lines) + (eol if final else "")


class PatchError(Exception):
    pass


@dataclass
class Hunk:
    header: str
    old_start: int | None  # 1-based; None when the header has no numbers ("@@")
    old_len: int | None
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" ", "-", "+"), text
    old_no_eol: bool = False
    new_no_eol: bool = False
    bare_tail: int = 0  # trailing context lines that were empty lines in the patch text

    def old_block(self) -> list[str]:
        return [t for tag, t in self.lines if tag in " -"]

    def new_block(self) -> list[str]:
        return [t for tag, t in self.lines if tag in " +"]


@dataclass
class FilePatch:
    old: str | None  # None: the file is created
    new: str | None  # None: the file is deleted
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def target(self) -> str:
        return self.new if self.new is not None else self.old or ""


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_GIT_META = (
    "diff ",
    "index ",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "dissimilarity index",
    "Binary files",
    "GIT binary patch",
)


def _header_path(line: str) -> str:
    path = line[4:].split("\t", 1)[0].rstrip("\r\n")
    if path.startswith('"') and path.endswith('"') and len(path) >= 2:
        path = path[1:-1]
    return path.strip()


def parse_patch(text: str) -> list[FilePatch]:
    """Parse a unified diff (plain or git-style) into per-file patches."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    patches: list[FilePatch] = []
    i = 0
    current: FilePatch | None = None
    hunk: Hunk | None = None
    while i < len(lines):
        line = lines[i].rstrip("\r")
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _header_path(line), _header_path(lines[i + 1])
            old_p = None if old == "/dev/null" else old
            new_p = None if new == "/dev/null" else new
            if old_p is None and new_p is None:
                raise PatchError(f"line {i + 1}: both sides of the header are /dev/null")
            old_p, new_p = _strip_git_prefix(old_p, new_p)
            current = FilePatch(old_p, new_p)
            patches.append(current)
            hunk = None
            i += 2
            continue
        if line.startswith("@@"):
            if current is None:
                raise PatchError(
                    f"line {i + 1}: hunk header before any '--- path' / '+++ path' file header"
                )
            m = _HUNK.match(line)
            if m:
                old_len = int(m.group(2)) if m.group(2) is not None else 1
                hunk = Hunk(line, int(m.group(1)), old_len)
            elif line.strip() == "@@" or (line.startswith("@@ ") and " -" not in line):
                hunk = Hunk(line, None, None)
            else:
                raise PatchError(
                    f"line {i + 1}: malformed hunk header {line!r}; expected '@@ -12,3 +12,4 @@'"
                )
            current.hunks.append(hunk)
            i += 1
            continue
        if (
            line.startswith("rename from")
            or line.startswith("rename to")
            or line.startswith("copy from")
        ):
            raise PatchError(
                f"line {i + 1}: renames and copies are not supported; delete the old file and "
                "create the new one in the patch instead"
            )
        if hunk is not None and (line == "" or line[0] in " -+\\"):
            if line.startswith("\\"):
                if hunk.lines:
                    tag = hunk.lines[-1][0]
                    if tag in " -":
                        hunk.old_no_eol = True
                    if tag in " +":
                        hunk.new_no_eol = True
            elif line == "":
                hunk.lines.append((" ", ""))
                hunk.bare_tail += 1
            else:
                hunk.lines.append((line[0], line[1:]))
                hunk.bare_tail = 0
            i += 1
            continue
        if line.startswith(_GIT_META) or line.strip() == "" or current is None:
            hunk = None
            i += 1
            continue
        raise PatchError(
            f"line {i + 1}: unexpected {line[:60]!r}; every line of a hunk starts with ' ' "
            "(context), '-' (removed) or '+' (added)"
        )
    if not patches:
        raise PatchError(
            "no file headers found: a unified diff starts each file with '--- a/path' and "
            "'+++ b/path' lines, then '@@ -l,n +l,n @@' hunks"
        )
    for p in patches:
        for number, h in enumerate(p.hunks, 1):
            _trim_bare_tail(h)
            if not any(tag in "-+" for tag, _ in h.lines):
                raise PatchError(
                    f"hunk {number} for '{p.target}' ({h.header.strip()}) has no '-' or '+' "
                    "line, so it changes nothing; a hunk is its header followed by lines "
                    "starting with ' ' (context), '-' (removed) or '+' (added)"
                )
    return patches


def _trim_bare_tail(h: Hunk) -> None:
    """Drop trailing empty lines that only padded the patch text (the header counts say so)."""
    while h.bare_tail and h.old_len is not None and len(h.old_block()) > h.old_len:
        h.lines.pop()
        h.bare_tail -= 1


def _strip_git_prefix(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    a_ok = old is None or old.startswith("a/")
    b_ok = new is None or new.startswith("b/")
    if a_ok and b_ok:
        return (old[2:] if old else old), (new[2:] if new else new)
    return old, new


def _find(lines: list[str], block: list[str], expected: int, floor: int) -> int | None:
    """Where `block` occurs in `lines` at or after `floor`, nearest to `expected`."""
    n, m = len(lines), len(block)
    if m == 0:
        return min(max(expected, floor), n)
    for loose in (False, True):

        def at(pos: int, loose: bool = loose) -> bool:
            if loose:
                return all(lines[pos + k].rstrip() == block[k].rstrip() for k in range(m))
            return lines[pos : pos + m] == block

        candidates = range(floor, n - m + 1)
        for pos in sorted(candidates, key=lambda p: (abs(p - expected), p)):
            if at(pos):
                return pos
    return None


def _replacement(h: Hunk, matched: list[str]) -> list[str]:
    """The hunk's new lines, with context lines kept as the file has them (a context line
    matched while ignoring trailing whitespace must not rewrite that whitespace)."""
    out: list[str] = []
    k = 0
    for tag, text in h.lines:
        if tag == " ":
            out.append(matched[k])
            k += 1
        elif tag == "-":
            k += 1
        else:
            out.append(text)
    return out


def apply_hunks(rel: str, text: str, fp: FilePatch) -> str:
    """`text` with every hunk of `fp` applied, in order; PatchError if one does not apply."""
    lines, eol, final = split_lines(text)
    offset = 0
    floor = 0
    for number, h in enumerate(fp.hunks, 1):
        old_block, new_block = h.old_block(), h.new_block()
        if h.old_start is None:
            expected = floor
        else:
            expected = max(0, (h.old_start - 1 if h.old_start > 0 else 0) + offset)
            if not old_block and h.old_start > 0:
                expected = h.old_start + offset  # pure insertion after line old_start
        pos = _find(lines, old_block, expected, floor)
        if pos is None:
            raise PatchError(_hunk_failure(rel, number, h, lines, expected))
        at_end = pos + len(old_block) == len(lines)
        lines[pos : pos + len(old_block)] = _replacement(h, lines[pos : pos + len(old_block)])
        if at_end:  # "\ No newline at end of file" markers; without them keep the file's
            if h.new_no_eol:
                final = False
            elif h.old_no_eol:
                final = True
        offset += len(new_block) - len(old_block)
        floor = pos + len(new_block)
    return join_lines(lines, eol, final)


def _hunk_failure(rel: str, number: int, h: Hunk, lines: list[str], expected: int) -> str:
    old_block = h.old_block()
    first = next((t for t in old_block if t.strip()), old_block[0] if old_block else "")
    near = ""
    if first.strip():
        stripped = [ln.strip() for ln in lines]
        close = difflib.get_close_matches(first.strip(), stripped, n=1, cutoff=0.5)
        if close:
            idx = stripped.index(close[0])
            near = f"\n  closest line in the file: line {idx + 1}: {lines[idx].strip()[:120]}"
    wanted = "\n".join(f"  {t}" for t in old_block[:6])
    return (
        f"hunk {number} ({h.header.strip()}) does not apply to '{rel}': these lines were not "
        f"found near line {expected + 1}:\n{wanted}{near}\nRead the file again and rebuild the "
        "hunk from its current text."
    )
