"""Network on: a sandbox with user-mode egress, and never the host's loopback.

A sandbox always has its own network namespace (`tether.places.sandbox`): no host
loopback (thespian's ports), no abstract Unix sockets (the call channels), nothing at
all. "Network on" adds slirp4netns (Debian `slirp4netns`): a tap device inside whose
traffic slirp4netns, outside, turns into ordinary sockets of the host's. So a sandbox
reaches what any process of the machine reaches through its normal routes (the package
mirrors, a service on another address), and not:

- the host's loopback: slirp4netns's gateway (10.0.2.2) would lead to the host's
  127.0.0.1, and `--disable-host-loopback` closes that; 127.0.0.1 inside is the
  sandbox's own;
- the tree's abstract Unix sockets: they belong to the host's network namespace;
- a metadata address: 169.254.0.0/16 is unreachable inside (a route nothing inside can
  change, having no capabilities).

What it still reaches: a socket the host binds to a non-loopback address (0.0.0.0
included), like any machine on that network would. The tree binds loopback only.

Why slirp4netns and not pasta (Debian `passt`): pasta run by root drops to nobody before
joining the sandbox's namespaces and then may not enter them ("Couldn't enter user
namespace"), and its default maps its gateway to the host's loopback (`--no-map-gw`
turns that off); slirp4netns has both answers as flags. How it is attached to a
bubblewrap sandbox: `egress_helper.py`.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from tether.places.place import PlaceError

HELPER = str(Path(__file__).with_name("egress_helper.py"))
TUN = "/dev/net/tun"  # where slirp4netns makes the sandbox's tap device
RESOLV_CONF = "/etc/resolv.conf"  # the host's resolver file, read
RESOLV_PATH = "/etc/resolv.conf"  # where the sandbox looks for its own
SLIRP_DNS = "10.0.2.3"  # slirp4netns's DNS forwarder, on its virtual network
NEEDED = (
    ("slirp4netns", "slirp4netns"),  # (the program, its Debian package)
    ("nsenter", "util-linux"),
    ("ip", "iproute2"),
)


def programs() -> list[str]:
    """The programs network on needs, by full path; else a PlaceError naming what to
    install."""
    found = {name: shutil.which(name) for name, _ in NEEDED}
    missing = [(name, package) for name, package in NEEDED if found[name] is None]
    if missing:
        raise PlaceError(
            "a sandbox with network on needs user-mode networking, and not on PATH: "
            f"{', '.join(name for name, _ in missing)}. Install it (Debian: apt-get install "
            f"{' '.join(package for _, package in missing)}; scripts/install.sh does), or use "
            "Place.sandbox(network=False); the host's loopback is never opened to a sandbox"
        )
    if not os.access(TUN, os.R_OK | os.W_OK):
        raise PlaceError(
            f"a sandbox with network on needs {TUN} (slirp4netns opens it inside the "
            f"sandbox), and this user (uid {os.getuid()}) may not open it: {_mode(TUN)}. A "
            f"stock Debian has it 0666; as root: chmod 0666 {TUN} (or run the runtime as "
            "root), or use Place.sandbox(network=False)"
        )
    return [path for path in found.values() if path]


def _mode(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError as exc:
        return f"it is missing ({exc.strerror}): load the tun module (modprobe tun)"
    return f"mode {stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}"


def network_argv(bwrap: Sequence[str]) -> list[str]:
    """`bwrap` (a bubblewrap command line, `-- COMMAND` at its end) with egress in its
    network namespace: the spawned pid still becomes bwrap's (egress_helper.py)."""
    return [sys.executable, "-I", "-S", HELPER, *programs(), *resolver(), "--", *bwrap]


def resolver() -> list[str]:
    """[path, text] of the resolver file a network-on sandbox sees instead of the host's,
    or [] to see the host's. A host whose resolver is on its loopback (systemd-resolved's
    127.0.0.53, a local dnsmasq) would send the sandbox to its own, empty loopback: it gets
    slirp4netns's DNS forwarder instead (which asks the host's resolver for it), with the
    host file's other lines (search, options) kept. Bound at the file's real path (it is
    often a symlink into /run)."""
    try:
        lines = Path(RESOLV_CONF).read_text().splitlines()
    except OSError:
        return []
    servers = [ln.split()[1] for ln in lines if ln.split()[:1] == ["nameserver"] and ln.split()[1:]]
    if not any(s.startswith("127.") or s == "::1" for s in servers):
        return []
    kept = [ln for ln in lines if ln.split()[:1] != ["nameserver"]]
    return [os.path.realpath(RESOLV_PATH), "\n".join([f"nameserver {SLIRP_DNS}", *kept]) + "\n"]
