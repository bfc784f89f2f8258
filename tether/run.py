"""`Run`: one conversation's view of the tools, on the host side.

A run knows what is connected (the runtime's resource kinds, its working directory,
conversation id, question port and vibe mode), shows the model the tools its surface may
see, and sends every call through the registry's one pipeline. It never raises from a
call and never hangs on one: everything ends in a `ToolResult`.

    run = Run(workdir="checkout")                 # no runtime: harness tools only
    run.call("read", {"path": "README.md"}).text

Hosts normally get a Run from `Runtime.open_run(...)`, which passes `runtime=self`.
`Run` is safe to call from many threads, and `acall` from many asyncio tasks at once
(one worker thread per call: a call may block on a human answering a card).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from tether.call_scope import CallScope
from tether.json_types import JSONObject, JSONValue
from tether.messages.calls import ErrorCode, ResourceError, Wire, WireValue
from tether.places import Place, check
from tether.places.registry import remember
from tether.questions import Answer, Card, CardKind, OneCardAtATime, QuestionPort
from tether.tools.export import SCHEMA_FORMATS, export_schema
from tether.tools.guardrails import (
    DEFAULT_PROTECTED,
    Approval,
    Confinement,
    GuardrailError,
    SerialLocks,
    make_policy,
)
from tether.tools.registry import MAX_NESTING, CardFields, QuestionFields, Registry, ToolStatus
from tether.tools.results import ToolResult
from tether.tools.spec import KIND_NEEDS, Needs, RunState, Surface, Tier, parse_surface

if TYPE_CHECKING:
    from tether.runtime_port import GatherCall, Op, RuntimePort
    from tether.tools.vibe_workers import VibeConfig

DEFAULT_QUESTION_TIMEOUT = 600.0  # seconds a question card waits for the human
DEFAULT_APPROVAL_TIMEOUT = 300.0  # seconds a permission card waits
DEFAULT_SERIAL_TIMEOUT = 600.0  # seconds a call waits for the previous call of a serial tool
CANCELLED_DELIVERY = 2.0  # s a call delivered after its cancel may take to be sent


class _CallThreads:
    """acall's threads: daemon threads made as needed and reused, never capped (a call may
    wait minutes on a human answering a card, so a bounded pool could starve the others;
    and a thread start per call cost 4-15 ms on a loaded machine). Daemon, unlike a
    ThreadPoolExecutor's, so a call still waiting never holds up the host's exit."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], ToolResult], Callable[[ToolResult], None]]
        ] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], ToolResult], then: Callable[[ToolResult], None]) -> None:
        """Run `job` on a thread, then `then(its result)` once that thread counts as idle
        again (so the caller's next submit finds it, rather than starting another)."""
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        if spawn:
            threading.Thread(target=self._work, name="tether-call", daemon=True).start()
        self._jobs.put((job, then))

    def _work(self) -> None:
        while True:
            job, then = self._jobs.get()
            result = job()  # (Run.call: it never raises)
            with self._lock:
                self._idle += 1
            then(result)


CALL_THREADS = _CallThreads()


