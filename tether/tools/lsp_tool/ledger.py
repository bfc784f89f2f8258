"""The per-run diagnostics ledger: which diagnostics the agent has already been told about.

SPEC.md "Diagnostics on write": only newly introduced diagnostics are folded into a write's
result. The key is (severity, code, message) - position deliberately excluded, so a
diagnostic that merely moved down four lines is not new. Per file, each key keeps an
occurrence COUNT, so a second call site with the same error (same key, count 1 -> 2) is new.
The snapshot replaces the previous one whole: an entry that disappears is forgotten, so a
fixed-then-reintroduced error is reported again.

Which of several same-key instances is "the new one" cannot be told from the key; the
ledger prefers instances on lines that did not carry that key before, which picks the
added call site in the common case.

Lives host-side in `ctx.state["lsp"]` (plain data, one per run); paths are workspace-relative.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from tether.messages.language_server_ops import DiagnosticRecord

Key = tuple[int, str, str]


def key_of(d: DiagnosticRecord) -> Key:
    return (int(d.get("severity") or 1), str(d.get("code") or ""), str(d.get("message") or ""))


@dataclass
class Ledger:
    counts: dict[str, Counter[Key]] = field(default_factory=dict)
    lines: dict[str, dict[Key, set[int]]] = field(default_factory=dict)

    def known(self, path: str) -> bool:
        return path in self.counts

    def baseline(self, path: str, diagnostics: Iterable[DiagnosticRecord]) -> None:
        """Record what a file had before the agent touched it, reporting nothing."""
        self.fold(path, diagnostics)

    def fold(self, path: str, diagnostics: Iterable[DiagnosticRecord]) -> list[DiagnosticRecord]:
        """Replace the file's snapshot with `diagnostics`; return the ones that are new."""
        diags = [d.copy() for d in diagnostics]
        prev = self.counts.get(path, Counter())
        prev_lines = self.lines.get(path, {})
        by_key: dict[Key, list[DiagnosticRecord]] = defaultdict(list)
        for d in diags:
            by_key[key_of(d)].append(d)
        new: list[DiagnosticRecord] = []
        for k, items in by_key.items():
            extra = len(items) - prev.get(k, 0)
            if extra <= 0:
                continue
            seen = prev_lines.get(k, set())
            ranked = sorted(items, key=lambda d: (d.get("line") in seen, d.get("line", 0)))
            new.extend(ranked[:extra])
        self.counts[path] = Counter({k: len(v) for k, v in by_key.items()})
        self.lines[path] = {k: {d.get("line", 0) for d in v} for k, v in by_key.items()}
        new.sort(key=lambda d: (d.get("line", 0), d.get("column", 0)))
        return new

    def forget(self, path: str) -> None:
        self.counts.pop(path, None)
        self.lines.pop(path, None)
