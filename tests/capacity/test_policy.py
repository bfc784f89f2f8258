"""The governor's decision table (tether.capacity.policy): one line per case; and its
admission of spares, on a tree given as data."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from tests.conftest import wait_until
from tether.capacity.governor import IDLE_PERIOD, SAMPLE_PERIOD, Governor, _Reservation
from tether.capacity.measure import Budget
from tether.capacity.policy import Settings, candidates, decide
from tether.capacity.usage import MIB, UsageRecord
from tether.messages.calls import ErrorCode, ResourceError

NOW = 10_000.0


def rec(name, mib, idle, state=False, busy=False, spare=False, evictable=True):
    kind = name.split("/")[-1].split(":")[0]
    return UsageRecord(name, kind, mib * MIB, NOW - idle, state, busy, spare, evictable)


POOL = rec("kernel_pool:python", 90, 100, spare=True)
LS_OLD = rec("language_server:py:/a", 200, 600)
LS_NEW = rec("language_server:ts:/a", 190, 60)
LS_JUST = rec("language_server:go:/a", 150, 0.1)  # answered a moment ago
LS_BUSY = rec("language_server:c:/a", 300, 900, busy=True)
KERNEL_IDLE = rec("run:c1/kernel:python", 100, 3600, state=True)
KERNEL_FRESH = rec("run:c2/kernel:python", 100, 30, state=True)
DEBUG = rec("run:c3/debug_session:s", 80, 7200, state=True)
VIBE = rec("run:c1/vibe_worker:w1", 60, 9000, evictable=False)
ROOT = rec("root", 10, 9000, evictable=False)
ALL = [ROOT, VIBE, DEBUG, KERNEL_FRESH, KERNEL_IDLE, LS_BUSY, LS_JUST, LS_NEW, LS_OLD, POOL]
DEFAULT = Settings()
OPT_IN = Settings(evict_idle_kernels_after=1800)


@pytest.mark.parametrize(
    ("need_mib", "settings", "stops", "enough"),
    [
        (0, DEFAULT, [], True),  # nothing needed: nothing stopped
        (50, DEFAULT, [POOL], True),  # spares first
        (90, DEFAULT, [POOL], True),
        (91, DEFAULT, [POOL, LS_OLD], True),  # then idle servers, least recently used first
        (400, DEFAULT, [POOL, LS_OLD, LS_NEW], True),
        (481, DEFAULT, [], False),  # state may not go by default: refuse, stop nothing
        (481, OPT_IN, [POOL, LS_OLD, LS_NEW, DEBUG], True),  # opted in: idle >= 30 min, LRU
        (570, OPT_IN, [POOL, LS_OLD, LS_NEW, DEBUG, KERNEL_IDLE], True),
        (700, OPT_IN, [], False),  # the fresh kernel, busy server, vibe worker, root stay
    ],
)
def test_decide(need_mib, settings, stops, enough):
    plan = decide(ALL, need_mib * MIB, NOW, settings)
    assert (list(plan.stop), plan.enough) == (stops, enough)
    assert plan.freed == sum(r.bytes for r in stops)


def test_partial_stops_all_it_may_when_over_budget():
    plan = decide(ALL, 10_000 * MIB, NOW, DEFAULT, partial=True)
    assert (list(plan.stop), plan.enough) == ([POOL, LS_OLD, LS_NEW], False)


def test_never_busy_never_unevictable_never_just_used_never_protected():
    names = {r.name for r in candidates(ALL, NOW, OPT_IN, protect={LS_NEW.name})}
    assert names == {POOL.name, LS_OLD.name, DEBUG.name, KERNEL_IDLE.name}


@pytest.mark.parametrize("after", [-1, "30", True])
def test_a_bad_opt_in_is_named(after):
    with pytest.raises(ValueError, match=f"evict_idle_kernels_after must be .* got {after!r}"):
        Settings(evict_idle_kernels_after=after)


# --- a starting spare never costs a conversation's own call its room (the governor's
# admission, on a tree given as data: what cd8cf0b's cold-start flake was) ------------
def squeezed_governor(
    server_mib: int, free_mib: int, busy: bool = False
) -> tuple[Governor, list[str]]:
    """A governor whose tree holds one language server of `server_mib` (idle, or inside a
    call), with `free_mib` of the budget left; the list gets the names it asks to evict."""
    server = UsageRecord(
        "language_server:basedpyright:/p", "language_server", server_mib * MIB, 0.0, False, busy
    ).to_wire()
    tree = {"name": "root", "children": [{"name": server["name"], "usage": server}]}
    evicted: list[str] = []

    def evict(name: str, why: str) -> bool:
        evicted.append(name)
        return True

    budget = Budget((server_mib + free_mib) * MIB, "test")
    gov = Governor(budget, None, Settings(), lambda t: tree, list, evict)
    gov.sample()
    return gov, evicted


@pytest.mark.parametrize("server_mib", [150, 188, 250])
def test_a_spare_never_stops_anything_and_the_first_cell_gets_the_room(server_mib):
    # the first cell asks the pool for a spare, then starts its kernel (tools/eval.py):
    # the pool used to stop the idle server for its 90 MiB and keep the room, so a server
    # under 189 MiB left the kernel 'nothing may be stopped'
    gov, evicted = squeezed_governor(server_mib, free_mib=1)
    with pytest.raises(ResourceError) as refused:
        gov.admit_resource("kernel_pool:python", "kernel_pool")
    assert refused.value.code == ErrorCode.CAPACITY and "starts only into free room" in str(
        refused.value
    )
    assert evicted == [] and gov.refusals == 0
    gov.admit_resource("run:c1/kernel:python", "kernel")
    assert evicted == ["language_server:basedpyright:/p"]


def test_a_conversation_takes_back_the_room_of_a_spare_still_starting():
    gov, evicted = squeezed_governor(100, free_mib=100, busy=True)  # (nothing else may go)
    gov.admit_resource("kernel_pool:python", "kernel_pool")  # 90 MiB of free room
    gov.admit_resource("run:c1/kernel:python", "kernel")
    assert evicted == ["kernel_pool:python"]
    assert gov.evictions == {"kernel_pool": 1} and gov.refusals == 0
    assert set(gov._reserved) == {"run:c1/kernel:python"}


def test_what_was_reserved_for_a_resource_goes_with_it_when_it_is_evicted():
    # the server started < RESERVE_TTL ago: its reservation (200 MiB expected, 150 seen)
    # still holds 50; once it is stopped to make room, nothing is held for it any more
    gov, evicted = squeezed_governor(150, free_mib=51)
    gov._reserved["language_server:basedpyright:/p"] = _Reservation(
        "language_server", 200 * MIB, time.monotonic() + 30
    )
    assert gov.summary()["reserved"] == 50 * MIB
    gov.admit_resource("run:c1/kernel:python", "kernel")  # 1 MiB free: the server goes
    assert evicted == ["language_server:basedpyright:/p"]
    assert gov.summary()["reserved"] == 100 * MIB  # the kernel's only
    gov._health(1.0)["children"].clear()  # the next sample: the server is gone
    gov.sample()
    assert gov.summary()["reserved"] == 100 * MIB  # (not its 200 MiB again, till its TTL)


# --- an evicted resource while the tree still lists it, and after: a successor under its
# name, or an actor that keeps its name (the kernel pool), is evictable again -----------
class Tree:
    """A tree given as data: health nodes of (record, state), and the names evicted."""

    def __init__(self, budget_mib: int) -> None:
        self.nodes: list[tuple[UsageRecord, str]] = []
        self.evicted: list[str] = []
        self.gov = Governor(
            Budget(budget_mib * MIB, "test"),
            None,
            Settings(min_idle=0.0),
            self.health,
            list,
            self.evict,
        )

    def health(self, timeout: float) -> dict:
        children = [{"name": r.name, "state": s, "usage": r.to_wire()} for r, s in self.nodes]
        return {"name": "root", "children": children}

    def evict(self, name: str, why: str) -> bool:
        self.evicted.append(name)
        return True

    def show(self, *nodes: tuple[UsageRecord, str], budget_mib: int | None = None) -> None:
        self.nodes = list(nodes)
        if budget_mib is not None:
            self.gov.budget = Budget(budget_mib * MIB, "test")
        self.gov.sample()


def live(name: str, mib: int, state: str = "ready", **traits) -> tuple[UsageRecord, str]:
    kind = name.split("/", 1)[1] if "/" in name and name.startswith("run:") else name
    kind = kind.split(":")[0]
    return UsageRecord(name, kind, mib * MIB, time.monotonic() - 60, **traits), state


def test_a_resource_started_again_under_an_evicted_name_is_evictable_once_sampled():
    server = "language_server:basedpyright:/p"
    kernel = live("run:c1/kernel:python", 100, holds_state=True, busy=False)
    tree = Tree(budget_mib=151)
    tree.show(live(server, 150, holds_state=False, busy=False))
    tree.gov.admit_resource("run:c1/kernel:python", "kernel")  # 1 MiB free: the server goes
    assert tree.evicted == [server]
    # still listed while its actor exits (its supervisor's record: busy, not evictable)
    stopping = live(server, 30, "stopping", holds_state=False, busy=True, evictable=False)
    tree.show(stopping, kernel, budget_mib=1000)
    assert tree.gov.summary()["used"] == 100 * MIB  # (its 30 MiB are on their way out)
    tree.gov.admit_resource(server, "language_server")  # a call starts it again, meanwhile
    assert tree.gov.summary()["used"] == 130 * MIB  # they count again: its successor's name
    # the successor runs, idle, and the budget is squeezed: it is the one that may go
    tree.show(live(server, 150, holds_state=False, busy=False), kernel, budget_mib=251)
    tree.gov.admit_resource("run:c2/kernel:python", "kernel")
    assert tree.evicted == [server, server] and tree.gov.refusals == 0


def test_an_evicted_pool_that_keeps_its_name_counts_and_may_go_again():
    pool = "kernel_pool:python"
    tree = Tree(budget_mib=101)
    tree.show(live(pool, 100, holds_state=False, busy=False, spare=True))
    tree.gov.admit_resource("run:c1/kernel:python", "kernel")  # the spares go
    assert tree.evicted == [pool]
    kernel = live("run:c1/kernel:python", 100, holds_state=True, busy=False)
    # the pool lives on under its name with its spares discarded, then refills
    tree.show(live(pool, 10, holds_state=False, busy=False, spare=True), kernel, budget_mib=1000)
    assert tree.gov.summary()["used"] == 110 * MIB
    tree.show(live(pool, 100, holds_state=False, busy=False, spare=True), kernel, budget_mib=201)
    assert tree.gov.summary()["used"] == 200 * MIB
    tree.gov.admit_resource("run:c2/kernel:python", "kernel")
    assert tree.evicted == [pool, pool] and tree.gov.refusals == 0


def test_a_tree_well_inside_its_budget_is_sampled_seldom_and_one_near_it_often():
    tree = Tree(budget_mib=1000)
    tree.show(live("language_server:basedpyright:/p", 700, holds_state=False, busy=False))
    assert tree.gov.period() == IDLE_PERIOD  # 70 %, nothing starting or stopping
    tree.show(live("language_server:basedpyright:/p", 760, holds_state=False, busy=False))
    assert tree.gov.period() == SAMPLE_PERIOD  # over 75 %
    tree.show(live("language_server:basedpyright:/p", 100, holds_state=False, busy=False))
    assert tree.gov.period() == IDLE_PERIOD
    tree.gov.admit_resource("run:c1/kernel:python", "kernel")  # starting: its growth unseen
    assert tree.gov.period() == SAMPLE_PERIOD
    tree.gov._reserved.clear()  # (its reservation ran out)
    assert tree.gov.period() == IDLE_PERIOD
    tree.show(
        live("language_server:basedpyright:/p", 100, holds_state=False, busy=False), budget_mib=120
    )  # a budget that shrank: the same tree is near it now
    assert tree.gov.period() == SAMPLE_PERIOD


# --- rt.capacity()'s fit counts what admission would free for a newcomer, and no more:
# a host that holds back at fit 0 holds back exactly the conversations it would refuse ---
def one_conversation(servers_busy: bool) -> list[tuple[UsageRecord, str]]:
    """A tree holding one conversation as the issue's workload has it: its run, a kernel,
    a Python and a TypeScript server (510 MiB: what admission reserves for a new one)."""
    return [
        live("run:c1", 10, holds_state=False, busy=False, evictable=False),
        live("run:c1/kernel:python", 100, holds_state=True, busy=False),
        live("language_server:basedpyright:/c1", 200, holds_state=False, busy=servers_busy),
        live("language_server:typescript:/c1", 200, holds_state=False, busy=servers_busy),
    ]


def admit_a_conversation(gov: Governor) -> None:
    """What a new conversation's first calls admit: open_run, a cell, two hovers."""
    gov.admit_resource("run:c2", "run")
    gov.admit_resource("run:c2/kernel:python", "kernel")
    gov.admit_resource("language_server:basedpyright:/c2", "language_server")
    gov.admit_resource("language_server:typescript:/c2", "language_server")


