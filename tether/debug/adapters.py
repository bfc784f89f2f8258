"""The debug-adapter table: which adapter debugs which program, found how, started how.

Data, not code paths (STYLE.md habit 3), like the language-server table
(`tether.lsp.servers`): one frozen `AdapterRow` per adapter; a quirk of one adapter is a
field of its row. Whether an adapter can start for a program is the intersection rule of
SPEC.md "debug": one of its root markers in the program's directory or above it (up to
the workspace root) AND its binary resolves. `why_not` names whichever half is missing and
`install` says how to get the binary.

Rows:
- debugpy: `python -m debugpy.adapter` over stdio, run by tether's own Python (which has
  debugpy); the *debuggee* runs on the project's `.venv/bin/python` or `venv/bin/python`
  when there is one (launch configuration `python`), else on `python3` from PATH.
- lldb: `lldb-dap`, `lldb-dap-NN`, `lldb-vscode`, `lldb-vscode-NN` (the name depends on
  the LLVM release) over stdio; stdin of the program is /dev/null (`target.input-path`).
- delve: `dlv dap --listen=127.0.0.1:0` (it has no stdio mode): the port it picked is read
  from its first line of stdout, the program's own output arrives on dlv's stdout after it;
  `mode` is "debug" for a source package (a directory or a .go file) and "exec" for a
  binary. Its exit code arrives as console text, not as an `exited` event.
- dart: `dart debug_adapter` over stdio.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TypedDict

from tether import roots
from tether.debug.breakpoints import Features
from tether.debug.dap import as_objs
from tether.json_types import JSONObject, JSONValue
from tether.messages.debug_ops import FeatureReport
from tether.places import relay
from tether.private_dirs import ensure_private_dir
from tether.scratch import ProcessScratch

LLDB_VERSIONS = tuple(range(25, 10, -1))  # lldb-dap-NN / lldb-vscode-NN, newest first


@dataclass(frozen=True)
class AdapterRow:
    name: str
    root_markers: tuple[str, ...]
    binaries: tuple[str, ...]  # candidates, first on PATH wins ("" = tether's own Python)
    args: tuple[str, ...]
    extensions: tuple[str, ...]  # program files it debugs (a binary: "" = executable file)
    install: str  # how to get the binary, for `adapters`
    transport: str = "stdio"  # stdio | tcp (the adapter listens on a loopback port)
    adapter_id: str = ""
    exception_filters: tuple[str, ...] = ()  # setExceptionBreakpoints: stop on these
    # launch-configuration fields every launch carries (stopOnEntry, console, ...)
    launch_extra: Mapping[str, JSONValue] = field(default_factory=dict)
    # regex over console output that gives the exit code when no `exited` event comes
    exit_console: str = ""
    startup_timeout: float = 20.0  # initialize must answer within this (as a language server's:
    # 10 s refused debugpy and lldb-dap three times at load 10-15, each fine alone)
    launch_timeout: float = 60.0  # launch may build first (delve: go build)
    # attach to a port: "connect" = the port is a DAP server already (debugpy --listen, dlv
    # --headless): tether connects to it and starts no adapter of its own; "adapter" = the
    # adapter is started and told the port (lldb: a gdb-remote server); "" = no port
    port_attach: str = ""
    pid_attach: bool = False  # the adapter attaches to a local process by pid
    attach_help: str = ""  # what `attach` expects, said when it fails
    # environment variable -> subdirectory of the caches every process shares (`scratch`):
    # the toolchain's caches there, never in the user's home (delve: go build's; GOCACHE is
    # the servers' and checkers' go-build too)
    cache_env: Mapping[str, str] = field(default_factory=dict)
    # breakpoints (tether.debug.breakpoints): what the table knows each adapter does, used
    # where its capabilities do not say (delve before 1.26 takes hitCondition silently)
    breakpoint_features: tuple[str, ...] = ()  # of: condition, log_message, function
    hit_formats: Mapping[str, str] = field(
        default_factory=dict
    )  # our hit operator (==, >=, %) -> the adapter's hitCondition
    hit_equal_by_removal: bool = False  # '== N': an ignore count, then removed at its stop
    exception_map: Mapping[str, str] = field(
        default_factory=dict
    )  # raised / uncaught -> the adapter's filter ("" = built in)
    exception_help: str = ""  # what it does not stop on, and why
    log_category: str = "stdout"  # the output category of a logpoint's message

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", self.name):
            raise ValueError(f"AdapterRow.name {self.name!r} must be lowercase [a-z0-9_-]")
        if not self.root_markers or not self.binaries or not self.install:
            raise ValueError(f"{self.name}: root_markers, binaries and install must be set")
        if self.transport not in ("stdio", "tcp"):
            raise ValueError(f"{self.name}: transport {self.transport!r} is not stdio or tcp")
        if self.port_attach not in ("", "connect", "adapter"):
            raise ValueError(
                f"{self.name}: port_attach {self.port_attach!r} is not connect/adapter"
            )
        if bool(self.port_attach or self.pid_attach) != bool(self.attach_help):
            raise ValueError(f"{self.name}: attach_help says what it attaches to, iff it does")
        for name in ("launch_extra", "cache_env", "hit_formats", "exception_map"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))


ADAPTERS: tuple[AdapterRow, ...] = (
    AdapterRow(
        name="debugpy",
        root_markers=("pyproject.toml", "setup.py", "requirements.txt"),
        binaries=("",),
        args=("-m", "debugpy.adapter"),
        extensions=(".py",),
        install="pip install debugpy (into the Python that runs tether)",
        adapter_id="debugpy",
        exception_filters=("uncaught",),
        launch_extra={"console": "internalConsole", "justMyCode": True, "stopOnEntry": False},
        breakpoint_features=("condition", "log_message", "function"),
        hit_formats={"==": "=={n}", ">=": ">={n}", "%": "%{n}"},  # pydevd's own spelling
        exception_map={"raised": "raised", "uncaught": "uncaught"},
        port_attach="connect",
        attach_help="port of a program started with python -m debugpy --listen 127.0.0.1:PORT",
    ),
    AdapterRow(
        name="lldb",
        root_markers=("Cargo.toml", "CMakeLists.txt"),
        binaries=(
            "lldb-dap",
            *(f"lldb-dap-{v}" for v in LLDB_VERSIONS),
            "lldb-vscode",
            *(f"lldb-vscode-{v}" for v in LLDB_VERSIONS),
        ),
        args=(),
        extensions=("",),
        install="apt-get install lldb-19 (gives lldb-dap-19), or any LLVM's lldb-dap",
        adapter_id="lldb",
        # the program's stdin is /dev/null: lldb gives it a terminal otherwise, and a read
        # from it would wait forever
        launch_extra={
            "stopOnEntry": False,
            "preRunCommands": ["settings set target.input-path /dev/null"],
        },
        breakpoint_features=("condition", "log_message", "function"),
        # lldb-dap's hitCondition is a number: that many minus one hits ignored, then every
        # hit stops (an lldb ignore count); '% N' has no such form
        hit_formats={"==": "{n}", ">=": "{n}"},
        hit_equal_by_removal=True,
        exception_map={"raised": "cpp_throw"},
        exception_help=(
            "lldb-dap's filters are C++/Objective-C throw and catch; an uncaught C++ exception "
            "aborts the program, which stops on SIGABRT anyway"
        ),
        log_category="console",
        port_attach="adapter",
        pid_attach=True,
        attach_help=(
            "pid of a local process, or port of a gdb-remote server on 127.0.0.1 (lldb-server "
            "gdbserver 127.0.0.1:PORT --attach PID, or -- program args)"
        ),
    ),
    AdapterRow(
        name="delve",
        root_markers=("go.mod",),
        binaries=("dlv",),
        args=("dap", "--listen=127.0.0.1:0"),
        extensions=(".go",),
        install="apt-get install delve, or go install github.com/go-delve/delve/cmd/dlv@latest",
        transport="tcp",
        adapter_id="go",
        launch_extra={"stopOnEntry": False},
        # delve builds with -gcflags=all=-N -l, so the std packages the program uses are
        # compiled again unless the build cache has them: a sandbox's cache starts empty
        # (its private /tmp), and on a loaded 2-core machine that first build took ~55 s
        launch_timeout=120.0,
        breakpoint_features=("condition", "log_message", "function"),
        hit_formats={"==": "== {n}", ">=": ">= {n}", "%": "% {n}"},
        exception_map={"uncaught": ""},
        exception_help=(
            "delve always stops on an unrecovered panic and a fatal runtime error, and has no "
            "filter for a panic that is recovered"
        ),
        exit_console=r"Process \d+ has exited with status (-?\d+)",
        port_attach="connect",
        pid_attach=True,
        attach_help=(
            "pid of a local Go process, or port of a headless delve on 127.0.0.1 (dlv --headless "
            "--accept-multiclient --listen=127.0.0.1:PORT exec|debug|attach ...; without "
            "--accept-multiclient, ending the session stops that server and a program it started)"
        ),
        cache_env={"GOCACHE": "go-build", "GOPATH": "go", "GOMODCACHE": "go/pkg/mod"},
    ),
    AdapterRow(
        name="dart",
        root_markers=("pubspec.yaml",),
        binaries=("dart",),
        args=("debug_adapter",),
        extensions=(".dart",),
        install=(
            "the Dart SDK is not packaged for Debian, PyPI or npm (apt's dart-* packages are a "
            "robotics library): install it from https://dart.dev/get-dart (or a Flutter SDK, "
            "which includes it) and put its bin/ on PATH"
        ),
        adapter_id="dart",
        launch_extra={"console": "debugConsole"},
        exception_map={"raised": "All", "uncaught": "Unhandled"},
        port_attach="adapter",
        attach_help=(
            "port of a Dart VM service on 127.0.0.1 (dart run --enable-vm-service=PORT "
            "--disable-service-auth-codes main.dart)"
        ),
    ),
)

BY_NAME = MappingProxyType({a.name: a for a in ADAPTERS})

_VENV_PYTHONS = (".venv/bin/python", "venv/bin/python")


def find_binary(row: AdapterRow) -> str:
    """The adapter's executable ("" when none resolves). debugpy runs on tether's own
    Python when that Python has debugpy."""
    for name in row.binaries:
        if name == "":
            if _has_debugpy():
                return sys.executable
            continue
        found = shutil.which(name)
        if found:
            return found
    return ""


def _has_debugpy() -> bool:
    import importlib.util

    return importlib.util.find_spec("debugpy") is not None


def adapter_argv(row: AdapterRow, binary: str) -> list[str]:
    return [binary, *row.args]


def project_python(root: Path) -> str:
    """The debuggee's Python for debugpy: the project's virtualenv first (the Python on
    PATH is another environment, and attaching from the wrong one fails in a way that reads
    as broken code), else python3 from PATH."""
    for rel in _VENV_PYTHONS:
        candidate = root / rel
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("python3") or sys.executable


@dataclass(frozen=True)
class Resolution:
    row: AdapterRow
    root: Path | None
    marker: str
    binary: str

    @property
    def usable(self) -> bool:
        return roots.usable(self.root, self.binary)

    def why_not(self) -> str:
        shown = [b or "debugpy module" for b in self.row.binaries[:3]]
        missing = f"{' / '.join(shown)} not found: {self.row.install}"
        return roots.why_not(self.root, self.row.root_markers, self.binary, missing)


def resolve(row: AdapterRow, path: Path, workspace: Path) -> Resolution:
    hit = roots.find_root(path, workspace, row.root_markers)
    root, marker = hit if hit else (None, "")
    return Resolution(row, root, marker, find_binary(row))


def adapter_for(program: Path) -> AdapterRow | None:
    """The adapter that debugs `program`: by extension, a Go package directory for delve,
    an executable file for lldb."""
    if program.is_dir():
        return BY_NAME["delve"] if any(program.glob("*.go")) else None
    suffix = program.suffix.lower()
    for row in ADAPTERS:
        if suffix and suffix in row.extensions:
            return row
    if os.access(program, os.X_OK) and program.is_file():
        return BY_NAME["lldb"]
    return None


def delve_mode(program: Path) -> str:
    """delve's launch mode: a source package (directory or .go file) is built first."""
    return "debug" if program.is_dir() or program.suffix == ".go" else "exec"


