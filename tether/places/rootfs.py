"""A prefix place on a root filesystem of its own: a Debian root made by mmdebstrap, entered
through bubblewrap, with the path mapping between the host and the root.

This is the `prefix` kind with a real isolated environment that needs no daemon and no
registry (a container's `podman exec` is the same kind, with another command). The root:

- is built once (`build_debian_root`, about a minute: `python -m tether.places.rootfs
  build`, which scripts/install.sh runs) and kept under a tether-owned cache directory
  (`roots_dir()`: $TETHER_ROOTS_DIR, else $XDG_CACHE_HOME/tether/roots, else
  ~/.cache/tether/roots), never rebuilt while it is there;
- is Debian's minbase with python3 and python3-ipykernel: the kernel of a conversation in
  it runs on the root's own Python, with the root's ipykernel (installed in the root by
  Debian's package, not lent from the host), so nothing of the host's interpreter is in
  it;
- is entered read-only (one cached root serves every place made on it; a conversation's
  writes go to its workspace and a private /tmp), in its own user, pid, ipc, uts and
  network namespaces with no capabilities, dying with its parent.

What tether must reach inside (a kernel's ipc sockets and connection file) lives in an
exchange directory beneath the runtime's kernels dir, mapped to `EXCHANGE_INSIDE`: only
the kernels of this place are there, never another conversation's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tether.places.place import Limits, Place, PlaceError

DEBIAN_SUITE = "bookworm"
DEBIAN_PACKAGES = ("python3", "python3-ipykernel")
DEBIAN_ROOT = f"debian-{DEBIAN_SUITE}-python3-ipykernel"  # the cached root's directory name
MARKER = "etc/tether-root"  # written last: a root without it is a build that did not finish
EXCHANGE_INSIDE = "/run/tether"  # where the exchange directory is inside the root
HOME_INSIDE = "/tmp/home"
UID_INSIDE = 1000
# what a conversation never needs from a root: docs, manuals, translations
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*")


def roots_dir() -> Path:
    if os.environ.get("TETHER_ROOTS_DIR"):
        return Path(os.environ["TETHER_ROOTS_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tether" / "roots"


def debian_root(roots: Path | None = None) -> Path:
    """The built Debian root; PlaceError saying how to build it if it is not there."""
    root = (roots or roots_dir()) / DEBIAN_ROOT
    if not (root / MARKER).is_file():
        raise PlaceError(
            f"the Debian root for a prefix place is not built ({root} has no {MARKER}): "
            "build it once with `python -m tether.places.rootfs build` (needs mmdebstrap and "
            "Debian's mirror; scripts/install.sh does it), or use place='sandbox'"
        )
    return root


def build_debian_root(roots: Path | None = None) -> Path:
    """Build the Debian root with mmdebstrap unless it is there (idempotent): into a
    temporary directory beside it, renamed into place once complete."""
    with_root = roots or roots_dir()
    root = with_root / DEBIAN_ROOT
    if (root / MARKER).is_file():
        return root
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise PlaceError("building the Debian root needs mmdebstrap: apt-get install mmdebstrap")
    with_root.mkdir(parents=True, exist_ok=True)
    building = with_root / f".{DEBIAN_ROOT}.{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    argv = [
        mmdebstrap,
        "--variant=minbase",
        f"--include={','.join(DEBIAN_PACKAGES)}",
        '--aptopt=Apt::Install-Recommends "false"',
        *(f"--dpkgopt=path-exclude={pattern}" for pattern in DPKG_EXCLUDES),
        "--format=directory",
        DEBIAN_SUITE,
        str(building),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise PlaceError(f"mmdebstrap failed (exit {done.returncode}): {done.stderr[-1500:]}")
    (building / MARKER).write_text(f"{DEBIAN_SUITE} {' '.join(DEBIAN_PACKAGES)}\n")
    shutil.rmtree(root, ignore_errors=True)  # (an unfinished one, without its marker)
    os.rename(building, root)
    return root


def bwrap_entry(root: Path, binds: Mapping[str, str]) -> list[str]:
    """The bubblewrap command that enters `root` (read-only) with `binds` (host path ->
    path inside, read-write), ending in "--": the place's prefix command."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise PlaceError(
            "a prefix place on a root filesystem is entered with bubblewrap, and `bwrap` is "
            "not on PATH: apt-get install bubblewrap"
        )
    out = [bwrap, "--unshare-user", "--uid", str(UID_INSIDE), "--gid", str(UID_INSIDE)]
    out += ["--cap-drop", "ALL", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    out += ["--unshare-net", "--die-with-parent", "--new-session"]
    out += ["--ro-bind", str(root), "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    out += ["--dir", HOME_INSIDE, "--setenv", "HOME", HOME_INSIDE]
    covered: set[str] = set()
    for host, inside in binds.items():
        if not os.path.isdir(host):
            raise PlaceError(f"a prefix place maps {host!r}, which is not a directory here")
        mount_dir = _mount_dir(root, inside)
        if mount_dir and mount_dir not in covered:  # (the root is read-only: bwrap cannot
            covered.add(mount_dir)  # make the mount point in it, a tmpfs over its parent can)
            out += ["--tmpfs", mount_dir]
        out += ["--bind", host, inside]
    return [*out, "--"]


def _mount_dir(root: Path, inside: str) -> str:
    """ "" if `inside` exists in `root`, else the existing directory of the root to cover
    with a tmpfs so that it can be made (its parent: /srv for /srv/ws)."""
    if (root / inside.lstrip("/")).is_dir():
        return ""
    parent = os.path.dirname(inside.rstrip("/"))
    if parent in ("/", "") or not (root / parent.lstrip("/")).is_dir():
        raise PlaceError(
            f"a prefix place maps a directory to {inside!r}, which its root does not have: "
            "map it one level beneath a directory the root has (/srv/ws, /mnt/data)"
        )
    return parent


def rootfs_place(
    root: Path,
    paths: Mapping[str, str],
    exchange: Path,
    limits: Limits | None = None,
) -> Place:
    """A prefix place in `root`: `paths` maps host directories (the workspace) to their
    paths inside, read-write; `exchange` (beneath the runtime's kernels dir: its kernels'
    ipc sockets go there) is mapped to EXCHANGE_INSIDE."""
    exchange.mkdir(mode=0o700, parents=True, exist_ok=True)
    binds = {**{str(h): i for h, i in paths.items()}, str(exchange): EXCHANGE_INSIDE}
    return Place.prefix(bwrap_entry(root, binds), binds, limits=limits)


def main(argv: list[str]) -> int:
    if argv[1:] == ["build"]:
        print(build_debian_root())
        return 0
    if argv[1:] == ["path"]:
        print(debian_root())
        return 0
    print("usage: python -m tether.places.rootfs build | path", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
