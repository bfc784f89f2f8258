"""The package layout as a rule: which part of tether may import which.

A unit is a subpackage of tether (`tether.lsp`, `tether.actors`, ...) or a top-level
module (`tether.runtime`, ...); `tether` itself is the public face. Every unit sits in one
layer of LAYERS, and an import may only go to its own layer or one below: nothing runs
back up. On top of that the units form no cycle, the libraries are pure (no actors, no
thespian, nothing of the host), and the tools reach actors only through messages.

Every import statement counts, wherever it is (function-level and TYPE_CHECKING ones too):
a lazy import is still a dependency. A new module fails `test_every_module_has_a_layer`
until it is placed here - that placement is the design decision to make.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from thespian.actors import Actor

import tether

PACKAGE = Path(tether.__file__).parent

# bottom to top
LAYERS: list[set[str]] = [
    # plain data and leaf helpers
    {
        "tether.kinds",
        "tether.call_scope",
        "tether.messages",
        "tether.protocol",
        "tether.processes",
        "tether.owned_process",  # a started process in its place: actors and kernels own one
        "tether.health_node",  # the health tree's node type, built by actors, supervisors, runtime
        "tether.cgroups",  # places make theirs with it, capacity reads and divides its box
        "tether.atomic_files",
        "tether.beneath",  # open beneath a root, no symlink followed (atomic_files, file tools)
        "tether.roots",
        "tether.private_dirs",
        "tether.scratch",
        "tether.places",
        "tether.json_types",  # the named type of decoded foreign JSON
    },
    # pure libraries, and the call-channel transport actors and host share
    {
        "tether.lsp",
        "tether.structural",
        "tether.debug",
        "tether.kernels",
        "tether.channels",
        "tether.capacity",
        "tether.vibe_runner",
        "tether.worker_views",  # a vibe worker's copy-on-write view (actor and tools use it)
        "tether.resources",  # the plain parts resource actors are composed of (no thespian)
    },
    # resource actors and their bases, then the supervisors that run them (also actors)
    {"tether.actors"},
    {"tether.supervisors"},
    # the host: tools and their call pipeline, per-run state, the runtime that boots it all
    {
        "tether.questions",
        "tether.question_ports",
        "tether.tools",
        "tether.run",
        "tether.runtime_port",  # what a Run needs of the runtime (RuntimePort)
        "tether.host",
        "tether.runtime",
        "tether.health_view",
        "tether.metrics",
    },
    # the public face and the command
    {"tether", "tether.demo", "tether.chaos", "tether.cli", "tether.mcp_server", "tether.serve"},
]

LIBRARIES = {"tether.lsp", "tether.structural", "tether.debug", "tether.kernels"}
LIBRARY_MAY_IMPORT = {
    "tether.messages",
    "tether.processes",
    "tether.owned_process",  # (the kernel handle's process)
    "tether.private_dirs",
    "tether.scratch",
    "tether.protocol",
    "tether.atomic_files",
    "tether.beneath",  # (lsp documents read beneath the session root)
    "tether.roots",
    "tether.places",
    "tether.json_types",
}  # add only leaves of layer 0

# Modules counted in the unit they are moving to. When the move is done the test below
# fails (the module is gone): drop its entry then.
PENDING_MOVES: dict[str, str] = {}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def unit_of(module: str) -> str:
    if module in PENDING_MOVES:
        return PENDING_MOVES[module]
    parts = module.split(".")
    if len(parts) == 1:
        return "tether"
    return ".".join(parts[:2])


def imports_of(path: Path, module: str, known: dict[str, Path]) -> set[str]:
    """The tether modules `module` imports (`from p import m` names module p.m when it is one)."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known}


def unit_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        here = unit_of(module)
        graph.setdefault(here, set())
        for target in imports_of(path, module, known):
            if unit_of(target) != here:
                graph[here].add(unit_of(target))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one unit (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer_of(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def test_cycles_finds_a_cycle_and_only_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_module_has_a_layer():
    placed = set().union(*LAYERS)
    assert sorted({unit_of(m) for m in modules()} - placed) == []


def test_no_import_runs_up_a_layer():
    graph = unit_graph()
    upward = [
        f"{a} imports {b}"
        for a, targets in graph.items()
        for b in targets
        if layer_of(b) > layer_of(a)
    ]
    assert sorted(upward) == []


def test_no_package_cycle():
    assert cycles(unit_graph()) == []


def test_libraries_import_only_data_and_framing():
    graph = unit_graph()
    assert {lib: sorted(graph[lib] - LIBRARY_MAY_IMPORT) for lib in LIBRARIES} == {
        lib: [] for lib in LIBRARIES
    }


def test_libraries_do_not_import_thespian():
    offenders = [
        str(path.relative_to(PACKAGE.parent))
        for module, path in modules().items()
        if unit_of(module) in LIBRARIES and "thespian" in _top_level_imports(path)
    ]
    assert offenders == []


def test_tools_reach_actors_only_through_messages():
    assert unit_graph()["tether.tools"] & {"tether.actors", "tether.supervisors"} == set()


def test_actors_hold_only_actors():
    # every module of tether.actors defines an actor; libraries live in their own packages
    def defines_an_actor(module: str) -> bool:
        loaded = importlib.import_module(module)
        return any(
            isinstance(obj, type) and issubclass(obj, Actor) and obj.__module__ == module
            for obj in vars(loaded).values()
        )

    in_actors = [m for m in modules() if m.startswith("tether.actors.")]
    assert in_actors and [m for m in in_actors if not defines_an_actor(m)] == []


def test_no_two_packages_share_a_name():
    # `tether.lsp` (the library) and `tether.tools.lsp` (the tool) once did: a reader
    # could not tell from `lsp/` which one a path or an import meant
    names: dict[str, list[str]] = {}
    for init in PACKAGE.rglob("__init__.py"):
        package = init.parent.relative_to(PACKAGE.parent)
        names.setdefault(package.name, []).append(str(package))
    assert {name: where for name, where in names.items() if len(where) > 1} == {}


def test_pending_moves_are_still_pending():
    known = modules()
    done = [m for m in PENDING_MOVES if m not in known]
    assert done == [], f"{done} moved: drop them from PENDING_MOVES in tests/test_layout.py"


def _top_level_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_setuptools_finds_every_package():
    # setup.cfg's `packages = find:` skips a directory without __init__.py and all below it
    from setuptools import find_packages

    dirs = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("*.py")}
    found = set(find_packages(str(PACKAGE.parent), include=["tether", "tether.*"]))
    assert sorted(dirs - found) == []
