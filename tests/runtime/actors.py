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
    """Owns a `sleep` subprocess; "hang" never answers, "hang_once" answers only on a
    second incarnation (an idempotent call retried after a restart)."""

    def on_start(self, key: str, config: dict[str, Any]) -> None:
        self.spawn([sys.executable, "-c", "import time; time.sleep(600)"], cwd="/")

    def on_call(self, call: Call) -> None:
        if call.op == "pid":
            self.reply(call, {"pid": self.proc.pid if self.proc else None})
        elif call.op == "hang_once" and self.incarnation > 1:
            self.reply(call, {"pid": self.proc.pid if self.proc else None})


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
