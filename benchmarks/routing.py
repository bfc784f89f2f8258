"""Routing overhead: tether calls against one raw thespian ask to a bare echo actor, in the
same actor system, same run of this script.

    python benchmarks/routing.py [--calls 3000] [--warmup 300]

Four paths, measured interleaved in blocks of 100 so that changes in machine load hit
them alike:
  raw     host -> bare echo actor -> host              (the anchor: tell + listen)
  floor   host -> bare forwarder -> bare echo -> host  (any three-hop route, no tether code)
  tether  rt.call(...) to the SHARED "echo" actor: host -> actor -> host once the host
          knows its address (tether.host.routes), on its call channel (tether.channels)
  run     rt.call(...) to a RUN-scoped echo actor: the same two hops once the host knows
          it (its first call went host -> root -> runs -> RunActor -> actor)
Prints p50 / p99 and the ratios. Targets (issue #11): run p50 <= 0.3 ms and <= 1x raw;
shared p50 <= 0.2 ms.

Then fault recovery, a shared kind beside a run kind (a process-owning actor whose actor
process is SIGKILLed while a call waits on it): the time until a plain call hears
`resource_died`, and until an idempotent call is answered by its retry on a new actor.

Then, for a server that takes a while to answer (0, 5 and 25 ms), the time a call
through tether's process-owning actor adds over a raw client writing to the same kind of
subprocess through a pipe. Every process of a route that sleeps through the wait must be
woken when the answer comes, and runs cold: tether's route has two (the actor, then the
host) where the raw client has one. (Before call channels, the thespian hop back to the
host cost ~0.55 ms after a 25 ms wait, against ~0.15 ms on the channel.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tether.actors.echo import ECHO_SCRIPT, RawEchoActor, RawForwardActor  # noqa: E402
from tether.kinds import ChildSpec, KindSpec, Restart, Scope  # noqa: E402
from tether.messages.calls import ResourceError  # noqa: E402
from tether.messages.echo_ops import Hang, HangOnce, Pid  # noqa: E402
from tether.runtime import Runtime, load_kinds  # noqa: E402

ECHO_IN_RUN = KindSpec(
    "echo_in_run", "tether.actors.echo:EchoActor", Scope.RUN, ChildSpec(Restart.TRANSIENT)
)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--slow-calls", type=int, default=100, help="per delay, per side")
    parser.add_argument("--faults", type=int, default=10, help="kills per recovery case")
    args = parser.parse_args()

    with Runtime.start(kinds=[*load_kinds(["tether.actors.echo"]), ECHO_IN_RUN]) as rt:
        echo = rt._asys.createActor(RawEchoActor)
        forward = rt._asys.createActor(RawForwardActor)
        ctx = rt.engine.contexts.get()  # the context rt.call uses from this thread
        assert ctx.ask(forward, ("target", echo), 5.0) == b"ok"
        payload = b"x" * 64

        def raw() -> None:
            ctx.tell(echo, payload)  # tell + listen: what rt.call does, minus routing
            assert ctx.listen(5.0) == payload

        def floor() -> None:
            ctx.tell(forward, payload)
            assert ctx.listen(5.0) == payload

        def routed() -> None:
            rt.call("bench", "echo", "k", "echo", {"x": "x" * 48}, 5.0)

        def in_run() -> None:
            rt.call("bench", "echo_in_run", "k", "echo", {"x": "x" * 48}, 5.0)

        paths = {"raw": raw, "floor": floor, "tether": routed, "run": in_run}
        samples: dict[str, list[float]] = {name: [] for name in paths}
        for fn in paths.values():
            for _ in range(args.warmup):
                fn()
        for _ in range(max(args.calls // 100, 1)):
            for name, fn in paths.items():
                for _ in range(100):
                    start = time.perf_counter()
                    fn()
                    samples[name].append((time.perf_counter() - start) * 1000)

    p50 = {name: percentile(v, 0.5) for name, v in samples.items()}
    p99 = {name: percentile(v, 0.99) for name, v in samples.items()}
    load = os.getloadavg()[0]
    print(
        f"calls per path {len(samples['raw'])}, load average {load:.2f} on {os.cpu_count()} cores"
    )
    labels = {
        "raw": "raw thespian tell+listen (2 hops)",
        "floor": "bare 3-hop thespian route",
        "tether": "tether call, shared kind",
        "run": "tether call, run kind",
    }
    for name in paths:
        print(f"{labels[name]:28s} p50 {p50[name]:.3f} ms   p99 {p99[name]:.3f} ms")
    print(
        f"ratio tether/raw    p50 {p50['tether'] / p50['raw']:.2f}x   p99 {p99['tether'] / p99['raw']:.2f}x"
    )
    print(
        f"ratio tether/floor  p50 {p50['tether'] / p50['floor']:.2f}x   p99 {p99['tether'] / p99['floor']:.2f}x"
    )
    print(
        f"ratio run/raw       p50 {p50['run'] / p50['raw']:.2f}x   p99 {p99['run'] / p99['raw']:.2f}x"
    )
    ok = p50["run"] <= 0.3 and p50["run"] <= p50["raw"] and p50["tether"] <= 0.2
    print(
        f"target (run p50 <= 0.3 ms and <= 1x raw, shared p50 <= 0.2 ms): "
        f"{'met' if ok else 'NOT met'}"
    )
    recovery(args.faults)
    slow_server(load_kinds(["tether.actors.echo"]), args.slow_calls)
    return 0


def recovery(faults: int) -> None:
    """Time from SIGKILL of the actor process holding a call to its outcome, per scope."""
    from tests.conftest import in_flight
    from tests.runtime.actors import marker

    print(f"fault recovery ({faults} kills per case), p50 / max:")
    scratch = tempfile.mkdtemp(prefix="tether-routing-")  # (HangOnce's markers)
    for scope in (Scope.SHARED, Scope.RUN):
        spec = KindSpec(
            "slow",
            "tests.runtime.actors:SlowProcessActor",
            scope,
            # a short fixed backoff: this measures the mechanism, not the restart policy
            ChildSpec(Restart.PERMANENT, backoff_initial=0.01, backoff_max=0.01, max_restarts=1000),
        )
        name = "run:bench/slow:k" if scope is Scope.RUN else "slow:k"
        with Runtime.start(kinds=[spec]) as rt:
            for idempotent in (False, True):
                took = []
                for _ in range(faults):
                    rt.call("bench", "slow", "k", Pid(idempotent=True), None, 10.0)
                    op = HangOnce(**marker(scratch), idempotent=True) if idempotent else Hang()
                    result: list = []
                    worker = threading.Thread(target=_outcome, args=(rt, op, result))
                    worker.start()
                    in_flight(rt, name, timeout=5.0)
                    start = time.perf_counter()
                    rt.inject("crash_actor", target=name)
                    worker.join(10)
                    took.append((result[0][1] - start) * 1000)
                    expected = "answer" if idempotent else "resource_died"
                    assert result[0][0] == expected, result
                what = "retried answer" if idempotent else "resource_died"
                print(
                    f"  {scope.value:6s} {what:15s} p50 {statistics.median(took):7.1f} ms"
                    f"   max {max(took):7.1f} ms"
                )
    shutil.rmtree(scratch, ignore_errors=True)


def _outcome(rt: Runtime, op: HangOnce | Hang, out: list) -> None:
    try:
        rt.call("bench", "slow", "k", op, None, 10.0)
        out.append(("answer", time.perf_counter()))
    except ResourceError as exc:
        out.append((exc.code, time.perf_counter()))


def slow_server(kinds: list[KindSpec], calls: int) -> None:
    """Added time of a call whose subprocess answers after a delay: tether vs raw pipe."""
    raw = subprocess.Popen(
        [sys.executable, "-u", "-c", ECHO_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert raw.stdin and raw.stdout
    print("slow server: time added over the delay, p50")
    try:
        with Runtime.start(kinds=kinds) as rt:
            rt.call("bench", "echo_process", "k", "echo", {}, 10.0)
            for delay in (0.0, 0.005, 0.025):
                raws, teths = [], []
                for _ in range(calls):
                    t0 = time.perf_counter()
                    raw.stdin.write((json.dumps({"delay": delay}) + "\n").encode())
                    raw.stdin.flush()
                    raw.stdout.readline()
                    t1 = time.perf_counter()
                    rt.call("bench", "echo_process", "k", "echo", {"delay": delay}, 5.0)
                    t2 = time.perf_counter()
                    raws.append((t1 - t0 - delay) * 1e3)
                    teths.append((t2 - t1 - delay) * 1e3)
                r50, t50 = statistics.median(raws), statistics.median(teths)
                print(
                    f"  delay {delay * 1e3:4.0f} ms   raw pipe +{r50:.3f} ms   "
                    f"tether echo_process +{t50:.3f} ms   tether adds {t50 - r50:.3f} ms"
                )
    finally:
        raw.kill()


if __name__ == "__main__":
    raise SystemExit(main())
