"""The ops of the project checker (kind "checker", `tether.actors.checker`).

The key names the row and the project root ("<server>:<root>"), so the one op needs no
arguments: `Check` runs the row's checker there and answers {"records": [...],
"returncode": n}.
"""

from __future__ import annotations

from dataclasses import dataclass

from tether.messages.ops import Vocabulary

CHECKER = Vocabulary("checker")


@CHECKER.op
@dataclass(frozen=True)
class Check:
    """Run the project's own checker (basedpyright, tsc, cc, go vet, cargo, dart) and
    answer with its findings as diagnostics records."""