@pytest.mark.parametrize(
    ("servers_busy", "spare", "fit", "evicted"),
    [
        # idle servers are room: 300 MiB free + 400 evictable hold one more of 510
        (False, False, 1, ["language_server:basedpyright:/c1", "language_server:typescript:/c1"]),
        # servers inside a call are not, nor is the kernel (state): refused, stopping nothing
        (True, False, 0, None),
        # a spare still starting is room too: a conversation's call takes it back
        (True, True, 1, ["kernel_pool:python"]),
    ],
)
def test_fit_says_what_admission_does(servers_busy, spare, fit, evicted):
    tree = Tree(budget_mib=1020 if spare else 810)
    tree.show(*one_conversation(servers_busy))
    if spare:  # 90 MiB of the free room, 420 left: a conversation fits only with it
        tree.gov.admit_resource("kernel_pool:python", "kernel_pool")
    cap = tree.gov.summary()
    assert cap["average_conversation"] == 510 * MIB
    assert cap["free"] == (420 if spare else 300) * MIB and cap["fit"] == fit
    if fit:
        admit_a_conversation(tree.gov)
        assert tree.evicted == evicted and tree.gov.refusals == 0
    else:
        with pytest.raises(ResourceError) as refused:
            admit_a_conversation(tree.gov)
        assert refused.value.code == ErrorCode.CAPACITY and tree.evicted == []


