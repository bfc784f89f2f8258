"""vibe workers in a sandbox place: the scripted worker (tests/vibe/worker.py, copied into
the workspace: the sandbox sees nothing else of the checkout) in bubblewrap. An isolated
one works on its own view (a real overlay as root, a real copy), bound by bwrap as the
workspace; its change is staged for the real `resolve`; git is real."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import wait_until
from tests.places.test_places import needs_sandbox
from tests.vibe.test_isolated import UNCOMMITTED, repo, views, wait  # noqa: F401 (a fixture)
from tests.vibe.test_vibe import output, spawn
from tether import worker_views
from tether.actors.parser import KINDS as PARSER_KINDS
from tether.actors.vibe import KINDS
from tether.places import Place
from tether.places.wrap import wrap
from tether.processes import still_running
from tether.tools.vibe_workers import CommandBackend, VibeConfig

pytestmark = needs_sandbox
WORKER = Path(__file__).parent.parent / "vibe" / "worker.py"
# a prefix place entered through bubblewrap: a mount namespace of its own, the same paths
PREFIX = Place.prefix(["bwrap", "--dev-bind", "/", "/", "--"])


def _backends(workspace: Path) -> dict[str, CommandBackend]:
    worker = workspace / "worker.py"
    shutil.copy(WORKER, worker)
    return {"fast": CommandBackend([sys.executable, str(worker)])}


def test_a_sandboxed_worker_runs_in_its_workspace_only(
    runtime_factory: Any, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "secret.txt").write_text("B's secret")
    (a / "mine.txt").write_text("A's own")
    rt = runtime_factory(kinds=KINDS)
    config = VibeConfig(backends=_backends(a))
    run = rt.open_run("v", workdir=a, vibe=True, vibe_config=config, place="sandbox")
    brief = f"cat {b / 'secret.txt'}\ncat {a / 'mine.txt'}\nsh id -u\nwrite out.txt done"
    wid = spawn(run, brief)
    text = wait_until(lambda: (lambda o: o if "exit 0" in o else None)(output(run, wid)), 30)
    assert f"no {b / 'secret.txt'}" in text and "B's secret" not in text, text
    assert "A's own" in text and "1000" in text.split(), text
    assert (a / "out.txt").read_text() == "done\n"
    run.close()


@pytest.mark.parametrize("kind", ["overlay", "copy"])
def test_an_isolated_sandboxed_worker_edits_its_view_until_resolve(
    runtime_factory: Callable[..., Any],
    repo: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
    tether_state_dir: Path,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if kind == "overlay" and worker_views.overlay_mode(tether_state_dir) != "root":
        pytest.skip("the sandbox's overlay view is mounted as root only (else: a copy)")
    if kind == "copy":
        monkeypatch.setattr(worker_views, "overlay_mode", lambda state=None: "")
    other = tmp_path / "b"
    other.mkdir()
    (other / "secret.txt").write_text("B's secret")
    escape, hack = tmp_path / "escape.txt", other / "hack.txt"
    rt = runtime_factory(kinds=[*KINDS, *PARSER_KINDS])
    config = VibeConfig(backends=_backends(repo))
    run = rt.open_run("s", workdir=repo, vibe=True, vibe_config=config, place="sandbox")
    brief = "\n".join(
        [
            f"cat {other / 'secret.txt'}",
            "cat calc.py",
            f"sh id -u; echo o > {escape}; echo o > /escape.txt; echo o > {hack}; "
            f"ls {tether_state_dir}/{worker_views.SUBDIR}",
            "write calc.py def add(a, b):",
            "write pkg/new.py NEW = 1",
            "rm old.py",
        ]
    )
    res = run.call("vibe_spawn", {"brief": brief, "label": "iso"})  # (isolated by default)
    assert not res.is_error and res.data["isolated"], res.text
    done = wait(run, res.data["worker_id"])
    assert run.state["vibe"].get(res.data["worker_id"]).snapshot.view.kind == kind
    out = done.text
    assert f"no {other / 'secret.txt'}" in out and "B's secret" not in out, out
    assert "def sub(a, b):" in out  # the workspace's uncommitted change, seen in the view
    assert "1000" in out.split() and "exit 2" in out, out  # (no views dir to list)
    # what it wrote outside its view stayed in its private /tmp and root: not on the host
    assert not escape.exists() and not Path("/escape.txt").exists() and not hack.exists()
    assert (repo / "calc.py").read_text() == UNCOMMITTED  # the workspace is as it was
    assert (repo / "old.py").exists() and not (repo / "pkg").exists()
    change = done.data["change"]
    assert change["files"] == ["M calc.py (-5)", "D old.py (-1)", "A pkg/new.py (+1)"]
    assert views(tether_state_dir), "the view stays until the change is resolved"
    accepted = run.call("resolve", {"edit_id": change["edit_id"], "action": "accept"})
    assert not accepted.is_error, accepted.text
    assert (repo / "calc.py").read_text() == "def add(a, b):\n"
    assert (repo / "pkg" / "new.py").read_text() == "NEW = 1\n"
    assert not (repo / "old.py").exists()
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)
    assert not (repo.parent / "hook-ran").exists(), "a git hook ran"
    run.close()


@pytest.mark.parametrize("kind", ["overlay", "copy"])
def test_an_isolated_sandboxed_workers_change_is_refused_if_the_workspace_changed(
    runtime_factory: Callable[..., Any],
    repo: Path,  # noqa: F811 (the fixture)
    tether_state_dir: Path,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if kind == "overlay" and worker_views.overlay_mode(tether_state_dir) != "root":
        pytest.skip("the sandbox's overlay view is mounted as root only (else: a copy)")
    if kind == "copy":
        monkeypatch.setattr(worker_views, "overlay_mode", lambda state=None: "")
    rt = runtime_factory(kinds=[*KINDS, *PARSER_KINDS])
    config = VibeConfig(backends=_backends(repo))
    run = rt.open_run("s", workdir=repo, vibe=True, vibe_config=config, place="sandbox")
    worker_id = spawn(run, "write calc.py mine")
    first = wait(run, worker_id).data["change"]["edit_id"]
    (repo / "calc.py").write_text("the agent's\n")  # after its view was made, and staged
    res = run.call("resolve", {"edit_id": first, "action": "accept"})
    assert res.is_error and "calc.py" in res.text, res.text
    # its next run, on the same view: the change is staged again, calc.py a conflict
    run.call("vibe_send", {"worker_id": worker_id, "message": "write o.py x"})
    done = wait(run, worker_id)
    change = done.data["change"]
    assert change["conflicts"] == ["calc.py"], done.text
    assert change["files"][1:] == ["A o.py (+1)"], done.text
    res = run.call("resolve", {"edit_id": change["edit_id"], "action": "accept"})
    assert res.is_error and "calc.py" in res.text and "Nothing was written" in res.text
    assert (repo / "calc.py").read_text() == "the agent's\n" and not (repo / "o.py").exists()
    run.close()
    assert wait_until(lambda: not views(tether_state_dir), timeout=10)


@pytest.mark.parametrize(("mode", "kind"), [("root", "overlay"), ("userns", "copy"), ("", "copy")])
def test_a_sandboxed_view_is_the_root_overlay_or_a_copy(
    mode: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_views, "overlay_mode", lambda state=None: mode)
    assert worker_views.choose_kind(str(tmp_path), sandboxed=True) == kind


def test_an_isolated_worker_in_a_prefix_place_is_refused_with_why(
    runtime_factory: Callable[..., Any],
    repo: Path,  # noqa: F811
) -> None:
    rt = runtime_factory(kinds=[*KINDS, *PARSER_KINDS])
    config = VibeConfig(backends=_backends(repo))
    run = rt.open_run("p", workdir=repo, vibe=True, vibe_config=config, place=PREFIX)
    try:
        res = run.call("vibe_spawn", {"brief": "echo hi", "label": "p", "isolated": True})
        assert res.is_error and "cannot run in a prefix place" in res.text, res.text
        assert "isolated false" in res.text and "place='sandbox'" in res.text
        res = run.call("vibe_spawn", {"brief": "echo hi", "label": "p"})  # default: not
        assert not res.is_error and res.data["isolated"] is False, res.text
        wait(run, res.data["worker_id"])
    finally:
        run.close()


HOST = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from tether.actors.parser import KINDS as P
    from tether.actors.vibe import KINDS as V
    from tether.runtime import Runtime
    from tether.tools.vibe_workers import CommandBackend, VibeConfig
    rt = Runtime.start(kinds=[*V, *P], state_dir={state!r})
    config = VibeConfig(backends={{"fast": CommandBackend([sys.executable, {worker!r}])}})
    run = rt.open_run("k", workdir={work!r}, vibe=True, vibe_config=config, place="sandbox")
    res = run.call("vibe_spawn", {{"brief": "write mine.txt x\\necho up\\nsleep 307.75",
        "label": "k", "isolated": True}})
    assert not res.is_error, res.text
    wid = res.data["worker_id"]
    while "up" not in str(run.state["vibe"].refresh()[0].snapshot.output):
        run.call("vibe_wait", {{"worker_id": wid, "timeout_seconds": 0.2}})
    print("up", flush=True)
    sys.stdin.read()
    """
)