SANDBOX_DAP_PORT = 4711  # delve's port in a sandbox: its network namespace is its own
RELAY_SOCKET = "dap.sock"  # in the adapter's own directory, bound into the sandbox
SOCKET_PATH_MAX = 104  # sun_path holds 108 bytes with its NUL; a longer path cannot be bound


def place_refusal(row: AdapterRow, place: str) -> str:
    """Why `row` cannot run in a `place` (a kind) run ("" if it can). An adapter that
    listens on loopback TCP (delve) is reached in a sandbox through the relay; a prefix
    environment's network is its own business, and no relay is run there."""
    if place != "prefix" or row.transport != "tcp":
        return ""
    return (
        f"{row.name} listens on loopback TCP, which a prefix place does not share with the "
        "host (the relay runs in a sandbox only): debug it in a sandbox or host run, or use a "
        "stdio adapter (debugpy, lldb-dap)"
    )


def relayed_argv(row: AdapterRow, binary: str, directory: Path) -> tuple[list[str], str]:
    """`row`'s adapter (a TCP one) under the relay (`tether.places.relay`), for a sandbox:
    it listens on a fixed port of the sandbox's own loopback, and the host connects to the
    Unix socket returned, in the adapter's own 0700 directory (bound into the sandbox:
    only the runtime's uid and this sandbox reach it; DAP has no authentication of its
    own). The relay script is copied there (the sandbox sees no tether source).
    ValueError (saying what to do) if that directory is too deep for a socket path."""
    sock = str(directory / RELAY_SOCKET)
    if len(sock) >= SOCKET_PATH_MAX:
        raise ValueError(
            f"{row.name} in a sandbox is reached through a Unix socket in its own directory, "
            f"and the runtime's state dir is too deep for one ({sock}): point "
            "TETHER_STATE_DIR at a shorter path"
        )
    script = directory / "relay.py"
    shutil.copyfile(relay.__file__, script)
    args = [a.replace("127.0.0.1:0", f"127.0.0.1:{SANDBOX_DAP_PORT}") for a in row.args]
    pairs = [(sock, SANDBOX_DAP_PORT)]
    return relay.argv(sys.executable, pairs, [binary, *args], script=str(script)), sock


