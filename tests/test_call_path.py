"""How a call travels, held by a test: the tether modules one call enters on the host before
its bytes go on the call channel (README "How a call travels"). A profile of a warm `lsp
hover` (a shared kind) and a warm `eval` (a run kind) lists them in order.

The house issue's target is five modules or fewer before the actor boundary; the path is
longer today, so these counts are a ratchet: a change that adds a module to the path fails
here, and one that removes some lowers the bound in the same commit."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tether
from tether.actors.kernel import kinds as kernel_kinds
from tether.channels import HostChannel

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample_project"
PACKAGE = os.path.dirname(tether.__file__)
HOVER_BOUND = 23  # lower it when the path gets shorter; never raise it without a reason
# (22: the typed reply, declared beside the ops in messages/language_server_ops.py; 23: the
# file is read beneath the workspace, no symlink followed, beneath.py - issue 22)
EVAL_BOUND = 16


def modules_before_the_channel(call: Callable[[], Any]) -> list[str]:
    """The tether modules `call` enters, in order, until its first call-channel write."""
    seen: list[str] = []
    written = False
    send = HostChannel.send

    def profile(frame: Any, event: str, arg: Any) -> None:
        if written or event != "call":
            return
        path = frame.f_code.co_filename
        if path.startswith(PACKAGE):
            rel = os.path.relpath(path, os.path.dirname(PACKAGE))
            if rel not in seen:
                seen.append(rel)

    def watched_send(self: HostChannel, data: bytes, timeout: float) -> bool:
        nonlocal written
        written = True
        return send(self, data, timeout)

    HostChannel.send = watched_send  # type: ignore[method-assign]
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
        HostChannel.send = send  # type: ignore[method-assign]
    assert written, "the call never wrote to a call channel (was its route known?)"
    return seen


@pytest.mark.skipif(shutil.which("basedpyright-langserver") is None, reason="basedpyright")
def test_a_warm_hover_and_a_warm_eval_enter_no_more_modules_than_the_map_says(
    runtime_factory: Any, tmp_path: Path
) -> None:
    from tether.actors.language_server import KINDS as LSP_KINDS

    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root)
    rt = runtime_factory(kinds=[*LSP_KINDS, *kernel_kinds(spares=0)])
    run = rt.open_run("path", workdir=str(root))
    args = {"action": "hover", "file": "inventory/main.py", "line": 3, "symbol": "Stock"}
    cell = {"code": "1 + 1", "description": "add one and one to warm the kernel"}
    assert "class Stock" in run.call("lsp", args).text  # cold: routes learned, server up
    assert run.call("eval", cell).text.strip() == "2"
    hover = modules_before_the_channel(lambda: run.call("lsp", args))
    cell_path = modules_before_the_channel(lambda: run.call("eval", cell))
    for path, bound in ((hover, HOVER_BOUND), (cell_path, EVAL_BOUND)):
        assert path[0] == "tether/run.py" and "tether/channels.py" in path, path
        assert len(path) <= bound, f"{len(path)} modules (bound {bound}): {path}"
