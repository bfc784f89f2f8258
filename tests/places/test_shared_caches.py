"""Poisoning a cache another place reads (issue 22 item 3: "poison a shared cache (pip,
GOCACHE, node) another place reads"), from a sandboxed cell and a sandboxed vibe worker.

What is shared on the host: every host-place server, checker and kernel of a runtime gets
the runtime's one cache directory (`tether.scratch`: XDG_CACHE_HOME, PIP_CACHE_DIR,
GOCACHE beside the scratch dirs, kept), and npm's cache is the runtime user's ~/.npm; a
host cell writes into them (the control). A sandbox binds none of them: its XDG cache,
pip's and Go's caches and npm's (HOME) are in its private /tmp, and the only directories
bound read-write are its workspace and its own (a kernel's socket dir and layer, a
worker's scratch). The attempt, each from a cell and a worker: a file made at the host's
path of each shared cache (what a poisoner writes: an entry the next reader takes), and a
real `npm cache add` of a package packed in the workspace; pip and npm are asked where
their caches are. Nothing of it reaches the host's caches."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.conftest import wait_until
from tests.places.hostile_probe import attempts
from tests.places.test_places import needs_sandbox
from tests.vibe.test_vibe import output, spawn
from tether.tools.vibe_workers import CommandBackend, VibeConfig

pytestmark = needs_sandbox
WORKER = Path(__file__).parent.parent / "vibe" / "worker.py"
DESCRIPTION = "try to plant entries in the shared caches"

POISON = """
import json, os, shutil, subprocess, sys

def plant(what, directory):
    try:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, POISONED), "w") as f:
            f.write("poisoned")
        print(what, "OPEN", flush=True)
    except OSError as e:
        print(what, "refused", type(e).__name__, flush=True)

for what, directory in TARGETS.items():
    plant(what, directory)
env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_audit": "false"}
print("pip-cache", subprocess.run([sys.executable, "-m", "pip", "cache", "dir"],
      capture_output=True, text=True).stdout.strip(), flush=True)
npm = shutil.which("npm")
if npm:
    print("npm-cache", subprocess.run([npm, "config", "get", "cache"], env=env,
          capture_output=True, text=True).stdout.strip(), flush=True)
    if ADD:
        with open("package.json", "w") as f:
            json.dump({"name": PACKAGE, "version": "1.0.0"}, f)
        packed = subprocess.run([npm, "pack", "--offline"], env=env, capture_output=True,
                                text=True)
        added = subprocess.run([npm, "cache", "add", "--offline", f"./{PACKAGE}-1.0.0.tgz"],
                               env=env, capture_output=True, text=True)
        print("npm-add exit", packed.returncode, added.returncode, added.stderr[-300:],
              flush=True)
print("poison done", flush=True)
"""


def _program(targets: dict[str, str], poisoned: str, package: str, add: bool) -> str:
    head = f"TARGETS = {targets!r}\nPOISONED = {poisoned!r}\nPACKAGE = {package!r}\n"
    return head + f"ADD = {add!r}\n" + POISON


def _npm_holds(cache: Path, package: str) -> bool:
    index = cache / "_cacache" / "index-v5"
    return index.is_dir() and any(
        package in p.read_text(errors="replace") for p in index.rglob("*") if p.is_file()
    )


def test_a_sandboxed_cell_and_worker_cannot_poison_a_cache_another_place_reads(
    runtime_factory: Any, tmp_path: Path
) -> None:
    rt = runtime_factory()
    shared = rt.state_dir / "cache"  # tether.scratch.CACHE: every host server's and kernel's
    home = Path.home()
    targets = {
        "pip": str(shared / "pip" / "http-v2"),
        "go-build": str(shared / "go-build"),
        "xdg-cache": str(shared),
        "npm": str(home / ".npm" / "_cacache" / "index-v5"),
        "user-cache": str(home / ".cache" / "tether"),  # (prefix places' roots are kept there)
    }
    poisoned = f"poison-{uuid.uuid4().hex[:8]}"
    package = f"tether-poison-{uuid.uuid4().hex[:8]}"
    h, a, w = tmp_path / "h", tmp_path / "a", tmp_path / "w"
    for d in (h, a, w):
        d.mkdir()

    # the control: a host cell's pip cache is the runtime's shared one, and it writes there
    host = rt.open_run("h", workdir=h)
    only_pip = {"pip": targets["pip"]}
    res = host.call(
        "eval", {"code": _program(only_pip, poisoned, package, False), "description": DESCRIPTION}
    )
    assert "pip OPEN" in res.text and f"pip-cache {shared / 'pip'}" in res.text, res.text
    assert (Path(targets["pip"]) / poisoned).exists()
    (Path(targets["pip"]) / poisoned).unlink()

    def none_reached(kind: str, text: str) -> None:
        assert "poison done" in text, (kind, text)
        for what, directory in targets.items():
            # (makedirs and the write may succeed: inside, those paths are in its tmpfs)
            assert not (Path(directory) / poisoned).exists(), (kind, what, text)
        assert "pip-cache /tmp/home/.cache/pip" in text, (kind, text)
        if shutil.which("npm"):
            assert "npm-cache /tmp/home/.npm" in text, (kind, text)
            assert "npm-add exit 0 0" in text, (kind, text)  # (it did add, to its own)
            assert not _npm_holds(home / ".npm", package), (kind, text)

    # a sandboxed cell
    boxed = rt.open_run("a", workdir=a, place="sandbox")
    res = boxed.call(
        "eval", {"code": _program(targets, poisoned, package, True), "description": DESCRIPTION}
    )
    assert not res.is_error, res.text
    none_reached("cell", res.text)
    assert set(attempts(res.text)) == set(targets), res.text

    # a sandboxed vibe worker running the same program
    shutil.copy(WORKER, w / "worker.py")
    (w / "poison.py").write_text(_program(targets, poisoned, package, True))
    config = VibeConfig(backends={"fast": CommandBackend([sys.executable, str(w / "worker.py")])})
    worker_run = rt.open_run("w", workdir=w, place="sandbox", vibe=True, vibe_config=config)
    wid = spawn(worker_run, f"sh {sys.executable} poison.py")
    text = wait_until(lambda: (lambda o: o if "exit 0" in o else None)(output(worker_run, wid)), 60)
    none_reached("worker", text)