# --- what stopping a resource frees: its bytes and what is still reserved for its start
# (admission holds a new resource's expected size until a sample shows it holding it;
# both go with it). The policy counted the bytes only: admission refused a start that one
# eviction made room for, and pressure stopped more than it had to ---------------------
SERVER = "language_server:basedpyright:/p"


def test_a_stop_frees_what_is_still_reserved_for_the_resource_too():
    young = rec("language_server:py:/b", 150, 60)  # 200 expected: 50 MiB still reserved
    reserved = {young.name: 50 * MIB, "language_server:ts:/b": 200 * MIB}  # (not a record)
    plan = decide([young, LS_OLD], 200 * MIB, NOW, DEFAULT, reserved=reserved)
    assert (list(plan.stop), plan.freed, plan.enough) == ([LS_OLD], 200 * MIB, True)
    plan = decide([young], 200 * MIB, NOW, DEFAULT, reserved=reserved)
    assert (list(plan.stop), plan.freed, plan.enough) == ([young], 200 * MIB, True)
    assert decide([young], 201 * MIB, NOW, DEFAULT, reserved=reserved).enough is False
    assert decide([young], 200 * MIB, NOW, DEFAULT).enough is False  # (what it was)


def young_server(tree: Tree, mib: int, idle: float) -> tuple[UsageRecord, str]:
    """An idle server of `mib` seen, started < RESERVE_TTL ago: 200 MiB reserved for it."""
    tree.gov._reserved[SERVER] = _Reservation("language_server", 200 * MIB, time.monotonic() + 30)
    record = UsageRecord(
        SERVER, "language_server", mib * MIB, time.monotonic() - idle, False, False
    )
    return record, "ready"


