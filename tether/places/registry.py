"""Places by policy key, for the shared resources that are keyed by place.

A language server or a project checker is shared by the runs on one root with the same
place policy, and its actor gets only its key (`basedpyright:/abs/root@sandbox-1a2b3c4d`).
The whole policy behind such a key (a sandbox's limits, a prefix's command and paths) is
written once by the host, as the run opens, to `<state dir>/places/<policy key>.json`
(0600 in the runtime's 0700 directory, never visible inside a sandbox), and read back
by the actor that starts the server.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from tether.places.place import Place, PlaceError
from tether.private_dirs import default_state_dir, ensure_private_dir

PLACES = "places"
SEP = "@"  # between a resource's own key and its place's policy key
POLICY_KEY = re.compile(r"(?:sandbox|prefix)-[0-9a-f]{8}")


def remember(place: Place, state_dir: Path | None = None) -> str:
    """Write `place` under its policy key (idempotent); returns the key."""
    key = place.policy_key
    if place.kind == "host":
        return key
    directory = ensure_private_dir(ensure_private_dir(state_dir or default_state_dir()) / PLACES)
    path = directory / f"{key}.json"
    if not path.exists():
        tmp = directory / f".{key}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(place.to_wire(), out)
        os.replace(tmp, path)
    return key


def recall(key: str, state_dir: Path | None = None) -> Place:
    """The place remembered under `key` ("host" or "": the host)."""
    if key in ("", "host"):
        return Place.host()
    if not POLICY_KEY.fullmatch(key):
        raise PlaceError(f"{key!r} is not a place policy key (like 'sandbox-1a2b3c4d')")
    path = (state_dir or default_state_dir()) / PLACES / f"{key}.json"
    try:
        place = Place.from_wire(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise PlaceError(
            f"the place {key!r} was never opened by a run of this runtime ({exc}); open the "
            "run with its place first"
        ) from exc
    if place.policy_key != key:
        raise PlaceError(f"the place file for {key!r} holds another policy; remove {path}")
    return place


def placed_key(key: str, place: Place) -> str:
    """A shared resource's key for runs in `place` (the host's keys are unchanged)."""
    if place.kind == "host" or split_place(key)[1]:
        return key
    return f"{key}{SEP}{place.policy_key}"


def split_place(key: str) -> tuple[str, str]:
    """(the resource's own key, its place's policy key or "")."""
    bare, sep, suffix = key.rpartition(SEP)
    if sep and POLICY_KEY.fullmatch(suffix):
        return bare, suffix
    return key, ""