def _ours(work: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "307.75" in cmd or (str(work) in cmd and "bwrap" in cmd):
            if still_running(proc):
                found.append(proc)
    return found


def test_kill_9_of_the_host_leaves_no_isolated_sandboxed_worker(
    repo: Path,  # noqa: F811
) -> None:
    state = Path(tempfile.mkdtemp(prefix="tv-"))
    shutil.copy(WORKER, repo / "worker.py")
    script = HOST.format(
        repo=str(Path(__file__).parents[2]),
        state=str(state),
        work=str(repo),
        worker=str(repo / "worker.py"),
    )
    host = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "up"
        assert wait_until(lambda: _ours(repo), 10)  # the worker and its sandbox, running
        assert not (repo / "mine.txt").exists()  # (it wrote in its view)
        os.kill(host.pid, signal.SIGKILL)
        host.wait(10)
        assert wait_until(lambda: not _ours(repo), 20), [p.cmdline() for p in _ours(repo)]
        # (the overlay was mounted in the actor's own namespace: none escaped into ours)
        assert str(repo) not in Path("/proc/self/mountinfo").read_text()
    finally:
        if host.poll() is None:
            host.kill()
        shutil.rmtree(state, ignore_errors=True)


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv"), reason="root and setpriv")
def test_a_copy_view_is_the_workspace_in_a_plain_users_sandbox() -> None:
    """What a plain user's isolated worker gets: its copy bound by bwrap (unprivileged) at
    the workspace's path; the workspace untouched, the change read from the copy."""
    top = Path(tempfile.mkdtemp(prefix="tether-view-"))  # (outside root's 0700 pytest dirs)
    try:
        work, base = top / "work", top / "view"
        work.mkdir()
        base.mkdir()
        (work / "a.txt").write_text("old\n")
        (work / "same.txt").write_text("untouched\n")  # (not in the change)
        made = base / "made"
        made.touch()
        view = worker_views.View(
            "copy", str(work), str(base), str(base / "copy"), "", str(made), str(base / "copied")
        )
        worker_views.fill(view)
        subprocess.run(["chown", "-R", "65534:65534", str(top)], check=True)
        script = "cat a.txt; echo new > a.txt; echo more > b.txt; id -u"
        wrapped = wrap(Place.sandbox(), ["/bin/sh", "-c", script], str(work), workspace=str(work),
                       workspace_from=view.root)  # fmt: skip
        user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        done = subprocess.run([*user, *_without_root_binds(wrapped.argv)], env=wrapped.env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.stdout.split() == ["old", "1000"], (done.stdout, done.stderr)
        assert (work / "a.txt").read_text() == "old\n" and not (work / "b.txt").exists()
        change = worker_views.collect(view)
        assert [(f.rel, f.new) for f in change.files] == [("a.txt", b"new\n"), ("b.txt", b"more\n")]
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _without_root_binds(argv: list[str]) -> list[str]:
    """bwrap's argv without the binds under /root (root's 0700 home holds the runtime's
    Python, which nobody cannot bind; the script is /bin/sh's)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--ro-bind" and argv[i + 1].startswith("/root/"):
            i += 3
            continue
        out.append(argv[i])
        i += 1
    return out
