"""Base classes of every actor that owns a live resource (CONTRACT STUB — runtime issue #2
fills in the bodies; the names and signatures below are what tool families code against).

A resource actor is created by its kind's supervisor with a key and a config, answers
`Call`s with exactly one `Reply` each (now or later), answers health queries, and cleans
up everything it owns when it stops.

    class EchoActor(ResourceActor):
        kind = "echo"
        def on_start(self, key, config): self.set_state("ready")
        def on_call(self, call): self.reply(call, {"echo": call.args})

A process-owning actor additionally starts one subprocess in its own process group,
watches its pipes with ThespianWatch (no threads; the message loop never blocks) and
kills the whole process tree when it stops:

    class LanguageServerActor(ProcessActor):
        kind = "language_server"
        def on_start(self, key, config): self.spawn(argv, cwd=root)
        def on_stdout(self, data): ...  # feed the framing codec, settle pending requests
        def on_call(self, call):
            self.write(frame)                       # request to the server
            self.pending.add(req_id, call)          # settled later by reply()/fail()
"""

from __future__ import annotations

from typing import Any, ClassVar

from tether.messages.calls import Call


class ResourceActor:  # becomes a thespian Actor subclass
    kind: ClassVar[str] = ""

    # --- to override -------------------------------------------------------------
    def on_start(self, key: str, config: dict[str, Any]) -> None:
        """Called once, before any call. Raise to fail the start (the supervisor decides)."""

    def on_call(self, call: Call) -> None:
        """Handle one call; settle it with reply()/fail(), now or later (pending table)."""
        raise NotImplementedError

    def on_timer(self, tag: str) -> None:
        """A timer set with after() fired."""

    def on_stop(self) -> None:
        """Release what the actor owns (ProcessActor already kills its process tree)."""

    def health_extra(self) -> dict[str, Any]:
        """Kind-specific health fields (e.g. a language server's root and indexing state)."""
        return {}

    # --- provided ----------------------------------------------------------------
    def reply(self, call: Call, payload: dict[str, Any]) -> None:
        raise NotImplementedError

    def fail(self, call: Call, code: str, message: str) -> None:
        raise NotImplementedError

    def set_state(self, state: str, error: str = "") -> None:
        """starting | ready | busy | restarting | failed | stopped (+ last error)."""
        raise NotImplementedError

    def after(self, seconds: float, tag: str) -> None:
        """One-shot timer (wakeupAfter); on_timer(tag) is called when it fires."""
        raise NotImplementedError


class ProcessActor(ResourceActor):
    def spawn(self, argv: list[str], cwd: str, env: dict[str, str] | None = None) -> int:
        """Start the subprocess (own process group, stdin/stdout/stderr pipes); returns its pid."""
        raise NotImplementedError

    def write(self, data: bytes) -> None:
        """Write to the subprocess's stdin (buffered; never blocks the message loop)."""
        raise NotImplementedError

    def on_stdout(self, data: bytes) -> None:
        """Bytes arrived on the subprocess's stdout."""

    def on_exit(self, returncode: int | None) -> None:
        """The subprocess died. Default: fail every pending call (resource_died) and exit the
        actor abnormally so the supervisor applies the restart policy."""
        raise NotImplementedError

    def stderr_tail(self) -> str:
        """The last few KiB of the subprocess's stderr, for status and errors."""
        raise NotImplementedError
