"""Whether a debuggee ended at its session's memory ceiling, said in the reply.

A part of `tether.actors.debug_session.DebugSessionActor`, pure: the actor holds the
session's hard memory ceiling (`tether.capacity.ceiling`) and passes its `note`, which
reads the end of what the program printed for the signs of one (killed in its cgroup, or
an allocation that failed). A program that exited, or stopped on an exception, at the
ceiling gets a reply that says so (`memory`); any other reply is left as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tether.debug.output import OutputTail
from tether.messages.debug_ops import DebugReply, Exited, Outcome, Started, Stopped


def at_ceiling(reply: DebugReply, output: OutputTail, note: Callable[[str], str]) -> DebugReply:
    """The reply, saying so if the program ended (or stopped on a MemoryError) at the
    session's memory ceiling: killed in its cgroup, or an allocation failed."""
    if isinstance(reply, Started):
        return dataclasses.replace(reply, outcome=_outcome(reply.outcome, output, note))
    if isinstance(reply, Stopped | Exited):
        return _outcome(reply, output, note)
    return reply


def _outcome(reply: Outcome, output: OutputTail, note: Callable[[str], str]) -> Outcome:
    if isinstance(reply, Exited) or (isinstance(reply, Stopped) and reply.exception):
        exc = reply.exception if isinstance(reply, Stopped) else None
        said = output.text()
        said += f"\n{exc.type}: {exc.message}" if exc else "\n: "
        over = note(said)
        if over:
            return dataclasses.replace(reply, memory=f"the debuggee {over}")
    return reply