def test_admission_counts_what_an_eviction_releases_of_a_reservation():
    # 150 MiB seen, 50 still reserved, 1 free: a second server (200) fits in the first
    # one's place (150 + 50 + 1 >= 200); it used to be refused (150 + 1 < 200)
    tree = Tree(budget_mib=201)
    tree.show(young_server(tree, 150, idle=60))
    assert tree.gov.summary()["evictable"] == 200 * MIB  # (fit counts it as admission does)
    tree.gov.admit_resource("language_server:typescript:/p", "language_server")
    assert tree.evicted == [SERVER] and tree.gov.refusals == 0
    assert set(tree.gov._reserved) == {"language_server:typescript:/p"}


def test_pressure_stops_no_more_than_the_stops_free_with_their_reservations():
    # over the budget by 184 MiB at LOW_WATER: the least recently used server frees 150 +
    # its 50 reserved, enough; the other one (100) used to be stopped as well
    tree = Tree(budget_mib=1000)
    other = UsageRecord("language_server:ts:/p", "language_server", 100 * MIB, 0.0, False, False)
    other = dataclasses.replace(other, last_use=time.monotonic() - 30)
    server = young_server(tree, 150, idle=60)
    kernel = live("run:c1/kernel:python", 100, holds_state=True, busy=False)
    tree.show(server, (other, "ready"), kernel)
    assert tree.evicted == []
    tree.show(server, (other, "ready"), kernel, budget_mib=240)  # held 400, 0.9 x 240 = 216
    assert tree.evicted == [SERVER]


