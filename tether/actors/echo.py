"""Echo resources for tests, benchmarks and fault injection: one in-process, one owning a process.

- kind "echo" (SHARED, `EchoActor`): answers in its own message loop (ops: `ECHO`, in
  `tether.messages.echo_ops`: echo, sleep on a timer, fail, raise, pid, stop, crash).
- kind "echo_process" (SHARED, `EchoProcessActor`): a real subprocess, a tiny python
  line echo, so kill_process / restart / no-orphan behaviour can be tested on a real
  process (ops: `ECHO_PROCESS`: echo through the subprocess, pid, stderr).
- kind "echo_run" (RUN scope, `EchoProcessActor`): the same, one per run and key.

A key is free text; the config may set "ttl"/"idle_ttl" through the ChildSpec only.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from thespian.actors import Actor, ActorAddress

from tether.actors.base import ResourceActor
from tether.actors.process import ProcessActor
from tether.json_types import JSONObject
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import Call, ErrorCode
from tether.messages.echo_ops import (
    ECHO,
    ECHO_PROCESS,
    Crash,
    Echo,
    Fail,
    Pid,
    Raise,
    Sleep,
    Stderr,
    Stop,
)

ECHO_SCRIPT = r"""
import json, sys, time
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("delay"):  # a slow server: answer after this many seconds
        time.sleep(float(msg["delay"]))
    if msg.get("op") == "stderr":
        sys.stderr.write(msg.get("text", "stderr line") + "\n"); sys.stderr.flush()
    sys.stdout.write(json.dumps(msg) + "\n"); sys.stdout.flush()
"""


@dataclass(frozen=True)
class Slept:
    """Timer tag: the sleep of call `call_id` is over."""

    call_id: str


class EchoActor(ResourceActor):
    def on_start(self, key: str, config: JSONObject) -> None:
        self.sleeping: dict[str, tuple[Call, float]] = {}

    def on_call(self, call: Call) -> None:
        match ECHO.parse(call):
            case Echo(data=data):
                self.reply(call, {"echo": data, "key": self.key})
            case Sleep(seconds=seconds):
                self.sleeping[call.call_id] = (call, seconds)
                self.after(seconds, Slept(call.call_id))
            case Fail(message=message):
                self.fail(call, ErrorCode.FAILED, message)
            case Raise(message=message):
                raise RuntimeError(message)
            case Pid():
                self.reply(call, {"pid": os.getpid()})
            case Stop():
                self.reply(call, {"stopping": True})
                self.stop("normal")
            case Crash():
                self.reply(call, {"crashing": True})
                self.stop("crash", "crashed as asked")

    def on_timer(self, tag: Slept) -> None:
        match tag:
            case Slept(call_id=call_id) if call_id in self.sleeping:
                call, seconds = self.sleeping.pop(call_id)
                self.reply(call, {"slept": seconds})


class EchoProcessActor(ProcessActor):
    def on_start(self, key: str, config: JSONObject) -> None:
        self.buffer = b""
        self.waiting: list[Call] = []  # FIFO: the subprocess answers in order
        self.spawn([sys.executable, "-u", "-c", ECHO_SCRIPT], cwd=os.getcwd())

    def on_call(self, call: Call) -> None:
        match ECHO_PROCESS.parse(call):
            case Pid():
                self.reply(
                    call, {"pid": self.proc.pid if self.proc else None, "actor_pid": os.getpid()}
                )
            case Echo(data=data):
                self._through_process(call, {"op": "echo", "args": data, **data})
            case Stderr(text=text):
                self._through_process(call, {"op": "stderr", "args": {"text": text}, "text": text})

    def _through_process(self, call: Call, line: JSONObject) -> None:
        self.waiting.append(call)
        self.write((json.dumps(line) + "\n").encode())

    def on_stdout(self, data: bytes) -> None:
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if self.waiting:
                call = self.waiting.pop(0)
                self.reply(call, {"echo": json.loads(line)["args"], "key": self.key})

    def health_extra(self) -> JSONObject:
        return {"waiting": len(self.waiting), "stderr_tail": self.stderr_tail()[-200:]}


class RawEchoActor(Actor):
    """A bare thespian actor that sends back whatever bytes it gets (to the address riding
    beside them, if any): the anchor benchmarks/routing.py compares tether's calls with."""

    # (msg: whatever thespian delivers; only bytes and (bytes, address) are answered)
    def receiveMessage(self, msg: object, sender: ActorAddress) -> None:  # noqa: N802
        if isinstance(msg, bytes):
            self.send(sender, msg)
        elif isinstance(msg, tuple) and len(msg) == 2 and isinstance(msg[0], bytes):
            self.send(msg[1], msg[0])


class RawForwardActor(Actor):
    """A bare thespian forwarder: bytes go on to the target with the sender beside them.
    With RawEchoActor it is the floor of any three-hop route (host -> router -> actor -> host)."""

    target: ActorAddress | None = None

    # (msg: whatever thespian delivers; bytes, or ("target", address))
    def receiveMessage(self, msg: object, sender: ActorAddress) -> None:  # noqa: N802
        if isinstance(msg, bytes):
            self.send(self.target, (msg, sender))
        elif isinstance(msg, tuple) and msg and msg[0] == "target":
            self.target = msg[1]
            self.send(sender, b"ok")


KINDS: list[KindSpec] = [
    KindSpec("echo", "tether.actors.echo:EchoActor", Scope.SHARED, ChildSpec(Restart.TRANSIENT)),
    KindSpec(
        "echo_process",
        "tether.actors.echo:EchoProcessActor",
        Scope.SHARED,
        ChildSpec(Restart.PERMANENT, max_restarts=5, period=60.0, backoff_initial=0.05),
    ),
    KindSpec(
        "echo_run",
        "tether.actors.echo:EchoProcessActor",
        Scope.RUN,
        ChildSpec(Restart.TRANSIENT, backoff_initial=0.05),
    ),
]
