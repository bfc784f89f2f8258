"""`Conversations.room()`, the word a host hears before it opens a conversation on a full
runtime (and /readyz's): the memory budget's, from `rt.capacity()`, with the room that
admission could free counted as room (idle servers, spare kernels), as `fit` counts it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tether.capacity.usage import MIB
from tether.serve.config import load
from tether.serve.conversations import Conversations


def test_a_full_budget_is_said_with_the_room_that_could_be_freed(
    runtime_factory: Any, tmp_path: Path
) -> None:
    rt = runtime_factory(kind_modules=["tether.actors.echo"])
    conversations = Conversations(rt, load(None, [f"app={tmp_path}"]))
    assert conversations.room() == ""  # room by default
    rt.governor.sample()
    cap = rt.capacity()
    rt.inject("memory_pressure", budget=int(cap["used"] + cap["reserved"] + MIB))
    said = conversations.room()
    now = rt.capacity()
    assert now["fit"] == 0, now
    found = re.fullmatch(
        r"the runtime's memory budget is full \((\d+) MiB free or freeable by stopping idle "
        r"servers and spare kernels, a conversation takes ~(\d+) MiB\): close one, or retry "
        r"later",
        said,
    )
    assert found is not None, said
