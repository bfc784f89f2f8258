"""Actor kinds used only by the runtime tests."""

from __future__ import annotations

import os
import sys
from typing import Any

from thespian.actors import Actor

from tether.actors.base import ResourceActor, ResourceUnavailable
from tether.actors.process import ProcessActor
from tether.messages.calls import Call


class SlowProcessActor(ProcessActor):
    """Owns a `sleep` subprocess; "hang" never answers, "hang_once" answers only in an
    actor that is not the first to see it (args["marker"]: a path it creates): an
    idempotent call retried after a restart."""

    def on_start(self, key: str, config: dict[str, Any]) -> None:
        self.spawn([sys.executable, "-c", "import time; time.sleep(600)"], cwd="/")

    def on_call(self, call: Call) -> None:
        if call.op == "pid":
            self.reply(call, {"pid": self.proc.pid if self.proc else None})
        elif call.op == "hang_once":  # the first actor to see it marks it and never answers
            marker = call.args["marker"]
            if os.path.exists(marker):
                self.reply(call, {"pid": self.proc.pid if self.proc else None})
            else:
                open(marker, "w").close()


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


def marker() -> dict[str, str]:
    """Args for "hang_once": a fresh marker path (the first actor to see the call makes it)."""
    import tempfile
    import uuid

    return {"marker": os.path.join(tempfile.gettempdir(), f"tether-hang-once-{uuid.uuid4().hex}")}
