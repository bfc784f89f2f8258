"""`Faults`: the injected faults a resource actor is carrying out (tether's fault injection).

`rt.inject(fault, target=...)` reaches the actor as an `Inject`. Two faults are the
actor's bookkeeping alone and live here: `delay` (the next `count` calls wait `seconds`
before they are delivered) and `drop_reply` (the next `count` replies are never sent, as
if lost: the caller's deadline answers). The others act on what the actor owns
(`kill_process`, `evict`) and stay with the actor; `plan` says None for them.
"""

from __future__ import annotations

from tether.json_types import JSONObject, JSONValue


class Faults:
    def __init__(self) -> None:
        self.delays: list[float] = []  # seconds, one per next call
        self.drops = 0  # how many next replies to drop

    def plan(self, fault: str, args: JSONObject, name: str) -> str | None:
        """Take `fault` on, saying what will happen to `name`; None: not one of these."""
        count = int(_scalar(args, "count", 1))
        if fault == "delay":
            seconds = float(_scalar(args, "seconds", 1.0))
            self.delays.extend([seconds] * count)
            return f"the next {count} call(s) to {name} wait {seconds:g} s"
        if fault == "drop_reply":
            self.drops += count
            return f"the next {count} reply(ies) of {name} will be dropped"
        return None

    def next_delay(self) -> float | None:
        """How long the call being delivered waits first (None: not at all)."""
        return self.delays.pop(0) if self.delays else None

    def drop(self) -> bool:
        """Is the reply being sent one to drop? (counts it)."""
        if self.drops > 0:
            self.drops -= 1
            return True
        return False


def _scalar(args: JSONObject, name: str, default: float) -> float | str:
    """An argument as int() and float() take it (a number or its text); TypeError else."""
    value: JSONValue = args.get(name, default)
    if isinstance(value, int | float | str):
        return value
    raise TypeError(f"{name} must be a number, not {value!r}")
