"""Run by path (`python -I -S egress_helper.py ...`), outside the sandbox: start bubblewrap
with user-mode egress in its network namespace. Standard library only (it is not imported
as part of tether, and -S skips site-packages: it starts in a few ms).

    egress_helper.py SLIRP4NETNS NSENTER IP [RESOLV_PATH RESOLV_TEXT] -- BWRAP [options...] -- COMMAND...

The process forks. The parent execs bubblewrap (so the pid its owner spawned is bwrap's,
as without network: its return code and `kill_tree` mean the same), with `--info-fd` and
COMMAND behind a tiny /bin/sh gate. The child, once bwrap says its child's pid (info-fd)
and the gate says the sandbox is set up:

1. opens the sandbox's network namespace and, with the NS_GET_USERNS ioctl, the user
   namespace that owns it. bwrap run by root nests a second user namespace for the uid
   inside, so /proc/PID/ns/user is not the netns's owner: joining it gives no
   CAP_NET_ADMIN over the netns (slirp4netns's "setns(CLONE_NEWNET): Operation not
   permitted"; pasta as root first drops to nobody, who may not enter a root-owned user
   namespace at all: "Couldn't enter user namespace ... Operation not permitted").
2. waits for the gate: bwrap writes info-fd right after its clone, before the user
   namespace's uid map is written, and until then even its owner has no capability in it
   (RTNETLINK "Operation not permitted", measured in 2 of 5 starts). The gate runs only
   once bwrap's setup is done, so it is the event that says the maps are there.
3. makes 169.254.0.0/16 (the metadata address, link-local) unreachable inside the
   namespace (nothing inside can change a route: no capabilities);
4. execs slirp4netns (`--disable-host-loopback`: its gateway never leads to the host's
   127.0.0.1) with its ready-fd the gate's go pipe, so COMMAND starts only with egress up,
   and its exit-fd a pipe every sandbox process holds: it ends with the sandbox.

RESOLV_PATH RESOLV_TEXT: the resolver file to show inside instead of the host's (given
when the host's resolver is on its loopback: `tether.places.egress.resolver`).

If any step fails, the child says why on stderr and exits, the go pipe closes without its
byte, and the gate ends the sandbox with status 125 and a message, before COMMAND ran.
slirp4netns's own output goes to /dev/null (COMMAND's stdout may be a protocol stream).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys

NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1), linux/nsfs.h
METADATA = "169.254.0.0/16"
GATE_FAILED = 125
GATE = (
    "printf 1 >&{here}; exec {here}>&-; read -r ok <&{go}; exec {go}<&-; "
    '[ "$ok" = 1 ] || {{ echo "tether: the sandbox network could not be set up '
    '(run slirp4netns by hand to see why); nothing was run" >&2; exit {failed}; }}; exec "$@"'
)


def main(argv: list[str]) -> None:
    head = argv.index("--") if "--" in argv else -1
    if head not in (3, 5) or "--" not in argv[head + 2 :]:
        sys.exit(
            "usage: egress_helper.py SLIRP4NETNS NSENTER IP [RESOLV_PATH RESOLV_TEXT] -- "
            "BWRAP [options] -- CMD..."
        )
    slirp, nsenter, ip = argv[:3]
    bwrap = argv[head + 1 :]
    resolv = _resolv_args(*argv[3:head]) if head == 5 else []
    info_r, info_w = os.pipe()
    here_r, here_w = os.pipe()
    go_r, go_w = os.pipe()
    exit_r, exit_w = os.pipe()
    if os.fork() == 0:
        for fd in (info_w, here_w, go_r, exit_w):
            os.close(fd)
        _setup(info_r, here_r, slirp, nsenter, ip, go_w, exit_r)
        return
    for fd in (info_r, here_r, go_w, exit_r):
        os.close(fd)
    for fd in (info_w, here_w, go_r, exit_w):
        os.set_inheritable(fd, True)
    split = bwrap.index("--")
    gate = ["/bin/sh", "-c", GATE.format(here=here_w, go=go_r, failed=GATE_FAILED), "tether-net"]
    os.execv(
        bwrap[0],
        [
            bwrap[0],
            "--info-fd",
            str(info_w),
            *bwrap[1:split],
            *resolv,
            "--",
            *gate,
            *bwrap[split + 1 :],
        ],
    )


def _resolv_args(path: str, text: str) -> list[str]:
    """bwrap options that put `text` at `path` inside (read-only): the resolver file, when
    the host's names a resolver on its loopback, which inside is the sandbox's own."""
    data_r, data_w = os.pipe()
    os.write(data_w, text.encode())  # (a few lines: well within a pipe's buffer)
    os.close(data_w)
    os.set_inheritable(data_r, True)
    return ["--ro-bind-data", str(data_r), path]


def _setup(
    info_r: int, here_r: int, slirp: str, nsenter: str, ip: str, go_w: int, exit_r: int
) -> None:
    try:
        pid = _child_pid(info_r)
        netns = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        owner = fcntl.ioctl(netns, NS_GET_USERNS)
        if os.read(here_r, 1) != b"1":
            os._exit(1)  # (bwrap failed before the gate: it says why itself)
        fds = (netns, owner)
        enter = [nsenter, f"--user=/proc/self/fd/{owner}", f"--net=/proc/self/fd/{netns}"]
        route = [
            *enter,
            "--preserve-credentials",
            "--",
            ip,
            "route",
            "add",
            "unreachable",
            METADATA,
        ]
        done = subprocess.run(route, pass_fds=fds, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            _fail(f"could not make {METADATA} unreachable inside: {done.stderr.strip()}")
        for fd in (*fds, go_w, exit_r):
            os.set_inheritable(fd, True)
        # its talk (banner, seccomp notes, "exitfd event") would land in the sandboxed
        # program's own output: a language server's stdout is its LSP stream
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        os.execv(
            slirp,
            [
                slirp,
                "--configure",
                "--disable-host-loopback",
                "--enable-seccomp",
                f"--ready-fd={go_w}",
                f"--exit-fd={exit_r}",
                f"--userns-path=/proc/self/fd/{owner}",
                "--netns-type=path",
                f"/proc/self/fd/{netns}",
                "tap0",
            ],
        )
    except (OSError, ValueError) as exc:
        _fail(str(exc))


def _child_pid(info_r: int) -> int:
    """bwrap's child pid from its info-fd JSON (read until it parses: the sandbox keeps the
    pipe open, so there is no end of file to wait for)."""
    data = b""
    while chunk := os.read(info_r, 4096):
        data += chunk
        try:
            return int(json.loads(data)["child-pid"])
        except ValueError:
            continue
    raise ValueError("bubblewrap ended before it said its child's pid")


def _fail(reason: str) -> None:
    print(f"tether: sandbox network: {reason}", file=sys.stderr, flush=True)
    os._exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
