"""The `sandbox` place: a command wrapped in bubblewrap (`bwrap`), and what it sees.

Why bubblewrap: it is what Claude Code uses on Linux, Debian packages it (`bubblewrap`),
it needs no daemon and no image, and it starts in a few ms. What the wrapped process gets:

- its own user namespace, uid `SANDBOX_UID`, and no capabilities: bubblewrap run by root
  keeps every capability inside unless told (measured: CapEff 000001fffeffffff), so
  `--cap-drop ALL` always (CapEff 0, root or not);
- its own pid namespace (`--unshare-pid`; bwrap is its init, `--die-with-parent`): it sees
  and signals only its own processes, and killing the bwrap process ends all of them;
- its own network namespace always (`--unshare-net`): no host loopback (thespian's ports),
  no abstract Unix sockets (the call channels live there), no metadata address. "Network
  on" is user-mode egress through slirp4netns, never the host's loopback
  (`tether.places.egress`);
- the workspace read-write; /usr, /etc (its secrets masked), /opt and the toolchains
  read-only (the runtime's interpreter and its venv, and what the caller names);
- a private /tmp (tmpfs, `Limits.tmp_mb`) holding its HOME, and TMPDIR pointed there;
  what the owner had put in the TMPDIR it gave (the process's scratch `tmp`, bound for
  it) before the start is seen in /tmp at the same names (basedpyright finds its
  cancellation folder by TMPDIR: `tether.lsp.cancellation`); its own ipc and uts
  namespaces; and nothing of the runtime's state dir (port files, the transport secret,
  scratch dirs, caches) except the directories the caller binds for this one process
  (a kernel's socket dir, a conversation's pip layer).

Paths are the same inside as outside: a sandbox maps nothing (but the owner's TMPDIR
entries into /tmp, paths no message carries), so paths in messages, tracebacks and tool
results need no translation.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence

from tether.places import egress
from tether.places.place import Place, PlaceError
from tether.private_dirs import default_state_dir

SANDBOX_UID = 1000  # the uid (and gid) inside: not root, whoever runs the runtime
HOME = "/tmp/home"  # inside the private /tmp: one size limit for both
SYSTEM_RO = ("/usr", "/etc", "/opt")  # (each bound if it exists)
ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # usrmerge symlinks
# what /etc holds that a conversation must not read (each masked if it exists)
ETC_SECRET_FILES = ("shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "security/opasswd")
ETC_SECRET_DIRS = ("ssh", "sudoers.d", "ssl/private")
# variables that would point a process at the host's per-user places
DROPPED_ENV = ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK", "DISPLAY")
OWN_CACHES = ("GOCACHE", "GOPATH", "GOMODCACHE")  # kept when bound for the process (rw)


def bwrap_binary() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise PlaceError(
            "the sandbox place needs bubblewrap and `bwrap` is not on PATH: install it "
            "(Debian: apt-get install bubblewrap; scripts/install.sh does), or open the run "
            "with place='host'"
        )
    return found


@functools.lru_cache(maxsize=4)
def _probe(bwrap: str) -> str:
    """Empty if bwrap can make the namespaces a sandbox needs here, else why not (cached)."""
    argv = [bwrap, *_namespaces(), "--ro-bind", "/", "/", "--", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} could not be run: {exc}"
    if done.returncode == 0:
        return ""
    return done.stderr.decode("utf-8", "replace").strip() or f"exit status {done.returncode}"


def check_available() -> str:
    """The bwrap binary, once it was seen to start a sandbox here; else a PlaceError
    naming what is missing."""
    bwrap = bwrap_binary()
    problem = _probe(bwrap)
    if problem:
        raise PlaceError(
            f"the sandbox place cannot start here: bubblewrap failed ({problem}). It needs "
            "user namespaces (sysctl user.max_user_namespaces > 0, and "
            "kernel.unprivileged_userns_clone=1 where that exists; inside a container, one "
            "that allows them); or open the run with place='host'"
        )
    return bwrap


def _namespaces() -> list[str]:
    return [
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--cap-drop",
        "ALL",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",  # (no TIOCSTI into a terminal the runtime holds)
    ]


def toolchain_roots(paths: Iterable[str]) -> list[str]:
    """The directories to bind read-only so each program in `paths` runs inside: for a
    program in a `bin` dir, that dir's parent (an interpreter finds its lib beside it),
    for the path as given, each link its symlinks pass through (a venv's `python` may
    lead to its interpreter through a link elsewhere: a shim, a shadowed PATH entry) and
    where they end."""
    roots: list[str] = []
    for path in paths:
        for candidate in [*_link_chain(path), os.path.realpath(path)]:
            parent = os.path.dirname(candidate)
            root = os.path.dirname(parent) if os.path.basename(parent) == "bin" else parent
            if root not in roots and not _under_system(root):
                roots.append(root)
    return roots


def refuse_links_out(program: str, workspace: str | None) -> None:
    """Refuse a program whose chain of links passes through the workspace and then leaves
    it for a directory a sandbox would not show anyway. Every hop's directory is bound
    read-only (`toolchain_roots`), so a link the conversation planted in its workspace
    would choose what its sandbox sees: another run's workspace, the state dir. Links
    outside the workspace are the host's own (a venv's shim) and are followed."""
    if not workspace:
        return
    homes = {os.path.abspath(workspace), os.path.realpath(workspace)}
    shown = [*SYSTEM_RO, *ROOT_LINKS, *runtime_toolchains(), *homes]
    entered = False
    for hop in [*_link_chain(program), os.path.realpath(program)]:
        if any(_beneath(hop, home) for home in homes):
            entered = True
        elif entered and not any(_beneath(hop, root) for root in shown):
            raise PlaceError(
                f"{program} leads out of the workspace {workspace} through a symlink (to "
                f"{hop}); a sandbox does not show what the project's own links name outside "
                "it. Make the link point inside the workspace, or put the program on the "
                "runtime's PATH"
            )


def _link_chain(path: str, hops: int = 40) -> list[str]:
    """`path` (absolute) and every symlink it leads through, hop by hop."""
    chain = [os.path.abspath(path)]
    while len(chain) <= hops and os.path.islink(chain[-1]):
        target = os.readlink(chain[-1])
        chain.append(os.path.abspath(os.path.join(os.path.dirname(chain[-1]), target)))
    return chain


def _under_system(path: str) -> bool:
    return any(path == s or path.startswith(s + "/") for s in SYSTEM_RO) or path == "/"


@functools.cache
def runtime_toolchains() -> list[str]:
    """The runtime's own interpreter and venv (read-only: a kernel or adapter runs on it),
    and tether's package where it lies outside them (an editable install: a Python-callable
    worker runs `python -m tether.vibe_runner`)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return toolchain_roots([sys.executable, os.path.join(sys.base_prefix, "bin", "python3")]) + [
        p
        for p in (sys.prefix, sys.base_prefix, package)
        if not _under_system(p) and not p.startswith(sys.prefix + os.sep)
    ]


