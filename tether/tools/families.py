"""The tool families: which modules provide tools, each loaded or refused with its cause.

Families are listed once, in `FAMILY_MODULES`; each module exposes `specs()` (and
optionally `wrappers()`). A family module that does not exist yet is skipped; one that
fails to import is a `FamilyLoadError` naming the module and the cause, never a silently
smaller surface. `tether.tools.registry.Registry` is built from what is loaded here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from tether.json_types import JSONObject
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext, ToolSpec

# The tool families, in surface order. A module missing from the tree is skipped.
FAMILY_MODULES: tuple[str, ...] = (
    "tether.tools.harness",
    "tether.tools.ask_user",
    "tether.tools.structural",
    "tether.tools.lsp_tool",
    "tether.tools.debug_tool",
    "tether.tools.vibe",
    "tether.tools.eval",
)

Wrapper = Callable[[ToolContext, JSONObject, Callable[[], ToolResult]], ToolResult]


class FamilyLoadError(RuntimeError):
    """A tool family module exists but cannot be loaded."""


@dataclass(frozen=True)
class Family:
    name: str  # key of the family's per-run state in ctx.state
    module: str
    specs: tuple[ToolSpec, ...]
    wrappers: Mapping[str, Wrapper] = field(default_factory=dict)


def load_family(module_name: str) -> Family | None:
    """Import one family module; None when it does not exist (yet)."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
            return None
        raise FamilyLoadError(
            f"tool family {module_name} cannot be imported: {type(e).__name__}: {e}"
        ) from e
    except Exception as e:
        raise FamilyLoadError(
            f"tool family {module_name} cannot be imported: {type(e).__name__}: {e}"
        ) from e
    name = getattr(module, "FAMILY", module_name.rsplit(".", 1)[-1])
    specs_fn = getattr(module, "specs", None)
    if not callable(specs_fn):
        raise FamilyLoadError(f"tool family {module_name} has no specs() function")
    try:
        specs = tuple(specs_fn())
        wrappers_fn = getattr(module, "wrappers", None)
        wrappers = dict(wrappers_fn()) if callable(wrappers_fn) else {}
    except Exception as e:
        raise FamilyLoadError(
            f"tool family {module_name}: specs()/wrappers() raised {type(e).__name__}: {e}"
        ) from e
    for spec in specs:
        if not isinstance(spec, ToolSpec):
            raise FamilyLoadError(f"tool family {module_name}: specs() returned {spec!r}")
    return Family(name=name, module=module_name, specs=specs, wrappers=wrappers)


def load_families(modules: Iterable[str] = FAMILY_MODULES) -> list[Family]:
    return [f for f in (load_family(m) for m in modules) if f is not None]