class RunContext:
    """The `ToolContext` handlers and wrappers receive (one per run)."""

    def __init__(self, run: Run):
        self._run = run
        self.run_id = run.run_id
        self.workdir = run.workdir if run.workdir is not None else Path(os.devnull)
        self.state = run.state
        self.place: Place = run.place  # where the run's processes run (tether.places)

    # -- ToolContext ----------------------------------------------------------------------
    def resolve_path(self, rel: str) -> Path:
        confinement = self._run.confinement
        if confinement is None:
            raise GuardrailError("refused: this run has no working directory, so no paths")
        return confinement.resolve(rel)

    def call_resource(
        self,
        kind: str,
        key: str,
        op: Op,
        args: Mapping[str, WireValue] | None,
        timeout: float,
        deliver_cancelled: bool = False,
    ) -> Wire:
        """runtime.call (retried once if the actor dies, when `op` is idempotent). Clamped
        to the call's deadline, and ended by its cancel handle (`scope`).
        `deliver_cancelled`: sent even when the scope was cancelled already, so that the
        actor gets it and the cancel right after it (the eval bridge hands a cell the
        answers it waits for, and the cell is then interrupted)."""
        rt = self._run.runtime
        if rt is None:
            raise ResourceError(
                ErrorCode.UNAVAILABLE,
                f"no runtime is connected to this run, so resource {kind!r} cannot be reached",
            )
        scope = self.scope
        if deliver_cancelled and scope.cancelled:
            timeout = min(timeout, CANCELLED_DELIVERY)
        else:
            timeout = self._within(scope, timeout, f"{kind} {key!r}")
        return rt.call(self.run_id, kind, key, op, args, timeout, cancel=scope.cancel_handle)

    @property
    def scope(self) -> CallScope:
        return self._run.current_scope()

    @staticmethod
    def _within(scope: CallScope, timeout: float, what: str) -> float:
        """`timeout` clamped to the call's deadline; a call already cancelled or past its
        deadline is not sent at all."""
        if scope.cancelled:
            raise ResourceError(ErrorCode.CANCELLED, f"cancelled: {scope.cancel_handle.reason}")
        left = scope.clamp(timeout)
        if left <= 0:
            raise ResourceError(
                ErrorCode.DEADLINE,
                f"the call's deadline passed before {what} was asked; call again with more time",
            )
        return left

    def call_tool(self, name: str, args: Mapping[str, JSONValue]) -> ToolResult:
        return self._run.call(name, args)

    # -- ToolContext: what the families fan out with ---------------------------------------
    def gather(
        self,
        calls: Iterable[GatherCall],
        timeout: float,
    ) -> list[Wire | ResourceError]:
        """Concurrent fan-out (e.g. to every parser of the pool): runtime.gather. A failed
        or late call is a ResourceError in its slot."""
        rt = self._run.runtime
        batch = list(calls)
        if rt is None:
            err = ResourceError(ErrorCode.UNAVAILABLE, "no runtime is connected to this run")
            return [err for _ in batch]
        scope = self.scope
        timeout = self._within(scope, timeout, f"{len(batch)} resources")
        cancel = scope.cancel_handle
        return rt.gather(self.run_id, batch, timeout, cancel=cancel)

    def kind_keys(self, kind: str) -> list[str]:
        rt = self._run.runtime
        return [] if rt is None else list(rt.kind_keys(kind))

    def relative(self, path: Path) -> str:
        confinement = self._run.confinement
        return confinement.relative(path) if confinement else str(path)

    @property
    def runtime(self) -> RuntimePort | None:
        return self._run.runtime

    @property
    def surface(self) -> Surface:
        return self._run.surface

    def human_connected(self) -> bool:
        return self._run.human_connected()

    def ask_question(self, **fields: Unpack[QuestionFields]) -> tuple[Card, Answer]:
        """Show a question card through the run's port and wait (bounded) for the answer."""
        card = self._run.new_card(kind=CardKind.QUESTION, **fields)
        return card, self._run.ask_card(card, self._run.question_timeout)

    @property
    def run(self) -> Run:
        """The run itself (for families that keep per-run machinery, e.g. vibe workers)."""
        return self._run