def visible(path: str, workspace: str | None) -> bool:
    """True if `path` (and where its symlinks lead) is there inside a sandbox of `workspace`
    without binding more: the system, the runtime's toolchains, the workspace."""
    roots = [*SYSTEM_RO, *runtime_toolchains(), *([workspace] if workspace else [])]
    return all(
        any(p == r or p.startswith(r.rstrip("/") + "/") for r in roots)
        for p in (os.path.abspath(path), os.path.realpath(path))
    )


def python_inside(python: str, workspace: str | None) -> str:
    """`python` if a sandbox of `workspace` has it (a project venv, the system's), else the
    runtime's own base Python (a version manager's shim on PATH is not there)."""
    if visible(python, workspace):
        return python
    base = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}")
    return base if os.access(base, os.X_OK) else sys.executable


def bwrap_argv(
    place: Place,
    argv: Sequence[str],
    cwd: str,
    workspace: str | None,
    rw: Sequence[str] = (),
    ro: Sequence[str] = (),
    workspace_from: str | None = None,
    given_tmp: str | None = None,
) -> list[str]:
    """`argv` wrapped in bubblewrap for `place` (a sandbox). rw: directories of this
    process bound read-write at the same path (a kernel's socket dir); ro: toolchains
    beyond the runtime's own; workspace_from: the directory bound read-write at the
    workspace's path instead of the workspace (an isolated worker's copy of it);
    given_tmp: the TMPDIR its owner gave it, whose entries are bound into /tmp
    (`tmp_entries`)."""
    if place.kind != "sandbox":
        raise PlaceError(f"bwrap_argv wraps for a sandbox place, not {place.kind!r}")
    out = [check_available(), *_namespaces(), "--proc", "/proc", "--dev", "/dev"]
    out += _system_binds()  # (the machine's layout: read once per process)
    size = str(place.limits.tmp_mb * 2**20)
    out += ["--size", size, "--tmpfs", "/tmp", "--dir", HOME]
    for entry, inside in tmp_entries(given_tmp, rw):
        out += ["--bind", entry, inside]
    out += ["--size", size, "--tmpfs", "/dev/shm"]
    seen: set[str] = set()
    for path in [*runtime_toolchains(), *toolchain_roots(argv[:1]), *ro]:  # (the same for
        # every spawn of this process except argv[0] and ro: cached where it can be)
        if path not in seen and os.path.exists(path):
            seen.add(path)
            out += ["--ro-bind", path, path]
    if workspace:
        out += ["--bind", workspace_from or workspace, workspace]
    for path in rw:
        out += ["--bind", path, path]
    out += ["--chdir", cwd, "--", *argv]
    return egress.network_argv(out) if place.network else out


