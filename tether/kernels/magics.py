"""Stand-in until the cells branch lands: IPython idioms -> plain code, and the prelude.

The real module (issue 13, deliverable 3) replaces this file; only its interface is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class MagicError(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Rewritten:
    code: str
    notes: list[str] = field(default_factory=list)


def rewrite(language: str, code: str) -> Rewritten:
    return Rewritten(code)


def prelude(language: str) -> str:
    return ""
