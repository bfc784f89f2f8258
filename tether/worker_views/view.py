"""A vibe worker's view as plain data, and the error of a view that cannot be made or read.

A part of `tether.worker_views`: what the view's making (the package) and the reading of
its change (`changes`) share. `View` itself is defined with the worker's messages
(`tether.messages.worker_ops`): it travels in the worker actor's snapshot.
"""

from __future__ import annotations

from tether.messages.worker_ops import View

__all__ = ["View", "ViewError"]


class ViewError(Exception):
    """The view cannot be made or read; the message says why and what to do."""
