"""`edit`: replace one exact piece of text (or every occurrence), with errors that show
the candidates or the closest lines when old_string does not name one place."""

from __future__ import annotations

import difflib
import os
import re

from tether.json_types import JSONObject
from tether.tools.harness.files import atomic_write, decode, open_checked
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

MAX_EDIT_BYTES = 20 * 1024 * 1024  # edit and apply_patch hold the whole file in memory


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def edit(ctx: ToolContext, args: JSONObject) -> ToolResult:
    # (validated: the schema makes these strings)
    rel, old, new = str(args["path"]), str(args["old_string"]), str(args["new_string"])
    replace_all = bool(args.get("replace_all", False))
    path = ctx.resolve_path(rel)
    if old == new:
        return ToolResult.error("old_string and new_string are the same; nothing to change.")
    opened = open_checked(ctx, path, rel)
    if isinstance(opened, ToolResult):
        return opened
    with opened[0] as f:
        if opened[1] > MAX_EDIT_BYTES:
            return ToolResult.error(
                f"'{rel}' is {opened[1]} bytes; edit changes files up to "
                f"{MAX_EDIT_BYTES // (1024 * 1024)} MiB. Use write to replace it whole."
            )
        raw = f.read()
        mode = os.fstat(f.fileno()).st_mode
    text = decode(raw, rel, "edit changes")
    if isinstance(text, ToolResult):
        return text
    work, crlf = text, False
    if "\r\n" in text and "\r\n" not in old:
        # The model saw LF line endings in read; match against the same.
        work, crlf = text.replace("\r\n", "\n"), True
    starts = [m.start() for m in re.finditer(re.escape(old), work)]
    if not starts:
        return ToolResult.error(_no_match_message(rel, work, old))
    if len(starts) > 1 and not replace_all:
        return ToolResult.error(_many_matches_message(rel, work, old, starts))
    result = work.replace(old, new) if replace_all else work.replace(old, new, 1)
    if crlf:
        result = result.replace("\n", "\r\n")
    atomic_write(ctx, path, result.encode("utf-8", errors="surrogatepass"), mode)
    lines = ", ".join(str(_line_of(work, s)) for s in starts[:20])
    count = f"{len(starts)} occurrences" if len(starts) > 1 else "1 occurrence"
    written = ctx.relative(path)
    return ToolResult.ok(
        f"replaced {count} in '{written}' (line {lines}).",
        data={"written": [written], "replacements": len(starts)},
    )


def _many_matches_message(rel: str, text: str, old: str, starts: list[int]) -> str:
    lines = text.split("\n")
    shown = []
    for s in starts[:10]:
        n = _line_of(text, s)
        shown.append(f"  line {n}: {lines[n - 1].strip()[:120]}")
    more = f"\n  ... and {len(starts) - 10} more" if len(starts) > 10 else ""
    return (
        f"old_string matches {len(starts)} times in '{rel}'; it must match exactly once.\n"
        "Candidates:\n" + "\n".join(shown) + more + "\n"
        "Add surrounding lines to old_string so it names one place, or set replace_all=true "
        "to change every occurrence."
    )


_LINE_PREFIX = re.compile(r"^\s*\d+\t", re.M)


def _no_match_message(rel: str, text: str, old: str) -> str:
    lines = text.split("\n")
    hints: list[str] = []
    if _LINE_PREFIX.search(old):
        hints.append(
            "old_string seems to contain the line-number prefix that read shows; "
            "leave the numbers and the tab out."
        )
    squashed = re.sub(r"\s+", " ", old).strip()
    if squashed and squashed in re.sub(r"\s+", " ", text):
        hints.append(
            "it matches if whitespace is ignored: copy indentation and line breaks exactly."
        )
    first = next((ln.strip() for ln in old.split("\n") if ln.strip()), "")
    candidates: list[str] = []
    if first:
        stripped = [ln.strip() for ln in lines]
        close = difflib.get_close_matches(first, stripped, n=5, cutoff=0.6)
        seen: set[int] = set()
        for c in close:
            for i, s in enumerate(stripped):
                if s == c and i not in seen:
                    seen.add(i)
                    candidates.append(f"  line {i + 1}: {lines[i].strip()[:120]}")
                    break
    msg = f"old_string was not found in '{rel}'; it must match the file exactly, once."
    if candidates:
        msg += "\nClosest lines:\n" + "\n".join(candidates)
    if hints:
        msg += "\n" + "\n".join(f"Hint: {h}" for h in hints)
    msg += "\nRead the file again and copy the text to replace exactly."
    return msg
