"""What a run's vibe worker table needs of its run and of the run's runtime.

`tether.tools.vibe_workers.VibeWorkers` reaches the run (`tether.run.Run`) and the runtime
(`tether.runtime.Runtime`) only through these protocols, as a run reaches its runtime
through `tether.runtime_port`: the tools name no host module, and a test can stand in a
small fake for either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from tether.messages.calls import ResourceError
from tether.messages.worker_ops import (
    EndView,
    Kill,
    Permit,
    Poll,
    Prepare,
    Send,
    Spawn,
    Status,
    Wait,
)
from tether.places import Place
from tether.tools.registry import CallSite, Registry
from tether.tools.spec import RunState
from tether.tools.vibe_config import VibeConfig

WorkerOp = Spawn | Prepare | Send | Status | Wait | Poll | Permit | Kill | EndView


class WorkerRuntime(Protocol):
    """What a worker table needs of its run's runtime (tether.runtime.Runtime)."""

    @property
    def state_dir(self) -> Path: ...

    @property
    def closed(self) -> bool: ...

    def call(
        self, run_id: str, kind: str, key: str, op: WorkerOp, args: None, timeout: float
    ) -> Mapping[str, object]: ...

    def gather(
        self, run_id: str, calls: Sequence[tuple[str, str, Status, None]], timeout: float
    ) -> Sequence[Mapping[str, object] | ResourceError]: ...

    def connected_kinds(self) -> set[str]: ...


class WorkerRun(CallSite, Protocol):
    """What a worker table needs of its run (tether.run.Run): the call site its workers'
    prompts are gated at, and these."""

    run_id: str
    workdir: Path | None
    state: RunState  # per-run state of tool families (the staging, this table)

    @property
    def runtime(self) -> WorkerRuntime | None: ...

    place: Place
    registry: Registry
    vibe_config: VibeConfig | None

    def on_close(self, callback: Callable[[], object]) -> None: ...


@runtime_checkable
class RunHolder(Protocol):
    """A tool context that holds its run (tether.run.RunContext)."""

    @property
    def run(self) -> WorkerRun: ...
