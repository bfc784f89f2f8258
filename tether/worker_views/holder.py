"""A vibe worker's view as its actor holds it across the worker's runs.

A part of `tether.actors.vibe.VibeWorkerActor`: an isolated worker's view (`Spawn.view`)
is made at its first run and kept across reruns (vibe_send builds on what it did). Each
run starts in it: mounted in the actor's own mount namespace (as root), bound by a
sandbox place at the workspace's path, or the command wrapped to mount it
(`tether.worker_views`). A run that changed nothing lets its view go at its end; the rest
is removed when the host says its change was resolved, the worker is killed, or the
actor ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from tether import worker_views
from tether.messages.worker_ops import Spawn
from tether.places import Place, PlaceError


class Where(TypedDict, total=False):
    """spawn()'s place arguments."""

    place: Place
    workspace: str
    workspace_from: str


@dataclass
class ViewHolder:
    view: worker_views.View | None = None
    unchanged: bool = False  # its view was removed at the end of the run: it was unchanged
    mounted: bool = False  # the view is mounted in this actor's own mount namespace

    def where(self, spec: Spawn) -> Where:
        """spawn()'s place arguments: the run's place, its workspace the worker's cwd."""
        if not spec.place:
            return Where()
        place = Place.from_wire(spec.place)
        if spec.view and place.kind != "sandbox":
            raise PlaceError(
                f"an isolated worker (its own view of the workspace) cannot run in a "
                f"{place.kind} place: its environment has no view to bind; spawn it with "
                "isolated=false there"
            )
        args = Where(place=place, workspace=spec.cwd)
        if self.view is not None and self.view.kind == "copy":
            args["workspace_from"] = self.view.root  # (an overlay is at the workspace's path)
        return args

    def run_argv(self, spec: Spawn, argv: list[str]) -> list[str]:
        """argv wrapped to run in the worker's view (made at its first run), if isolated."""
        if not spec.view:
            return argv
        self.unmount()  # (a rerun after a stopped run: that run's mount must not stack)
        again = self.view is not None
        if self.view is None:
            self.view = worker_views.make(spec.cwd, spec.view)
        if worker_views.mount_here(self.view):
            self.mounted = True  # (a sandbox started from this thread binds the overlay)
            return argv
        if spec.place:  # a sandbox binds the view at the workspace's path (`where`)
            if self.view.kind != "copy":
                raise worker_views.ViewError(
                    "the overlay view could not be mounted for the sandbox (it needs root); "
                    "spawn with isolated false, or run the runtime as root"
                )
            if not again:
                worker_views.fill(self.view)
            return argv
        return worker_views.wrap(self.view, argv, again=again)

    def unmount(self) -> None:
        if self.mounted and self.view is not None:
            worker_views.unmount_here(self.view)
        self.mounted = False

    def remove(self) -> None:
        self.unmount()
        view, self.view = self.view, None
        worker_views.remove(view)

    def run_ended(self) -> worker_views.View | None:
        """A run ended: an unchanged view is let go (what the host sees has none); the
        view it ran on is returned, for `settle` once the run's calls have their answer."""
        view = self.view
        self.unchanged = view is not None and worker_views.unchanged(view)
        if self.unchanged:
            self.view = None
        return view

    def settle(self, view: worker_views.View | None) -> None:
        """Once the calls waiting for the end have their answer: the mount goes, and an
        unchanged view (nothing to stage: no round trip from the host for it)."""
        if self.mounted and view is not None:
            worker_views.unmount_here(view)
        self.mounted = False
        if self.unchanged:
            worker_views.remove(view)
