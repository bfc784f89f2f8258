"""Structural search and rewrite on tree-sitter: the parser pool's resource kind.

The pure core (languages, pattern, matcher, query, search, rewrite, staging, cache, scan,
ops) runs without actors; `actor.ParserActor` serves it as resource kind "parser", a
small pool of SHARED actor processes keyed "0".."N-1" under the kind's supervisor.
"""

from __future__ import annotations

import os

from tether.supervisors.spec import ChildSpec, KindSpec, Restart, Scope

POOL_SIZE = max(1, min(4, os.cpu_count() or 1))
POOL_KEYS = [str(i) for i in range(POOL_SIZE)]

KINDS: list[KindSpec] = [
    KindSpec(
        "parser",
        "tether.actors.structural.actor:ParserActor",
        Scope.SHARED,
        ChildSpec(Restart.PERMANENT, max_restarts=5, period=60.0, backoff_initial=0.05),
        config={"keys": POOL_KEYS},
    ),
]
