"""The session's timer tags, each a frozen dataclass its owner's `after(seconds, tag)` arms
and `Session.on_timer` dispatches with `match`: the link's (a request's deadline, the stall
watch), readiness' (registration, warm-up, workspace listing) and freshness' (one waiting
call's quiet window, cap and grace, by its op id).
"""

from __future__ import annotations

from dataclasses import dataclass


# --- the link ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Deadline:
    """The earliest deadline of a request or a call has come."""


@dataclass(frozen=True)
class Stall:
    """Time to see whether the server still answers anyone (`budgets.RequestWatch`)."""


# --- readiness ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Registration:
    """No pull-diagnostics registration came in time: diagnostics come by publish."""


@dataclass(frozen=True)
class WarmWindow:
    """No warm-up progress began within the row's window: nothing to wait for."""


@dataclass(frozen=True)
class WarmCap:
    """The warm-up took as long as it may: go on."""


@dataclass(frozen=True)
class LoadCap:
    """The server never said it listed the workspace: ask it anyway."""


# --- freshness: about one waiting call (its op id) ---------------------------------------
@dataclass(frozen=True)
class Quiet:
    """The push quiet window after a publish has passed."""

    oid: int


@dataclass(frozen=True)
class Cap:
    """The wait's hard cap: answer, with the files still waiting marked pending."""

    oid: int


@dataclass(frozen=True)
class Grace:
    """The written files are fresh and the grace for other files is over."""

    oid: int


LinkTag = Deadline | Stall
ReadinessTag = Registration | WarmWindow | WarmCap | LoadCap
FreshnessTag = Quiet | Cap | Grace
SessionTimer = LinkTag | ReadinessTag | FreshnessTag
