"""Keep thespian on loopback: the one place where tether patches thespian (4.0.1).

Thespian's TCP transport pickles what it receives and, for every "external" address
(the admin's, every actor's, and the host's own endpoint), binds the listening socket to
`('', port)`, i.e. all interfaces: anyone who reaches the port could make it unpickle
arbitrary objects, which is running code. `THESPIAN_BASE_IPADDR` does not help: it only
sets the address that is advertised (and spares the probe of a public address).

Where it happens: `thespian/system/transport/IPBase.py`, `IPActorAddress.__init__` ends
with `self.bindname = ('', sa[1]) if external else sa`, and `TCPTransport` binds
`addressDetails.bindArgs` (`(self.bindname,)`). We wrap `__init__` so that a bind name of
`''` or `'0.0.0.0'` becomes `127.0.0.1`, and set `THESPIAN_BASE_IPADDR=127.0.0.1` so the
advertised address is loopback too. Thespian forks its admin and actor processes from
the process that starts the system, so they inherit the patch; `apply()` must therefore
run before `ActorSystem(...)` — `tether.runtime` calls it at import time.

tests/runtime/test_loopback.py proves it by listing the listening sockets of every
process of a running runtime (psutil).
"""

from __future__ import annotations

import os

LOOPBACK = "127.0.0.1"
_applied = False


def apply() -> None:
    """Idempotent. Patch thespian so every socket it listens on is bound to loopback."""
    global _applied
    if _applied:
        return
    os.environ["THESPIAN_BASE_IPADDR"] = LOOPBACK
    from thespian.system.transport import IPBase

    original_init = IPBase.IPActorAddress.__init__

    def loopback_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original_init(self, *args, **kwargs)
        if self.bindname and self.bindname[0] in ("", "0.0.0.0"):
            self.bindname = (LOOPBACK, self.bindname[1])

    loopback_init.__wrapped__ = original_init  # type: ignore[attr-defined]
    IPBase.IPActorAddress.__init__ = loopback_init
    _applied = True
