"""Starting a Jupyter kernel privately: its files, its command, its environment.

Everything a kernel writes on our behalf lives under one tether-owned 0700 directory
(`kernels_dir()`, beside the runtime's port file, never the user's home): IPython's
profile, Jupyter's data/config dirs, matplotlib's config and Deno's cache; and each
kernel's own directory, a `ProcessScratch` there (its connection file (0600), its log, its
TMPDIR and XDG state/data homes: a cell's temp files), removed with the kernel (`discard`)
or, when the process that started it (which the kernel dies with) was killed, by the next
kernel started. Caches (pip's, for `%pip`) are the shared, kept ones of `tether.scratch`.
No kernelspec is installed anywhere: the kernel is started from its argv.

Transport: ipykernel gets `ipc` (Unix sockets inside the kernel's own 0700 directory: no
TCP port at all; a state dir so deep that a socket path would not fit gets loopback TCP
instead). Deno's kernel only parses TCP addresses (an ipc path is refused as
"invalid host"), so it gets loopback TCP; every message is HMAC-SHA256-signed with a
random 256-bit key that only the connection file (0600, in a 0700 dir) holds. In a
sandbox that loopback is the sandbox's own: the kernel runs under a relay
(`tether.places.relay`) that the host reaches through Unix sockets in the kernel's own
directory, with the same ports and key (`relayed`).

A launcher (a command prefix that enters the conversation's isolated environment) is put
in front of the argv; ipc paths must then be visible inside it (a shared /tmp).

A place (`tether.places`): in a sandbox the kernel runs on the conversation's layer
(`tether.kernels.layer`: the project's interpreter, %pip into the layer), its own
directory (connection file, ipc sockets, IPython's profile) bound read-write at its own
path, so the host reaches it through those sockets and nothing else; every other state
of the kernel (HOME, TMPDIR, caches) is in the sandbox's private /tmp. In a prefix place
the kernel runs on the environment's own `python3` (with the environment's ipykernel),
its directory made beneath the exchange directory the place maps in (only that place's
kernels are there), its connection file naming the sockets by their paths inside.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from jupyter_client.connect import write_connection_file

from tether.json_types import JSONObject
from tether.kernels.layer import Layer
from tether.owned_process import OwnedProcess
from tether.places import Place, PlaceError, relay
from tether.private_dirs import default_state_dir, ensure_private_dir
from tether.scratch import ProcessScratch

LANGUAGES = ("python", "javascript")
KERNELS = "kernels"  # under the runtime's private directory
PREFIX_PYTHON = "python3"  # a prefix environment's own Python (its PATH finds it)
IPC_PATH_MAX = 100  # a Unix socket path must fit sun_path (108); a longer one gets loopback TCP
CHANNELS = ("shell", "iopub", "stdin", "control", "hb")  # a connection file's ports


class KernelUnavailable(Exception):
    """The kernel for a language cannot run here (its binary or package is missing)."""


def kernels_dir() -> Path:
    """<the runtime's private directory>/kernels, checked like the runtime's own."""
    return ensure_private_dir(ensure_private_dir(default_state_dir()) / KERNELS)


def deno_binary() -> str:
    """The `deno` the PyPI package ships (else one on PATH)."""
    with contextlib.suppress(ImportError, Exception):
        import deno  # type: ignore[import-untyped]

        found = str(deno.find_deno_bin())
        if os.access(found, os.X_OK):
            return found
    on_path = shutil.which("deno")
    if on_path:
        return on_path
    raise KernelUnavailable(
        "javascript needs Deno's Jupyter kernel and no deno binary was found; install it with "
        "`pip install deno` (scripts/install.sh does), or use language 'python'"
    )


def check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}: use one of {', '.join(LANGUAGES)}")


@dataclass
class Launched:
    """A kernel process just started: what its owner needs to talk to it and kill it
    (`process`: started here, or a spare's handed over, not our child)."""

    language: str
    process: OwnedProcess
    directory: str
    connection: JSONObject  # the connection file's content (transport, ports, key)
    log_start: int = 0  # where its log's news begins: past its start-up banner once ready

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, limit: int = 2000) -> str:
        """The end of the kernel's own stdout/stderr since `log_start` (its crash message,
        if any; not ipykernel's banner on how to connect, printed at every start)."""
        try:
            with open(Path(self.directory) / "kernel.log", "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(self.log_start, log.tell() - limit))
                return log.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def mark_log(self) -> None:
        """What the log holds now is the kernel's start-up talk: `log_tail` skips it."""
        with contextlib.suppress(OSError):
            self.log_start = (Path(self.directory) / "kernel.log").stat().st_size


# ipykernel started with jedi (IPython's completion) and debugpy (Jupyter's debugger) held
# off: tether sends no complete_request or debug_request, and the two cost ~12 MiB of every
# kernel (measured: a fresh kernel 53 -> 39 MiB USS). The prelude lets them be imported
# again (`python_prelude._release_held_off`), so a cell's `import jedi, debugpy` works.
HELD_OFF = ("jedi", "debugpy")
PYTHON_KERNEL_MAIN = (
    f"import runpy, sys; sys.modules.update(dict.fromkeys({HELD_OFF!r})); "
    "runpy.run_module('ipykernel_launcher', run_name='__main__', alter_sys=True)"
)


def kernel_argv(language: str, connection_file: str, python: str = "") -> list[str]:
    if language == "python":
        return [python or sys.executable, "-c", PYTHON_KERNEL_MAIN, "-f", connection_file]
    return [deno_binary(), "jupyter", "--kernel", "--conn", connection_file]


def kernel_env(scratch: ProcessScratch, root: Path) -> dict[str, str]:
    """The host's environment (it carries the runtime's token: orphan checks find the
    kernel) with every tool's state dir pointed into tether's private directory, and
    the kernel's temp files into its own."""
    env = scratch.env()
    env.update(
        IPYTHONDIR=str(root / "ipython"),
        JUPYTER_RUNTIME_DIR=str(scratch.base),
        JUPYTER_DATA_DIR=str(root / "jupyter-data"),
        JUPYTER_CONFIG_DIR=str(root / "jupyter-config"),
        MPLCONFIGDIR=str(root / "matplotlib"),
        MPLBACKEND="module://matplotlib_inline.backend_inline",
        DENO_DIR=str(root / "deno"),
        DENO_NO_UPDATE_CHECK="1",
        NO_COLOR="1",  # Deno colours its echo with ANSI codes otherwise
        PYTHONUNBUFFERED="1",
    )
    return env


def write_connection(language: str, directory: Path) -> tuple[str, JSONObject]:
    key = secrets.token_hex(32).encode()
    if language == "python" and len(str(directory / "k-00000")) < IPC_PATH_MAX:
        fname, info = write_connection_file(
            str(directory / "connection.json"), transport="ipc", ip=str(directory / "k"), key=key
        )
    else:
        fname, info = write_connection_file(
            str(directory / "connection.json"), ip="127.0.0.1", key=key
        )
    os.chmod(fname, 0o600)
    connection: JSONObject = {}  # the file's content: ports, ip, transport, the key as text
    for name, value in info.items():
        text = value.decode() if isinstance(value, bytes) else value  # (the wire encodes it)
        if isinstance(text, str | int):
            connection[name] = text
    return fname, connection


@contextlib.contextmanager
def _discard_on_error(directory: Path, launcher: Sequence[str]) -> Iterator[None]:
    try:
        yield
    except PlaceError:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    except OSError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        if launcher:
            raise OSError(
                f"the launcher {' '.join(launcher)!r} could not be run ({exc.strerror}); "
                "check the command prefix the host gave this conversation"
            ) from exc
        raise


def launch(
    language: str,
    cwd: str,
    launcher: Sequence[str] = (),
    die_with_us: bool = True,
    place: Place | None = None,
    layer: Layer | None = None,
    group: str = "",
) -> Launched:
    """Start a kernel for `language` in its own session (process group) and private dir.
    die_with_us: the kernel gets SIGKILL when the calling process dies (Linux). place:
    where it runs (default the host), cwd being the conversation's workspace; layer: the
    Python it runs on there (and where %pip installs); group: the place instance (run)."""
    check_language(language)
    place = place or Place.host()
    if place.kind == "prefix" and language != "python":
        raise KernelUnavailable(
            f"the {language} kernel (Deno's) listens on loopback TCP only, which a "
            "prefix place does not share with the host (the relay runs in a sandbox only): "
            "use language 'python' there, a sandbox, or a host run"
        )
    root = kernels_dir()
    scratch = ProcessScratch(language[:2], under=_kernels_under(place, root))
    directory = scratch.base
    fname, info = write_connection(language, directory)
    if place.kind == "prefix":  # (the kernel reads its socket paths as they are inside)
        _write_inside(place, fname, info)
    inside: list[tuple[str, int]] = []  # a sandbox's loopback ports, relayed (Deno's)
    if place.kind == "sandbox" and info.get("transport") == "tcp":
        info, inside = relayed(directory, info)
    if place.kind != "host" and info.get("transport") != "ipc":
        scratch.close()
        raise KernelUnavailable(
            f"the runtime's state dir is too deep for a kernel's Unix sockets ({directory}), "
            "and a place does not share loopback TCP: point TETHER_STATE_DIR at a shorter path"
        )
    python = layer.python if layer else PREFIX_PYTHON if place.kind == "prefix" else ""
    argv = [*launcher, *kernel_argv(language, fname, python)]
    if inside:
        argv = relay.argv(sys.executable, inside, argv)
    env = kernel_env(scratch, root)
    if place.kind != "host":  # its profile and config are its own, not the runtime's
        env.update(_own_state(directory))
    with open(directory / "kernel.log", "wb") as log, _discard_on_error(directory, launcher):
        process = OwnedProcess.start(
            argv,
            cwd=cwd,
            env=env,
            place=place,
            workspace=cwd,
            rw=[str(directory), *([layer.directory] if layer else [])],
            ro=[*(layer.toolchains() if layer else []), *([relay.__file__] if inside else [])],
            group=group,
            stdout=log,
            stderr=subprocess.STDOUT,
            die_with_us=die_with_us,
        )
    return Launched(language, process, str(directory), info)


def relayed(directory: Path, info: JSONObject) -> tuple[JSONObject, list[tuple[str, int]]]:
    """A kernel listening on loopback TCP inside a sandbox (Deno's), reached through the
    relay (`tether.places.relay`): the host's side of the connection (ipc, to a Unix socket
    per port in the kernel's own directory) and the relay's (socket, port) pairs. The
    connection file keeps TCP: the kernel reads it; the key and HMAC are unchanged."""
    base = str(directory / "r")
    if len(f"{base}-65535") >= IPC_PATH_MAX:
        return info, []  # (too deep for a socket path: refused by the caller, saying so)
    ports = [int(str(info[f"{c}_port"])) for c in CHANNELS]
    return {**info, "transport": "ipc", "ip": base}, [(f"{base}-{p}", p) for p in ports]


def _kernels_under(place: Place, root: Path) -> str:
    """Where a kernel's own directory is made, relative to the state dir: the kernels dir,
    or for a prefix place the directory beneath it that the place maps into its
    environment (only that place's kernels are there)."""
    if place.kind != "prefix":
        return KERNELS
    for host, _ in place.paths:
        if Path(host).parent == root:
            return f"{KERNELS}/{Path(host).name}"
    raise KernelUnavailable(
        f"a kernel in a prefix place needs a directory {root}/<name> mapped into its "
        "environment (its connection file and ipc sockets go there), and the place maps "
        f"none: add one to its paths, e.g. {{'{root}/px': '/run/tether'}} "
        "(tether.places.rootfs.rootfs_place does)"
    )


def _write_inside(place: Place, fname: str, info: JSONObject) -> None:
    inside = {**info, "ip": place.inside(str(info["ip"]))}  # (the key is text already)
    with open(fname, "w") as out:
        json.dump(inside, out)


def _own_state(directory: Path) -> dict[str, str]:
    return {
        "IPYTHONDIR": str(directory / "ipython"),
        "JUPYTER_DATA_DIR": str(directory / "jupyter-data"),
        "JUPYTER_CONFIG_DIR": str(directory / "jupyter-config"),
        "MPLCONFIGDIR": str(directory / "matplotlib"),
        "DENO_DIR": str(directory / "deno"),
    }


def discard(launched: Launched) -> None:
    """Remove a kernel's private directory (its process is its owner's business), and its
    place's cgroup if nothing else of the place runs in it."""
    shutil.rmtree(launched.directory, ignore_errors=True)
    launched.process.release_place()
