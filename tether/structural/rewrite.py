"""Rewrite templates: captures substituted back, indentation kept, outermost matches only.

Indentation follows ast-grep's replacer: a multi-line template is indented like the line
the match starts on; a multi-line capture keeps its shape relative to its own first line
and is re-indented to the column where the metavariable sits in the template. Tabs and
spaces are carried as they are (the whitespace strings are copied, never converted).
"""

from __future__ import annotations

import re

from tether.structural.search import RawMatch, Span

_TOKEN = re.compile(r"\$\$\$([A-Z_][A-Z0-9_]*)|\$([A-Z_][A-Z0-9_]*)")


class RewriteError(ValueError):
    pass


def template_names(template: str) -> set[str]:
    return {m.group(1) or m.group(2) for m in _TOKEN.finditer(template)}


def check_template(template: str, bound: frozenset[str]) -> None:
    """A rewrite may only use metavariables the pattern binds (anything else is a typo)."""
    unknown = sorted(n for n in template_names(template) - bound if not n.startswith("_"))
    if unknown:
        names = ", ".join(f"${n}" for n in unknown)
        have = ", ".join(f"${n}" for n in sorted(bound)) or "none"
        raise RewriteError(
            f"the rewrite uses {names}, which the pattern does not bind (it binds: {have}). "
            f"Use the pattern's metavariable names in the rewrite."
        )


def _line_indent(src: bytes, offset: int) -> bytes:
    start = src.rfind(b"\n", 0, offset) + 1
    end = start
    while end < len(src) and src[end : end + 1] in (b" ", b"\t"):
        end += 1
    return src[start:end]


def _capture_bytes(src: bytes, span: Span | list[Span]) -> tuple[bytes, int]:
    if isinstance(span, list):
        if not span:
            return b"", 0
        return src[span[0][0] : span[-1][1]], span[0][0]
    return src[span[0] : span[1]], span[0]


def _reindent(text: bytes, origin_indent: bytes, target_indent: bytes) -> bytes:
    lines = text.split(b"\n")
    out = [lines[0]]
    for line in lines[1:]:
        if line.startswith(origin_indent):
            line = line[len(origin_indent) :]
        out.append(target_indent + line if line.strip() else line)
    return b"\n".join(out)


def render(template: str, src: bytes, match: RawMatch) -> bytes:
    """The replacement text of one match."""
    base = _line_indent(src, match.start)
    tpl = template.encode()
    tpl_lines = tpl.split(b"\n")
    tpl = b"\n".join([tpl_lines[0], *((base + ln) if ln.strip() else ln for ln in tpl_lines[1:])])
    out = bytearray()
    pos = 0
    text = tpl.decode("utf-8", "surrogateescape")
    for m in _TOKEN.finditer(text):
        out += text[pos : m.start()].encode("utf-8", "surrogateescape")
        pos = m.end()
        name = m.group(1) or m.group(2)
        span = match.captures.get(name)
        if span is None:
            continue  # anonymous or unbound: nothing to put back
        cap, cap_start = _capture_bytes(src, span)
        if b"\n" in cap:
            line_start = out.rfind(b"\n") + 1
            current = bytes(out[line_start:])
            target = current[: len(current) - len(current.lstrip(b" \t"))]
            cap = _reindent(cap, _line_indent(src, cap_start), target)
        out += cap
    out += text[pos:].encode("utf-8", "surrogateescape")
    return bytes(out)


def outermost(matches: list[RawMatch]) -> list[RawMatch]:
    """Outermost, non-overlapping matches in file order (nested ones are dropped)."""
    kept: list[RawMatch] = []
    last_end = -1
    for m in sorted(matches, key=lambda m: (m.start, -m.end)):
        if m.start >= last_end:
            kept.append(m)
            last_end = m.end
    return kept


def apply(template: str, src: bytes, matches: list[RawMatch]) -> tuple[bytes, int]:
    """The new file content and the number of replacements made."""
    chosen = outermost(matches)
    out = bytearray()
    pos = 0
    for m in chosen:
        out += src[pos : m.start]
        out += render(template, src, m)
        pos = m.end
    out += src[pos:]
    return bytes(out), len(chosen)
