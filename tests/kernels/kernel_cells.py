"""Real kernels driven directly with jupyter_client, for the tests of tether.kernels.

`DirectKernel(language, workdir)` starts ipykernel or Deno's kernel (`deno jupyter`, the
binary from the `deno` package) with everything it writes kept under `workdir`: the
kernelspec, the connection file, IPython's profile, matplotlib's cache. `run(code)` sends
a cell and feeds its iopub messages and its execute_reply to a `CellOutput`.

A cell is done when both its execute_reply and its iopub `idle` arrived; Deno may publish
after idle, so its cells also wait (bounded) until no message came for a short quiet time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gone
from tether.kernels import CellOutput, OutputCaps, prelude, rewrite

QUIET_AFTER_IDLE = {"python": 0.0, "javascript": 0.4}


def deno_binary() -> str | None:
    if importlib.util.find_spec("deno") is not None:
        import deno

        return str(deno.find_deno_bin())
    return shutil.which("deno")


def missing(language: str) -> str | None:
    """What is not installed for `language`'s kernel (named in the skip), or None."""
    needed = ["jupyter_client"] + (["ipykernel"] if language == "python" else [])
    absent = [name for name in needed if importlib.util.find_spec(name) is None]
    if language == "javascript" and deno_binary() is None:
        absent.append("deno (pip install deno)")
    return ", ".join(absent) or None


def need_kernel(language: str) -> pytest.MarkDecorator:
    absent = missing(language)
    return pytest.mark.skipif(absent is not None, reason=f"not installed: {absent}")


class DirectKernel:
    def __init__(self, language: str, workdir: Path) -> None:
        from jupyter_client import KernelManager
        from jupyter_client.kernelspec import KernelSpecManager

        self.language = language
        self.workdir = workdir
        for sub in ("kernels/deno", "ipython", "matplotlib", "runtime"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)
        connection = str(workdir / "runtime" / "kernel.json")
        if language == "python":
            self.manager = KernelManager(kernel_name="python3", connection_file=connection)
        else:
            spec = {
                "argv": [deno_binary(), "jupyter", "--kernel", "--conn", "{connection_file}"],
                "display_name": "Deno",
                "language": "typescript",
            }
            (workdir / "kernels/deno/kernel.json").write_text(json.dumps(spec))
            specs = KernelSpecManager(kernel_dirs=[str(workdir / "kernels")])
            self.manager = KernelManager(
                kernel_name="deno", kernel_spec_manager=specs, connection_file=connection
            )
        env = {
            **os.environ,
            "IPYTHONDIR": str(workdir / "ipython"),
            "MPLCONFIGDIR": str(workdir / "matplotlib"),
            "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"),
        }
        env.pop("MPLBACKEND", None)
        self.manager.start_kernel(env=env, cwd=str(workdir))
        self.pid = self.manager.provisioner.process.pid  # type: ignore[union-attr]
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def run_prelude(self, caps: OutputCaps | None = None) -> None:
        output, reply = self.run(prelude(self.language, caps), rewrite_magics=False)
        rendered = output.render()
        assert reply["status"] == "ok" and rendered.error is None, rendered

    def run(
        self,
        code: str,
        timeout: float = 60.0,
        rewrite_magics: bool = True,
        on_message: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> tuple[CellOutput, dict[str, Any]]:
        """Run one cell (rewritten first); its output and its execute_reply content.
        `on_message(msg_type, content)` sees each of the cell's iopub messages as it comes."""
        sent = rewrite(self.language, code).code if rewrite_magics else code
        msg_id = self.client.execute(sent, allow_stdin=False)
        output = CellOutput(source=code)
        reply: dict[str, Any] | None = None
        idle = False
        deadline = time.monotonic() + timeout
        quiet = QUIET_AFTER_IDLE[self.language]
        last_message = time.monotonic()
        while not (reply and idle and time.monotonic() - last_message >= quiet):
            assert time.monotonic() < deadline, f"cell did not finish within {timeout} s: {code!r}"
            if reply is None:
                reply = self._reply(msg_id)
            message = self._iopub()
            if message is None or message["parent_header"].get("msg_id") != msg_id:
                continue
            last_message = time.monotonic()
            kind, content = message["msg_type"], message["content"]
            if on_message is not None:
                on_message(kind, content)
            if kind == "status":
                idle = idle or content["execution_state"] == "idle"
            output.add(kind, content)
        output.add("execute_reply", reply)
        return output, reply

    def _reply(self, msg_id: str) -> dict[str, Any] | None:
        try:
            message = self.client.get_shell_msg(timeout=0.01)
        except queue.Empty:
            return None
        return message["content"] if message["parent_header"].get("msg_id") == msg_id else None

    def _iopub(self) -> dict[str, Any] | None:
        try:
            return self.client.get_iopub_msg(timeout=0.05)
        except queue.Empty:
            return None

    def close(self, now: bool = True) -> None:
        """Shut the kernel down: killed (`now`), or asked to exit so its atexit hooks run."""
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=now)
        assert gone([self.pid]), f"kernel process {self.pid} outlived its shutdown"


def started_kernel(
    language: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DirectKernel]:
    """A kernel of `language` that ran the prelude; shut down (and checked gone) after."""
    absent = missing(language)
    if absent is not None:
        pytest.skip(f"not installed: {absent}")
    kernel = DirectKernel(language, tmp_path_factory.mktemp(f"{language}-kernel"))
    try:
        kernel.run_prelude()
        yield kernel
    finally:
        kernel.close()


def render(kernel: DirectKernel, code: str, **kwargs: Any) -> Any:
    """Run `code` and render its output (a RenderedCell)."""
    output, _ = kernel.run(code, **kwargs)
    return output.render()