class AdapterReport(TypedDict):
    """One row of `debug adapters`."""

    adapter: str
    binary: str
    marker: str  # a root marker found (workspace-relative), "" if none
    usable: bool
    why_not: str
    install: str  # how to get the binary, when it is not found
    breakpoints: FeatureReport
    place: str


def adapters_report(workspace: Path, place: str = "host") -> list[AdapterReport]:
    """`debug adapters`: per adapter, whether it can be used in this workspace and why not.
    `place`: the run's place kind (`place_refusal`)."""
    out: list[AdapterReport] = []
    for row in ADAPTERS:
        res = resolve(row, workspace, workspace)
        binary = res.binary
        marker_anywhere = res.marker or _marker_below(workspace, row.root_markers)
        why_not = (
            ""
            if binary and marker_anywhere
            else Resolution(row, workspace if marker_anywhere else None, "", binary).why_not()
        )
        why_not = why_not or place_refusal(row, place)
        out.append(
            {
                "adapter": row.name,
                "binary": binary,
                "marker": marker_anywhere,
                "usable": not why_not,
                "why_not": why_not,
                "install": "" if binary else row.install,
                "breakpoints": features(row).report(),
                "place": place,
            }
        )
    return out


MARKER_SKIP = frozenset({"node_modules", "vendor", "__pycache__", "target"})


