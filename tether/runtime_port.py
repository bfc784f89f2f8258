"""What a `Run` (and the tools it serves) needs of a runtime: a small typed protocol.

`tether.runtime.Runtime` implements it. A `Run` holds a `RuntimePort`, never the whole
runtime, so a tool sees only these calls (and a test or another host may hand a Run its
own implementation): resource calls one at a time (`call`) and fanned out (`gather`),
what is connected, the run's end, and the few facts a run reads (where state lives, the
default place, the metrics it counts calls in). The other way, `RunOptions`: what
`Runtime.open_run(...)` passes on to the Run it opens.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict

from tether.call_scope import CancelHandle
from tether.health_node import HealthNode
from tether.messages.calls import GatherCall, Op, ResourceError, Wire, WireValue
from tether.metrics import Metrics
from tether.places import Place

if TYPE_CHECKING:
    from tether.tools.guardrails import Approval
    from tether.tools.registry import Registry
    from tether.tools.spec import Tier
    from tether.tools.vibe_workers import VibeConfig


class RuntimePort(Protocol):
    """The runtime as a run sees it."""

    @property
    def state_dir(self) -> Path: ...

    @property
    def default_place(self) -> Place: ...

    @property
    def metrics(self) -> Metrics | None: ...

    @property
    def closed(self) -> bool:
        """shutdown() was called."""
        ...

    def call(
        self,
        run_id: str,
        kind: str,
        key: str,
        op: Op,
        args: Mapping[str, WireValue] | None = None,
        timeout: float = ...,  # (default: tether.host.engine.DEFAULT_CALL_TIMEOUT)
        cancel: CancelHandle | None = None,
    ) -> Wire:
        """Ask the resource actor (kind, key) of run `run_id` to do `op`: its reply's
        payload, or a ResourceError saying what failed. Never waits past `timeout`. Retried
        once on a new actor if `op` is idempotent (its vocabulary says: tether.messages.ops)."""
        ...

    def gather(
        self,
        run_id: str,
        calls: Sequence[GatherCall],
        timeout: float = ...,  # (default: tether.host.engine.DEFAULT_CALL_TIMEOUT)
        cancel: CancelHandle | None = None,
    ) -> list[Wire | ResourceError]:
        """Several calls at once, answers in order (a failed one: its ResourceError)."""
        ...

    def connected_kinds(self) -> set[str]: ...

    def kind_keys(self, kind: str, timeout: float = 5.0) -> list[str]: ...

    def close_run(self, run_id: str, timeout: float = 5.0) -> None: ...

    def health(self, timeout: float = 5.0) -> HealthNode: ...


class RunOptions(TypedDict, total=False):
    """What `Runtime.open_run(...)` passes on to `Run` beyond its own arguments (each is
    described in Run.__init__)."""

    approval: Mapping[Tier | str, Approval | str] | None
    extra_roots: Iterable[str | os.PathLike[str]]
    protected: Iterable[str]
    registry: Registry | None
    question_timeout: float
    approval_timeout: float
    serial_timeout: float
    prewarm: bool
    vibe_config: VibeConfig | None
    place: Place | str | None