def tmp_entries(given_tmp: str | None, rw: Sequence[str]) -> list[tuple[str, str]]:
    """(host path, path in /tmp) of each entry of `given_tmp`, the TMPDIR the owner gave a
    process, where that lies in a directory bound for it (`rw`: its scratch, so nothing
    more is exposed). Inside, TMPDIR is the private /tmp, so what the owner made there for
    the process before starting it must be seen there: a basedpyright's cancellation
    folder, which the server looks for under its TMPDIR and tether writes in from the host
    (without it a cancelled request ran to its end, past 30 s here, holding up every call)."""
    if not given_tmp or not any(_beneath(given_tmp, p) for p in rw):
        return []
    try:
        names = sorted(os.listdir(given_tmp))
    except OSError:
        return []
    out = []
    for name in names:
        entry = os.path.join(given_tmp, name)
        inside = f"/tmp/{name}"
        if inside != HOME and not os.path.islink(entry):
            out.append((entry, inside))
    return out


@functools.cache
def _system_binds() -> tuple[str, ...]:
    out: list[str] = []
    for path in SYSTEM_RO:
        if os.path.isdir(path):
            out += ["--ro-bind", path, path]
    for link in ROOT_LINKS:
        if os.path.islink(link):
            out += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            out += ["--ro-bind", link, link]
    for name in ETC_SECRET_FILES:
        if os.path.isfile(f"/etc/{name}"):
            out += ["--ro-bind", "/dev/null", f"/etc/{name}"]
    for name in ETC_SECRET_DIRS:
        if os.path.isdir(f"/etc/{name}"):
            out += ["--tmpfs", f"/etc/{name}"]
    return tuple(out)


def sandbox_env(env: Mapping[str, str], rw: Sequence[str] = ()) -> dict[str, str]:
    """The environment inside: `env` without what points at the runtime's state dir (other
    than the directories bound for this process) or the host user's sessions, with HOME,
    the temp dirs and the XDG homes in the private /tmp, and caches of its own."""
    state = str(default_state_dir())
    keep = tuple(rw)
    out: dict[str, str] = {}
    for name, value in env.items():
        if name in DROPPED_ENV:
            continue
        if state in value and not any(p in value for p in keep):
            continue
        out[name] = value
    # a cache directory bound for this process (a run's own go build cache) is kept
    own = {k: out[k] for k in OWN_CACHES if k in out and any(_beneath(out[k], p) for p in keep)}
    out.update(
        HOME=HOME,
        TMPDIR="/tmp",
        TMP="/tmp",
        TEMP="/tmp",
        XDG_CACHE_HOME=f"{HOME}/.cache",
        XDG_CONFIG_HOME=f"{HOME}/.config",
        XDG_STATE_HOME=f"{HOME}/.local/state",
        XDG_DATA_HOME=f"{HOME}/.local/share",
        GOCACHE=f"{HOME}/.cache/go-build",
        PIP_CACHE_DIR=f"{HOME}/.cache/pip",
        USER="sandbox",
        LOGNAME="sandbox",
    )
    out.update(own)
    return out


def _beneath(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")