def _marker_below(workspace: Path, markers: tuple[str, ...], limit: int = 2000) -> str:
    """A root marker anywhere in the workspace (shallowest first, bounded walk), as a
    workspace-relative path ("" when none)."""

    def wanted(e: os.DirEntry[str]) -> bool:
        return e.name in markers and e.is_file()

    found = roots.first_below(workspace, wanted, MARKER_SKIP, limit)
    return os.path.relpath(found, workspace) if found else ""


def launch_config(row: AdapterRow, program: Path, args: list[str], cwd: Path) -> JSONObject:
    """The `launch` request's arguments for `program` under `row`."""
    config: JSONObject = {**row.launch_extra, "program": str(program), "args": [*args]}
    config["cwd"] = str(cwd)
    if row.name == "debugpy":
        config["python"] = project_python(cwd)
    elif row.name == "delve":
        config["mode"] = delve_mode(program)
        if config["mode"] == "debug":
            # the built binary stays inside the workspace, beside the package
            base = program if program.is_dir() else program.parent
            config["output"] = str(base / f"__debug_bin_tether_{os.getpid()}")
    return config


def attach_config(row: AdapterRow, port: int | None, pid: int | None) -> JSONObject:
    """The `attach` request's arguments; ValueError (saying what `row` attaches to) when
    neither `pid` nor `port` is something it can attach to."""
    if pid is not None and row.pid_attach:
        return {"mode": "local", "processId": pid} if row.name == "delve" else {"pid": pid}
    if port is not None and row.port_attach:
        match row.name:
            case "debugpy":
                return {"justMyCode": True}
            case "delve":  # the headless server debugs its program already: join it
                return {"mode": "remote", "stopOnEntry": False}
            case "lldb":
                return {"gdb-remote-port": port, "gdb-remote-hostname": "127.0.0.1"}
            case "dart":
                return {"vmServiceUri": f"http://127.0.0.1:{port}/"}
    given = "pid" if pid is not None else "port"
    if not row.attach_help:
        raise ValueError(f"{row.name} cannot attach to a running program; launch it instead")
    raise ValueError(f"{row.name} cannot attach by {given}; it attaches to a {row.attach_help}")


