"""What bounds a language server's memory, on real servers.

The language_server kind config's `file_cancellation` (`tether.lsp.cancellation`): false
starts basedpyright without a cancellation folder (and so without its checker thread, the
memory it saves); that server still answers a hover, and `lsp status` says its requests
are cancelled by `$/cancelRequest` only. The default (true) starts it with the folder and
says so. A value that is not a bool is refused.

typescript-language-server's row `env` (two malloc arenas) reaches tsserver too, which
typescript-language-server forks with its own environment."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import wait_until
from tests.lsp.lsp_support import hover, need, server_status
from tether.lsp import cancellation
from tether.lsp.servers import BY_NAME
from tether.runtime import load_kinds

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_project"


def _without_file_cancellation() -> list:
    return [
        dataclasses.replace(k, config={**k.config, cancellation.OPTION: False})
        if k.kind == "language_server"
        else k
        for k in load_kinds()
    ]


@need("basedpyright-langserver")
@pytest.mark.parametrize("on", [False, True], ids=["off", "default"])
def test_basedpyright_with_and_without_its_cancellation_file_answers_a_hover(
    runtime_factory, tmp_path, on
):
    root = tmp_path / "p"
    shutil.copytree(SAMPLE, root)
    rt = runtime_factory(kinds=load_kinds() if on else _without_file_cancellation())
    run = rt.open_run("fc", workdir=str(root))
    answer: list[Any] = []

    def answered() -> bool:
        answer[:] = [hover(run, "inventory/main.py", 3, "Stock")]
        return not answer[0].is_error  # (an index still loading answers "pending")

    wait_until(answered, timeout=120, interval=0.5)
    assert "class Stock" in answer[0].text, answer[0].text
    st = server_status(run)
    argv = psutil.Process(st["pid"]).cmdline()
    assert any(a.startswith("--cancellationReceive=file:") for a in argv) is on, argv
    want = cancellation.BY_FILE if on else cancellation.MESSAGE_ONLY
    assert st["cancellation"] == want, st
    text = run.call("lsp", {"action": "status"}).text
    assert ("file cancellation off" in text) is not on, text


def test_a_file_cancellation_that_is_not_a_bool_is_refused():
    assert cancellation.wanted({}) is True
    assert cancellation.wanted({cancellation.OPTION: False}) is False
    with pytest.raises(ValueError, match="file_cancellation must be true .* got 'no'"):
        cancellation.wanted({cancellation.OPTION: "no"})


@need("typescript-language-server")
def test_tsserver_inherits_the_rows_malloc_arenas(runtime, tmp_path):
    root = tmp_path / "p"
    shutil.copytree(SAMPLE, root)
    run = runtime.open_run("ts", workdir=str(root))
    wait_until(lambda: not hover(run, "web/cart.ts", 3, "Line").is_error, timeout=120)
    server = psutil.Process(server_status(run)["pid"])
    tree = [server, *server.children(recursive=True)]
    assert any("tsserver" in " ".join(p.cmdline()) for p in tree), [p.cmdline() for p in tree]
    want = dict(BY_NAME["typescript-language-server"].env)
    assert want == {"MALLOC_ARENA_MAX": "2"}
    for p in tree:
        assert {k: p.environ().get(k) for k in want} == want, p.cmdline()
