"""A conversation's Python layer: the interpreter its kernel runs on, and where %pip goes.

The measured problem: the kernel ran on the runtime's interpreter (`sys.executable`), so
one conversation's `%pip install` / `%pip uninstall msgpack` changed tether's own
virtualenv, for the runtime and every other conversation's next kernel; and a project's
own `.venv` was never what its cells imported from.

A layer is a virtualenv of the conversation's own (in a directory its kernel actor owns,
removed with it) over the project's interpreter: `<workspace>/.venv` or `venv` where the
project has one (as debugpy's interpreter is chosen), else the runtime's base Python.
What its `sys.path` holds, in order:

1. the layer's own site-packages: where `%pip` installs (pip installs into `sys.prefix`,
   which is the layer), so nothing is ever installed into the project's venv or tether's;
2. the project venv's site-packages (with its .pth files: an editable install of the
   project itself works), through `site.addsitedir` in a .pth;
3. last, tether's own site-packages, read-only, to lend ipykernel and what it needs when
   the project lacks them: nothing is installed into the project to get a kernel. It can
   only lend to the same Python version (pyzmq, tornado, psutil are compiled); another
   version needs ipykernel in the project's venv, and the error says so.

Making one is a few files and a symlink (no `python -m venv`: that costs ~1 s).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from tether.messages.kernel_ops import Layer  # (the wire's: it crosses with a spare)

PROJECT_VENVS = (".venv", "venv")


class LayerError(ValueError):
    """No layer can be made over this interpreter (the message says what to do)."""


def project_interpreter(workspace: str) -> str:
    """The project's own Python (`.venv/bin/python` or `venv/bin/python`), or ""."""
    for name in PROJECT_VENVS:
        python = Path(workspace, name, "bin", "python")
        if os.access(python, os.X_OK):
            return str(python)
    return ""


def _venv_of(python: str) -> Path | None:
    root = Path(python).parent.parent
    return root if (root / "pyvenv.cfg").is_file() else None


def _config(venv: Path) -> dict[str, str]:
    out = {}
    for line in (venv / "pyvenv.cfg").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def make_layer(directory: str, workspace: str | None) -> Layer:
    """Make (or find, if made before) the layer in `directory` for `workspace`'s project
    (None: over the runtime's base Python, as a spare kernel's, made before its run)."""
    project = project_interpreter(workspace) if workspace else ""
    venv = _venv_of(project) if project else None
    if venv is not None:
        config = _config(venv)
        home = config.get("home", "")
        version = config.get("version_info") or config.get("version", "")
        base = str(Path(project).resolve())
        site = _site_packages(venv, version)
    else:
        home = os.path.join(sys.base_prefix, "bin")
        version = ".".join(str(v) for v in sys.version_info[:3])
        base = str(Path(home, f"python{sys.version_info[0]}.{sys.version_info[1]}"))
        if not os.access(base, os.X_OK):
            base = str(Path(sys.executable).resolve())
        site = ""
    short = ".".join(version.split(".")[:2])
    own = f"{sys.version_info[0]}.{sys.version_info[1]}"
    has_kernel = bool(site) and Path(site, "ipykernel").is_dir()
    if short != own and not has_kernel:
        raise LayerError(
            f"the project's interpreter {project} is Python {short or '?'}, and tether can "
            f"lend ipykernel only to Python {own} (its own): install it into the project "
            f"({Path(project).parent / 'pip'} install ipykernel), or remove the project's venv "
            "to use tether's Python"
        )
    root = Path(directory)
    lib = root / "lib" / f"python{short}" / "site-packages"
    lib.mkdir(parents=True, exist_ok=True)
    (root / "bin").mkdir(exist_ok=True)
    python = root / "bin" / "python"
    if not python.is_symlink():
        python.symlink_to(base)
    (root / "pyvenv.cfg").write_text(
        f"home = {home}\ninclude-system-site-packages = false\nversion = {version}\n"
    )
    if site:  # (processed as a site dir: the project's own .pth files apply)
        (lib / "00-tether-project.pth").write_text(f"import site; site.addsitedir({site!r})\n")
    lends = not has_kernel
    if lends:
        (lib / "zz-tether-lends.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return Layer(str(root), str(python), base, site, lends)


def _site_packages(venv: Path, version: str) -> str:
    short = ".".join(version.split(".")[:2])
    site = venv / "lib" / f"python{short}" / "site-packages"
    if site.is_dir():
        return str(site)
    found = sorted(venv.glob("lib/python3*/site-packages"))
    return str(found[0]) if found else ""
