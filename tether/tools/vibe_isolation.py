"""Which view of the workspace a new vibe worker gets: none, an overlay, or a copy.

An isolated worker works on its own view (tether.worker_views) and hands its change back
through `resolve` (tether.tools.vibe_changes). Whether a worker is isolated is asked per
spawn, else configured per run (`VibeConfig.isolated`), else decided here: isolated where
a git work tree says the files matter and the run can resolve (it has the parser kind),
never in a prefix place, whose mounts are its own. What cannot be had is refused with the
way out (`VibeError`), never silently downgraded.
"""

from __future__ import annotations

from tether import worker_views
from tether.json_types import JSONObject
from tether.tools.spec import Needs
from tether.tools.vibe_config import VibeError
from tether.tools.vibe_port import WorkerRun, WorkerRuntime


def view_kind(
    run: WorkerRun, isolated: bool | None, configured: bool | None, runtime: WorkerRuntime
) -> str:
    """The view a new worker gets: "" (none: it works in the workspace), "overlay" or
    "copy". VibeError when it asked for one that cannot be had here."""
    workdir = str(run.workdir)
    place = run_place(run)
    # a prefix place's environment has its own mounts: no view can be bound into it
    prefixed = place is not None and place.get("kind") == "prefix"
    if isolated is None:
        isolated = configured
    if isolated is None:  # the default: where a git work tree says files matter
        isolated = worker_views.in_git_work_tree(workdir) and can_resolve(run)
        isolated = isolated and not prefixed
    if not isolated:
        return ""
    if prefixed:
        raise VibeError(
            "an isolated worker (its own view of the workspace) cannot run in a prefix "
            "place: its environment's mounts are its own, so tether cannot put a view "
            "at the workspace's path there; spawn it with isolated false, or open the "
            "run with place='sandbox'"
        )
    if not can_resolve(run):
        raise VibeError(
            "an isolated worker hands its change back through resolve, which this run "
            "lacks (it needs the parser kind); spawn with isolated false to let it work "
            "in the workspace itself"
        )
    try:
        return worker_views.choose_kind(workdir, runtime.state_dir, sandboxed=place is not None)
    except worker_views.ViewError as exc:
        raise VibeError(str(exc)) from exc


def can_resolve(run: WorkerRun) -> bool:
    return Needs.PARSER in run.connected()


def run_place(run: WorkerRun) -> JSONObject | None:
    """The run's place for its workers (tether.places wire form; None: the host)."""
    return run.place.to_wire() if run.place.kind != "host" else None
