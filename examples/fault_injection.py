"""Fault injection, end to end: kill a resource's process, crash an actor, delay and drop
replies, and watch the supervisor put things right (or give up and say so).

    python examples/fault_injection.py

Uses the built-in echo kinds (tether.actors.echo), so it needs no language servers.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tether.messages.calls import ResourceError  # noqa: E402
from tether.runtime import Runtime, load_kinds  # noqa: E402


def node(tree: dict, name: str) -> dict | None:
    if tree["name"] == name:
        return tree
    for child in tree["children"]:
        found = node(child, name)
        if found:
            return found
    return None


def call(rt: Runtime, op: str = "echo", kind: str = "echo_process", timeout: float = 2.0) -> str:
    try:
        return f"ok {rt.call('conv-1', kind, 'k', op, {'hello': 'world'}, timeout)}"
    except ResourceError as exc:
        return f"error [{exc.code}] {exc.message}"


def wait_serving(rt: Runtime, kind: str = "echo_process", limit: float = 5.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < limit:
        answer = call(rt, kind=kind, timeout=0.5)
        if answer.startswith("ok"):
            return time.monotonic() - start
        if answer.startswith("error [gave_up]"):  # (it will not come back: no use waiting)
            raise SystemExit(f"{kind}:k is not coming back: {answer}")
        time.sleep(0.01)
    raise SystemExit(f"{kind}:k did not come back within {limit} s")


def main() -> int:
    with Runtime.start(kinds=load_kinds(["tether.actors.echo"])) as rt:
        print("first call:          ", call(rt))
        pid = rt.call("conv-1", "echo_process", "k", "pid", {}, 2.0)["pid"]

        print(f"\n1. kill_process: SIGKILL the echo subprocess (pid {pid})")
        print("  ", rt.inject("kill_process", target="echo_process:k")["message"])
        print(
            f"   serving again after {wait_serving(rt) * 1000:.0f} ms;",
            "restarts:",
            node(rt.health(), "echo_process:k")["restarts"],
        )

        print("\n2. crash_actor: SIGKILL the actor process itself")
        print("  ", rt.inject("crash_actor", target="echo_process:k")["message"])
        print(f"   serving again after {wait_serving(rt) * 1000:.0f} ms")

        print("\n3. delay: the next call waits 0.5 s inside the actor (its loop keeps running)")
        rt.inject("delay", target="echo_process:k", seconds=0.5)
        start = time.monotonic()
        print("  ", call(rt), f"after {time.monotonic() - start:.2f} s")

        print("\n4. delay past the caller's deadline: a clear deadline error, no hang")
        rt.inject("delay", target="echo_process:k", seconds=3.0)
        print("  ", call(rt, timeout=0.5))

        print("\n5. drop_reply: the reply is lost; the caller gets its deadline error")
        rt.inject("drop_reply", target="echo_process:k")
        print("  ", call(rt, timeout=0.5))
        print("   next call:", call(rt))

        print("\n6. keep killing it: after 5 restarts in 60 s the supervisor gives up")
        for _ in range(6):
            try:
                wait_serving(rt, limit=8.0)
                rt.inject("kill_process", target="echo_process:k")
            except (ResourceError, SystemExit):
                break
        time.sleep(0.5)
        leaf = node(rt.health(), "echo_process:k")
        print(f"   state: {leaf['state']}; last error: {leaf['last_error']}")
        print("  ", call(rt))
    print("\nshut down; no process left behind")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