def features(row: AdapterRow, capabilities: JSONObject | None = None) -> Features:
    """What `row`'s adapter does with breakpoints: its `capabilities` (initialize's answer)
    where they say, else the table. An exception filter it does not advertise is not used."""
    caps = capabilities or {}
    claims = row.breakpoint_features

    def says(key: str, feature: str) -> bool:
        return bool(caps.get(key, feature in claims))

    hit_ok = caps.get("supportsHitConditionalBreakpoints", True) is not False
    exceptions = dict(row.exception_map)
    if "exceptionBreakpointFilters" in caps:
        offered = {f.get("filter") for f in as_objs(caps.get("exceptionBreakpointFilters"))}
        exceptions = {k: v for k, v in exceptions.items() if v == "" or v in offered}
    return Features(
        adapter=row.name,
        condition=says("supportsConditionalBreakpoints", "condition"),
        hit_formats=dict(row.hit_formats) if hit_ok else {},
        hit_equal_by_removal=row.hit_equal_by_removal,
        log_message=says("supportsLogPoints", "log_message"),
        function=says("supportsFunctionBreakpoints", "function"),
        exceptions=exceptions,
        exception_help=row.exception_help or "it offers no such filter",
        source="capabilities" if caps else "table",
    )


def adapter_env(row: AdapterRow, scratch: ProcessScratch) -> dict[str, str]:
    """The adapter's environment, and so its program's: `scratch`'s (TMPDIR and the XDG
    homes in it, the caches shared and kept beside it), with the toolchain caches of
    `row.cache_env` in that shared cache directory."""
    env = scratch.env()
    for var, sub in row.cache_env.items():
        env[var] = str(ensure_private_dir(scratch.cache / sub))
    return env


def initialize_arguments(row: AdapterRow) -> JSONObject:
    """What we tell an adapter about ourselves: paths as paths, 1-based lines and
    columns, no terminal to run the program in."""
    return {
        "clientID": "tether",
        "clientName": "tether",
        "adapterID": row.adapter_id or row.name,
        "pathFormat": "path",
        "linesStartAt1": True,
        "columnsStartAt1": True,
        "supportsVariableType": True,
        "supportsRunInTerminalRequest": False,
        "locale": "en",
    }