class Run:
    """One conversation's tools: visibility, schemas, and the call entry points."""

    def __init__(
        self,
        runtime: RuntimePort | None = None,
        run_id: str = "",
        workdir: str | os.PathLike[str] | None = None,
        surface: Surface | str = Surface.DEFAULT,
        question_port: QuestionPort | None = None,
        vibe: bool = False,
        approval: Mapping[Tier | str, Approval | str] | None = None,
        extra_roots: Iterable[str | os.PathLike[str]] = (),
        protected: Iterable[str] = DEFAULT_PROTECTED,
        registry: Registry | None = None,
        question_timeout: float = DEFAULT_QUESTION_TIMEOUT,
        approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        serial_timeout: float = DEFAULT_SERIAL_TIMEOUT,
        prewarm: bool = False,
        vibe_config: VibeConfig | None = None,
        place: Place | str | None = None,
    ):
        """`prewarm`: parse the workspace in the parser pool's background right away, so the
        run's first ast_grep finds warm trees. Off by default: on a large checkout it costs
        CPU and cache memory the host may not want to spend on every conversation. (After
        the run's first ast_grep, the rest of that language's files are indexed anyway:
        a second search is then likely.)
        `vibe_config`: the vibe workers' backends per tier and caps
        (tether.tools.vibe_workers.VibeConfig).
        `place`: where the run's processes run (kernels first; tether.places): "host",
        "sandbox", a `Place`; default the runtime's (`Runtime.start(place=...)`), else host."""
        self.runtime = runtime
        default_place = runtime.default_place if runtime is not None else None
        self.place = check(Place.parse(place, default=default_place))
        if runtime is not None and self.place.kind != "host":  # (for the shared resources
            remember(self.place, Path(runtime.state_dir))  # keyed by place: tether.places)
        self.run_id = str(run_id or "")
        self.surface = parse_surface(surface)
        if workdir is not None:
            wd = Path(workdir).resolve()
            if not wd.is_dir():
                raise ValueError(f"workdir {str(workdir)!r} is not a directory")
            self.workdir: Path | None = wd
            self._confinement: Confinement | None = Confinement.build(wd, extra_roots, protected)
        else:
            self.workdir = None
            self._confinement = None
        self.question_port = question_port
        self.vibe = bool(vibe)
        self.vibe_config = vibe_config
        self._on_close: list[Callable[[], object]] = []
        self._asking = OneCardAtATime()
        self._policy = make_policy(approval)
        self.registry = registry if registry is not None else Registry.default()
        self.question_timeout = float(question_timeout)
        self.approval_timeout = float(approval_timeout)
        self.state: RunState = {}
        self._closed = False
        self._cards = itertools.count(1)
        self._card_lock = threading.Lock()
        self.serial_timeout = float(serial_timeout)
        self._serial = SerialLocks(self.serial_timeout)
        self._depth = threading.local()
        self._scope = threading.local()  # the top-level call this thread serves
        self._context = RunContext(self)
        if prewarm:
            self._prewarm()

    def _prewarm(self) -> None:
        if self.workdir is None or Needs.PARSER not in self.connected():
            return
        from tether.tools.structural import warm_index

        warm_index(self.runtime, self.run_id, self.workdir)

    # ---- CallSite (what the registry's pipeline needs) -------------------------------------
    @property
    def confinement(self) -> Confinement | None:
        return self._confinement

    @property
    def policy(self) -> Mapping[Tier, Approval] | None:
        return self._policy

    def context(self) -> RunContext:
        return self._context

    def new_card(self, **fields: Unpack[CardFields]) -> Card:
        with self._card_lock:
            number = next(self._cards)
        return Card(number=number, **fields)

    def ask_card(self, card: Card, timeout: float) -> Answer:
        """Show `card` through the question port and wait, at most `timeout` seconds in all
        (waiting for an earlier card included), for the human's typed answer."""
        cancel = self.current_scope().cancel_handle
        return self._asking.ask(self.question_port, card, timeout, cancel)

    def set_vibe(self, on: bool) -> str:
        """Turn vibe mode on or off. Off hides the vibe tools and kills nothing: running
        workers go on (and are reaped when done); the returned text says which still run."""
        self.vibe = bool(on)
        if on:
            return "vibe mode is on: vibe_spawn, vibe_send, vibe_wait, vibe_kill, vibe_list"
        workers = self.state.get("vibe")
        live = workers.live_ids() if workers is not None else []
        still = (
            f"; still running (not killed): {', '.join(live)}; turn vibe mode on again to "
            "reach them"
            if live
            else ""
        )
        return f"vibe mode is off: the vibe tools are hidden{still}"

    def on_close(self, callback: Callable[[], object]) -> None:
        """Call `callback()` when the run closes (before its actors are stopped)."""
        self._on_close.append(callback)

    def serial_lock(self, name: str) -> contextlib.AbstractContextManager[None]:
        """One call at a time of a tool that is not parallel-safe (debug, eval): the run's
        SerialLocks (tools.guardrails), waiting at most `serial_timeout`."""
        return self._serial.hold(name)

    def human_connected(self) -> bool:
        port = self.question_port
        if port is None:
            return False
        try:
            return bool(port.human_connected())
        except Exception:  # noqa: BLE001 - a broken port means nobody is there
            return False

    def connected(self) -> frozenset[Needs]:
        """The resources this run has, as the Needs they satisfy."""
        have: set[Needs] = set()
        if self.workdir is not None:
            have.add(Needs.WORKDIR)
        if self.run_id:
            have.add(Needs.CONVERSATION)
        if self.runtime is not None:
            try:
                kinds = set(self.runtime.connected_kinds())
            except Exception:  # noqa: BLE001 - a runtime that cannot say has nothing connected
                kinds = set()
            have.update(need for kind, need in KIND_NEEDS.items() if kind in kinds)
        port = self.question_port
        if port is not None:
            have.add(Needs.QUESTION_PORT)
            try:
                if port.has_target_space():
                    have.add(Needs.TARGET_SPACE)
            except Exception:  # noqa: BLE001
                pass
        if self.vibe:
            have.add(Needs.VIBE)
        return frozenset(have)

    # ---- what the model sees -----------------------------------------------------------
    def tools(self, include_absent: bool = False) -> list[ToolStatus]:
        """The tools on this run's surface (each with .name, .tier, .spec); with
        include_absent=True also the absent ones, each with the reason in .reason."""
        statuses = self.registry.status(self.surface, self.connected())
        return statuses if include_absent else [s for s in statuses if s.visible]

    def tool_schemas(self, fmt: str = "anthropic") -> list[JSONObject]:
        """The visible tools' declarations: "anthropic", "openai" or "mcp"."""
        if fmt not in SCHEMA_FORMATS:
            raise ValueError(
                f"unknown schema format {fmt!r}: use one of {', '.join(SCHEMA_FORMATS)}"
            )
        return [export_schema(s.spec, fmt) for s in self.tools()]

    # ---- calls -------------------------------------------------------------------------
    def current_scope(self) -> CallScope:
        """The top-level call the calling thread serves (a fresh one outside any call)."""
        scope = getattr(self._scope, "value", None)
        return scope if scope is not None else CallScope.start()

    def call(
        self,
        name: str,
        args: Mapping[str, JSONValue] | None = None,
        scope: CallScope | None = None,
    ) -> ToolResult:
        """Run one tool call through guardrails, approval, wrappers and handler. `scope`:
        the call's id, deadline and cancel handle (tether.call_scope); a nested call (the
        eval bridge's) serves its caller's."""
        if self._closed:
            return ToolResult.error(f"{name}: this run is closed; open a new run to call tools.")
        depth = getattr(self._depth, "value", 0)
        if depth >= MAX_NESTING:
            return ToolResult.error(
                f"{name}: tool calls nested {depth} deep (a tool calling tools calling tools); "
                "refused to stop a loop. Call it from the top level instead."
            )
        outer = getattr(self._scope, "value", None)
        if scope is None:
            scope = outer if outer is not None else CallScope.start()
        self._depth.value = depth + 1
        self._scope.value = scope
        started = time.monotonic()
        try:
            result = self.registry.call(self, name, args)
        except BaseException as e:  # noqa: BLE001 - Registry.call already catches Exception
            if isinstance(e, KeyboardInterrupt | SystemExit):
                raise
            result = ToolResult.error(f"{name} failed: {type(e).__name__}: {e}")
        finally:
            self._depth.value = depth
            self._scope.value = outer
        metrics = self.runtime.metrics if self.runtime is not None else None
        if metrics is not None and depth == 0:  # (a nested call is part of its caller's)
            tool = name if isinstance(name, str) and self.registry.get(name) else "(unknown)"
            metrics.observe(tool, time.monotonic() - started, result)
        return result

    async def acall(
        self,
        name: str,
        args: Mapping[str, JSONValue] | None = None,
        scope: CallScope | None = None,
        cancelled_because: str = "the caller's task was cancelled",
    ) -> ToolResult:
        """`call` for asyncio hosts: runs in its own worker thread, safe from many tasks. A
        cancelled task cancels the call (its scope, for `cancelled_because`): the resource
        stops its work too."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ToolResult] = loop.create_future()
        scope = scope if scope is not None else CallScope.start()

        def settle(result: ToolResult) -> None:
            if not future.done():
                future.set_result(result)

        def hand_back(result: ToolResult) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(settle, result)

        CALL_THREADS.submit(lambda: self.call(name, args, scope), hand_back)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            scope.cancel(cancelled_because)
            raise

    # ---- lifetime ----------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """End the run: later calls are refused; the runtime drops the run's actors."""
        if self._closed:
            return
        self._closed = True
        for callback in self._on_close:
            with contextlib.suppress(Exception):
                callback()
        rt = self.runtime
        if rt is None or not self.run_id:
            return
        if self.state.get("structural", {}).get("warmed"):
            from tether.tools.structural import stop_warming

            with contextlib.suppress(Exception):
                stop_warming(rt, self.run_id, self.state)
        with contextlib.suppress(Exception):
            rt.close_run(self.run_id)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Run(run_id={self.run_id!r}, workdir={str(self.workdir) if self.workdir else None!r}, "
            f"surface={self.surface.value})"
        )
