"""A vibe worker's view as plain data, and the error of a view that cannot be made or read.

A part of `tether.worker_views`: what the view's making (the package) and the reading of
its change (`changes`) share.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


class ViewError(Exception):
    """The view cannot be made or read; the message says why and what to do."""


@dataclass(frozen=True)
class View:
    """One worker's view. Plain data: it travels in the worker actor's snapshot."""

    kind: str  # "overlay" | "copy"
    workspace: str
    base: str  # the view's own directory (everything below is removed with it)
    root: str  # where the worker works: the workspace's path (overlay) or the copy
    upper: str  # overlay: the upper layer ("" for a copy)
    made: str  # a file whose ctime is when the view was made
    copied: str  # copy: a file whose ctime is when the copy was done ("" for an overlay)
    userns: bool = False  # overlay: mounted in a user namespace (unprivileged)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> View:
        return cls(**data)
