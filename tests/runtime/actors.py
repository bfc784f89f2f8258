"""Actor kinds used only by the runtime tests."""

from __future__ import annotations

import os
import sys
from typing import Any

from thespian.actors import Actor

from tether.actors.base import ResourceActor, ResourceUnavailable
from tether.actors.process import ProcessActor
from tether.messages.calls import Call
from tether.messages.echo_ops import PROBE, SLOW, STUBBORN, Hang, HangOnce, Pid, Release, StackRoom


class SlowProcessActor(ProcessActor):
    """Owns a `sleep` subprocess; ops `SLOW`: "hang" never answers, "hang_once" answers
    only in an actor that is not the first to see it (an idempotent call retried after a
    restart)."""

    def on_start(self, key: str, config: dict[str, Any]) -> None:
        self.spawn([sys.executable, "-c", "import time; time.sleep(600)"], cwd="/")

    def on_call(self, call: Call) -> None:
        match SLOW.parse(call):
            case Pid():
                self.reply(call, {"pid": self.proc.pid if self.proc else None})
            case HangOnce(marker=marker) if os.path.exists(marker):
                self.reply(call, {"pid": self.proc.pid if self.proc else None})
            case HangOnce(marker=marker):  # the first actor to see it marks it, never answers
                open(marker, "w").close()
            case Hang():
                pass


class UnavailableActor(ResourceActor):
    def on_start(self, key: str, config: dict[str, Any]) -> None:
        raise ResourceUnavailable("frob not on PATH: install frob or call status")


class ChattyActor(ResourceActor):
    def on_start(self, key: str, config: dict[str, Any]) -> None:
        self.pid = os.getpid()


class Spawner(Actor):
    """A bare thespian parent that creates a tether actor and never sends it Start."""

    def receiveMessage(self, msg: Any, sender: Any) -> None:  # noqa: N802 (thespian's name)
        if msg == "spawn":
            from tether.actors.echo import EchoActor

            self.createActor(EchoActor)
            self.send(sender, os.getpid())


def marker(where: os.PathLike[str]) -> dict[str, str]:
    """Args for HangOnce: a fresh marker path in `where` (the test's own tmp_path: the
    machine's /tmp is not the tests' to litter), made by the first actor to see the call."""
    import uuid

    return {"marker": os.path.join(where, f"hang-once-{uuid.uuid4().hex}")}


class ProbeActor(ResourceActor):
    """Reports, from inside its own message handler, what the thespian loop patches are
    for: "stack_room" (frame stack left in the chunk the handler runs in), "pid"."""

    def on_call(self, call: Call) -> None:
        from tests.runtime.loop_probes import data_stack_room

        match PROBE.parse(call):
            case StackRoom():
                self.reply(call, {"room": data_stack_room(), "pid": os.getpid()})
            case Pid():
                self.reply(call, {"pid": os.getpid()})


STUBBORN_SCRIPT = r"""
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


class StubbornProcessActor(ProcessActor):
    """Owns a subprocess (with a child of its own) that ignores SIGTERM. op "release":
    runs the actor's release (what its exit runs) and answers how long it took."""

    def on_start(self, key: str, config: dict[str, Any]) -> None:
        self.out = b""
        self.spawn([sys.executable, "-c", STUBBORN_SCRIPT], cwd="/")
        self.set_state("starting")

    def on_stdout(self, data: bytes) -> None:
        self.out += data
        if self.out.endswith(b"\n") and self.state == "starting":
            self.set_state("ready")

    def on_call(self, call: Call) -> None:
        import time

        match STUBBORN.parse(call):
            case Release():
                pids = [self.proc.pid if self.proc else 0, int(self.out)]
                start = time.monotonic()
                self.release()
                self.reply(call, {"seconds": time.monotonic() - start, "pids": pids})
