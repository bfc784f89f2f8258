"""Echo resources for tests, benchmarks and fault injection: one in-process, one owning a process.

- kind "echo" (SHARED, `EchoActor`): answers in its own message loop. ops: "echo" (returns
  the args), "sleep" (answers after args["seconds"] via a timer: a slow resource that does
  not block its loop), "fail" (answers with an error), "raise" (on_call raises),
  "pid" (the actor process's pid), "stop" (stops normally), "crash" (stops as a crash).
- kind "echo_process" (SHARED, `EchoProcessActor`): a real subprocess, a tiny python
  line echo, so kill_process / restart / no-orphan behaviour can be tested on a real
  process. ops: "echo" (round trip through the subprocess; args["delay"] makes the
  subprocess answer that many seconds later, like a slow server), "pid" (the
  subprocess's pid), "stderr" (make the subprocess write a line to stderr).
- kind "echo_run" (RUN scope, `EchoProcessActor`): the same, one per run and key.

A key is free text; the config may set "ttl"/"idle_ttl" through the ChildSpec only.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from thespian.actors import Actor

from tether.actors.base import ResourceActor
from tether.actors.process import ProcessActor
from tether.kinds import ChildSpec, KindSpec, Restart, Scope
from tether.messages.calls import Call, ErrorCode

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


class EchoActor(ResourceActor):
    def on_start(self, key: str, config: dict[str, Any]) -> None:
        self.timers: dict[str, Call] = {}

    def on_call(self, call: Call) -> None:
        op = call.op
        if op == "echo":
            self.reply(call, {"echo": call.args, "key": self.key})
        elif op == "sleep":
            self.timers[call.call_id] = call
            self.after(float(call.args.get("seconds", 0.1)), call.call_id)
        elif op == "fail":
            self.fail(call, ErrorCode.FAILED, str(call.args.get("message", "echo failed as asked")))
        elif op == "raise":
            raise RuntimeError(str(call.args.get("message", "echo raised as asked")))
        elif op == "pid":
            self.reply(call, {"pid": os.getpid()})
        elif op == "stop":
            self.reply(call, {"stopping": True})
            self.stop("normal")
        elif op == "crash":
            self.reply(call, {"crashing": True})
            self.stop("crash", "crashed as asked")
        else:
            self.fail(
                call,
                ErrorCode.BAD_REQUEST,
                f"echo has no op {op!r}; ops: echo, sleep, fail, raise, pid, stop, crash",
            )

    def on_timer(self, tag: str) -> None:
        call = self.timers.pop(tag, None)
        if call is not None:
            self.reply(call, {"slept": call.args.get("seconds", 0.1)})


class EchoProcessActor(ProcessActor):
    def on_start(self, key: str, config: dict[str, Any]) -> None:
        self.buffer = b""
        self.waiting: list[Call] = []  # FIFO: the subprocess answers in order
        self.spawn([sys.executable, "-u", "-c", ECHO_SCRIPT], cwd=os.getcwd())

    def on_call(self, call: Call) -> None:
        if call.op == "pid":
            self.reply(
                call, {"pid": self.proc.pid if self.proc else None, "actor_pid": os.getpid()}
            )
        elif call.op in ("echo", "stderr"):
            self.waiting.append(call)
            self.write(
                (json.dumps({"op": call.op, "args": call.args, **call.args}) + "\n").encode()
            )
        else:
            self.fail(
                call,
                ErrorCode.BAD_REQUEST,
                f"echo_process has no op {call.op!r}; ops: echo, pid, stderr",
            )

    def on_stdout(self, data: bytes) -> None:
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if self.waiting:
                call = self.waiting.pop(0)
                self.reply(call, {"echo": json.loads(line)["args"], "key": self.key})

    def health_extra(self) -> dict[str, Any]:
        return {"waiting": len(self.waiting), "stderr_tail": self.stderr_tail()[-200:]}


class RawEchoActor(Actor):
    """A bare thespian actor that sends back whatever bytes it gets (to the address riding
    beside them, if any): the anchor benchmarks/routing.py compares tether's calls with."""

    def receiveMessage(self, msg: Any, sender: Any) -> None:  # noqa: N802 (thespian's name)
        if isinstance(msg, bytes):
            self.send(sender, msg)
        elif isinstance(msg, tuple) and len(msg) == 2 and isinstance(msg[0], bytes):
            self.send(msg[1], msg[0])


class RawForwardActor(Actor):
    """A bare thespian forwarder: bytes go on to the target with the sender beside them.
    With RawEchoActor it is the floor of any three-hop route (host -> router -> actor -> host)."""

    target: Any = None

    def receiveMessage(self, msg: Any, sender: Any) -> None:  # noqa: N802 (thespian's name)
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