def test_a_refused_eviction_holds_the_reservation_again():
    # the server took a call between the plan and its stop: it runs on and grows to what
    # was reserved for it, so its reservation counts again (it was released with the plan)
    tree = Tree(budget_mib=201)
    tree.show(young_server(tree, 150, idle=60))
    tree.gov._evict = lambda name, why: False
    tree.gov.admit_resource("run:c1/kernel:python", "kernel")
    assert tree.gov.summary()["reserved"] == (50 + 100) * MIB and tree.gov._stopping == {}


@pytest.mark.parametrize("answer", ["none", "no"])
@pytest.mark.parametrize(
    ("then", "stopped"),
    [
        ("stopping", True),  # its reply was lost as its process exited (issue 23)
        ("gone", True),  # ... and it is gone already
        ("ready", False),  # it never got the word: it runs on, as a refused one does
        ("no health", False),  # nothing known: counted as kept, and said
    ],
)
def test_an_eviction_without_a_yes_is_judged_by_health(answer, then, stopped):
    # the server's answer never came, or a "no" came from its supervisor, which sees it
    # stopping or gone already: the governor asks health whether it is leaving instead of
    # reading either as a refusal (which held its 50 MiB reservation for 30 s)
    tree = Tree(budget_mib=201)
    server = young_server(tree, 150, idle=60)
    tree.show(server)

    def no_health(timeout: float) -> dict:
        raise ResourceError(ErrorCode.DEADLINE, "the tree did not report its health")

    def no_answer(name: str, why: str) -> bool:
        tree.evicted.append(name)
        if then == "no health":
            tree.gov._health = no_health
        tree.nodes = [] if then == "gone" else [(server[0], then)]
        if answer == "no":
            return False
        raise ResourceError(
            ErrorCode.DEADLINE, f"no answer within 2 s when trying to stop {name!r}"
        )

    tree.gov._evict = no_answer
    tree.gov.admit_resource("run:c1/kernel:python", "kernel")  # 1 MiB free: the server goes
    assert tree.evicted == [SERVER] and tree.gov.refusals == 0
    if stopped:
        assert tree.gov.evictions == {"language_server": 1} and SERVER in tree.gov._stopping
        assert tree.gov.summary()["reserved"] == 100 * MIB  # the kernel's only
    else:
        assert tree.gov.evictions == {} and tree.gov._stopping == {}
        assert tree.gov.summary()["reserved"] == (50 + 100) * MIB  # its own again
    doubt = "did not answer its eviction" if answer == "none" else "refused its eviction"
    assert (doubt in tree.gov.last_error) is (then == "no health")


def test_memory_pressure_returns_once_what_a_sample_in_progress_stops_is_counted():
    # the sampling thread found the tree over budget and is stopping the server (its
    # eviction not answered yet) when memory_pressure shrinks the budget: pressure's own
    # sample finds the server already leaving, and used to return at once, before the
    # stop it caused was counted (test_eviction_stop read evictions {'kernel_pool': 1})
    tree = Tree(budget_mib=1000)
    tree.show(young_server(tree, 150, idle=60))
    answered = threading.Event()

    def slow_evict(name: str, why: str) -> bool:
        answered.wait(10.0)
        tree.evicted.append(name)
        return True

    tree.gov._evict = slow_evict
    tree.gov.budget = Budget(100 * MIB, "test")
    sampling = threading.Thread(target=tree.gov.sample)  # (the sampling thread's turn)
    sampling.start()
    wait_until(lambda: SERVER in tree.gov._stopping, timeout=5.0)
    pressing = threading.Thread(target=tree.gov.pressure, args=(50 * MIB, None))
    pressing.start()
    pressing.join(0.3)
    assert pressing.is_alive()  # it waits for the stop in progress ...
    answered.set()
    pressing.join(10.0)
    assert tree.gov.evictions == {"language_server": 1}  # ... and returns with it counted
    sampling.join(10.0)
