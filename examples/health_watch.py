"""Watch a runtime's health tree while it works: a few conversations, calls in the
background, one resource killed half-way. Prints the tree (as `tether status` draws it)
every second.

    python examples/health_watch.py [seconds]

To watch a runtime in another process instead: `tether status --port N`.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tether.health_view import render_tree  # noqa: E402
from tether.messages.calls import ResourceError  # noqa: E402
from tether.runtime import Runtime, load_kinds  # noqa: E402


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    with Runtime.start(kinds=load_kinds(["tether.actors.echo"])) as rt:
        stop = threading.Event()

        def traffic(run_id: str) -> None:
            while not stop.is_set():
                for kind in ("echo", "echo_process", "echo_run"):
                    try:
                        rt.call(run_id, kind, "k", "echo", {"run": run_id}, 2.0)
                    except ResourceError:
                        pass  # a restart in progress: the tree shows it
                time.sleep(0.01)

        workers = [threading.Thread(target=traffic, args=(f"conv-{i}",)) for i in range(3)]
        for worker in workers:
            worker.start()
        start = time.monotonic()
        killed = False
        while time.monotonic() - start < seconds:
            time.sleep(1.0)
            if not killed and time.monotonic() - start > seconds / 2:
                rt.inject("kill_process", target="echo_process:k")
                killed = True
                print("(injected kill_process into echo_process:k)")
            print(f"\n--- t = {time.monotonic() - start:.1f} s, admin port {rt.admin_port}")
            print(render_tree(rt.health()))
        stop.set()
        for worker in workers:
            worker.join(5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
