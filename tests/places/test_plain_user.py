"""The hostile conversation against a runtime started by a plain user (issue 22 item 3,
"as root and as a plain user"): the other hostile tests run the runtime as root, where
bubblewrap's user namespace is made with every privilege at hand; here the runtime runs as
`nobody` (setpriv), so the sandbox is made unprivileged (bwrap is not setuid here; user namespaces:
user.max_user_namespaces is 96367, and this kernel has no unprivileged_userns_clone), and a sandboxed cell still reads nothing of another run,
writes nothing outside its workspace, and sees no port file, state dir or tree process; and
a debuggee (debugpy), a scripted vibe worker (tests/vibe/worker.py) and a project checker
run (cc's -wrapper from compile_flags.txt) and a tsserver plugin named by the project's
tsconfig.json (the vectors of test_hostile_tools) of a sandboxed run of the same runtime
run the hostile program (tests/places/hostile_probe.py: another run's file,
a write outside, the port file, the host's loopback, a signal, ptrace and /proc of an actor)
and see every attempt fail. One runtime for all of it: the venv below is the expensive part.

The runtime's interpreter for `nobody`: the test venv's Python lives under /root (0700
here), which nobody cannot run, so a venv over the system's Python of the same version
gets tether's site-packages as hard links (the same files, read-only to nobody, one
filesystem; no copy of 1 GB) - the shape of a plain user's own install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.places.hostile_probe import kept_in_its_place
from tests.places.test_places import needs_sandbox

WORKER = Path(__file__).parent.parent / "vibe" / "worker.py"
SYSTEM_PYTHON = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

pytestmark = [
    pytest.mark.slow,
    needs_sandbox,
    pytest.mark.skipif(os.getuid() != 0, reason="run as a plain user already: the others do"),
    pytest.mark.skipif(
        not os.access(SYSTEM_PYTHON, os.X_OK) or shutil.which("setpriv") is None,
        reason=f"needs {SYSTEM_PYTHON} (tether's site-packages are built for it) and setpriv",
    ),
    pytest.mark.skipif(
        not all(shutil.which(b) for b in ("clangd", "cc", "typescript-language-server", "tsc")),
        reason="the checker's and the plugin's vectors need clangd (its row owns C's checker)"
        ", cc, typescript-language-server and tsc",
    ),
]

HOST = (
    textwrap.dedent(
        """
    import os, shutil, socket, sys, tempfile
    from pathlib import Path
    from tests.conftest import wait_until
    from tests.places.hostile_probe import actor_pid, probe_source
    from tether.actors import checker, debug_session, language_server, vibe
    from tether.actors.kernel import kinds
    from tether.tools.vibe_workers import CommandBackend, VibeConfig
    from tether.runtime import Runtime
    top = Path(sys.argv[1])
    state = Path(tempfile.mkdtemp(prefix="tk-"))  # (short: a kernel's socket paths fit)
    every = [*kinds(spares=0), *debug_session.KINDS, *vibe.KINDS]
    every += [*language_server.KINDS, *checker.KINDS]
    rt = Runtime.start(kinds=every, state_dir=str(state))
    try:
        print("runtime uid", os.getuid(), "portfile-name", rt.port_file.name, flush=True)
        rt.open_run("b", workdir=top / "b", place="sandbox")
        probe = (
            "import os\\n"
            "def probe(what, f):\\n"
            "    try: f(); print(what, 'OPEN')\\n"
            "    except OSError as e: print(what, 'refused', type(e).__name__)\\n"
            f"probe('secret', lambda: print(open({str(top / 'b' / 'secret.txt')!r}).read()))\\n"
            f"probe('outside', lambda: open({str(top)!r} + '/planted-%d' % os.getuid(), 'w').write('x'))\\n"
            f"probe('portfile', lambda: open({str(rt.port_file)!r}).read())\\n"
            f"print('state', sorted(os.listdir({str(state)!r})))\\n"
            f"probe('signal', lambda: os.kill({rt.admin_pid}, 0))\\n"
            "print('cap', open('/proc/self/status').read().split('CapEff:')[1].split()[0])\\n"
            "print('uid', os.getuid())\\n"
            "open('mine.txt', 'w').write('written by A')\\n"
        )
        for place in ("host", "sandbox"):
            run = rt.open_run(place, workdir=top / place, place=place)
            res = run.call("eval", {{"code": probe, "description": "try to reach what the run must not"}})
            print(f"--- {{place}} error={{res.is_error}}", res.text, sep="\\n", flush=True)
        # a debuggee and a worker of a sandboxed run: the hostile program, ptrace and /proc too
        work = top / "boxed"
        shutil.copy(sys.argv[2], work / "worker.py")
        worker = CommandBackend([sys.executable, str(work / "worker.py")])
        config = VibeConfig(backends={"fast": worker})
        boxed = rt.open_run("boxed", workdir=work, place="sandbox", vibe=True, vibe_config=config)
        name, pid = actor_pid(rt.health())
        print("tree pid", name, pid, flush=True)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def plant(where, who):  # the hostile program, as where/probe_<who>.py
            (where / f"probe_{{who}}.py").write_text(
                probe_source(
                    secret=str(top / "b" / "secret.txt"),
                    outside=str(top / f"planted-{{who}}"),
                    port_file=str(rt.port_file),
                    state=str(state),
                    tree_pid=pid,
                    port=listener.getsockname()[1],
                )
            )

        plant(work, "debuggee")
        plant(work, "worker")
        res = boxed.call("debug", {"op": "launch", "program": "probe_debuggee.py"})
        done = res.is_error or "probe done" in res.text
        text = res.text if done else wait_until(
            lambda: (lambda t: t if "probe done" in t else None)(
                boxed.call("debug", {"op": "output"}).text
            ),
            60,
        )
        print(f"--- debuggee error={{res.is_error}}", text, sep="\\n", flush=True)
        brief = f"sh {{sys.executable}} probe_worker.py"
        spawned = boxed.call("vibe_spawn", {"brief": brief, "label": "probe"})
        assert not spawned.is_error, spawned.text
        wid = spawned.data["worker_id"]

        def worker_output():
            boxed.call("vibe_list", {})
            out = str(boxed.state["vibe"].get(wid).snapshot.output)
            return out if "exit 0" in out else None

        print("--- worker", wait_until(worker_output, 60), sep="\\n", flush=True)
        # a checker run of a sandboxed run: cc runs the program its compile_flags.txt names
        # as its -wrapper (the vector of test_hostile_tools), here the hostile program
        checked = top / "checked"
        plant(checked, "checker")
        wrapper = checked / "probe.sh"
        run_probe = f"/usr/bin/python3 {{checked}}/probe_checker.py > {{checked}}/found.txt 2>&1"
        wrapper.write_text(f"#!/bin/sh\\n{{run_probe}}\\n")
        wrapper.chmod(0o755)
        (checked / "compile_flags.txt").write_text(f"-wrapper\\n/bin/sh,{{wrapper}}\\n")
        (checked / "a.c").write_text("int a(void) {{ return 1; }}\\n")
        crun = rt.open_run("checked", workdir=checked, place="sandbox")
        crun.call("lsp", {{"action": "diagnostics", "file": "*"}})
        found = checked / "found.txt"
        done = lambda: (lambda t: t if "probe done" in t else None)(  # noqa: E731
            found.read_text() if found.exists() else ""
        )
        print("--- checker", wait_until(done, 60), sep="\\n", flush=True)
        # a language-server plugin of a sandboxed run: tsserver loads the plugin the
        # project's tsconfig.json names from its own node_modules (test_hostile_tools'
        # vector), which runs the hostile program
        plugged = top / "plugged"
        modules = plugged / "node_modules"
        installed = Path(shutil.which("tsc")).resolve().parents[1]  # .../typescript
        shutil.copytree(installed, modules / "typescript", symlinks=True)
        (modules / "evil-plugin").mkdir()
        (modules / "evil-plugin" / "package.json").write_text(
            '{{"name": "evil-plugin", "version": "1.0.0", "main": "index.js"}}'
        )
        plant(plugged, "plugin")
        command = f"/usr/bin/python3 {{plugged}}/probe_plugin.py > {{plugged}}/found.txt 2>&1"
        (modules / "evil-plugin" / "index.js").write_text(
            "module.exports = function init() {{\\n"
            f"  require('child_process').execFileSync('/bin/sh', ['-c', {{command!r}}]);\\n"
            "  return {{ create: (info) => info.languageService }};\\n"
            "}};\\n"
        )
        (plugged / "package.json").write_text('{{"name": "p", "version": "1.0.0"}}')
        (plugged / "tsconfig.json").write_text(
            '{{"compilerOptions": {{"strict": true, "plugins": [{{"name": "evil-plugin"}}]}}}}'
        )
        (plugged / "a.ts").write_text("export const a: number = 1;\\n")
        prun = rt.open_run("plugged", workdir=plugged, place="sandbox")
        hover = {{"action": "hover", "file": "a.ts", "line": 1, "symbol": "a"}}
        print("hover error", prun.call("lsp", hover).is_error, flush=True)
        found = plugged / "found.txt"
        print("--- plugin", wait_until(done, 60), sep="\\n", flush=True)
    finally:
        rt.shutdown()
        shutil.rmtree(state, ignore_errors=True)
    """
    )
    .replace("{{", "{")
    .replace("}}", "}")
)


@pytest.fixture(scope="module")
def plain_python() -> Iterator[str]:
    """A venv over the system's Python holding tether's site-packages as hard links."""
    top = Path(tempfile.mkdtemp(prefix="tether-plain-"))
    top.chmod(0o755)
    venv = top / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.rmdir()
    ours = next(p for p in sys.path if p.startswith(sys.prefix) and p.endswith("site-packages"))
    done = subprocess.run(["cp", "-al", ours, str(site)], capture_output=True, text=True)
    if done.returncode != 0:  # (another filesystem: no hard links)
        shutil.rmtree(top, ignore_errors=True)
        pytest.skip(f"could not link tether's site-packages for nobody: {done.stderr}")
    yield str(venv / "bin" / "python")
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def plain_top() -> Iterator[Path]:
    """Workspaces nobody may use (root's pytest dirs are 0700): b (with a secret), host
    sandbox and boxed (the debuggee's and worker's run); the top dir is writable by nobody, so only the place stops a write there."""
    top = Path(tempfile.mkdtemp(prefix="tether-plain-ws-"))
    top.chmod(0o777)
    for name in ("b", "host", "sandbox", "boxed", "checked", "plugged"):
        (top / name).mkdir()
        (top / name).chmod(0o777)
    (top / "b" / "secret.txt").write_text("B's secret\n")
    (top / "boxed" / "pyproject.toml").write_text('[project]\nname = "app"\n')  # (debugpy's root)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def test_a_plain_users_sandboxed_cell_debuggee_worker_checker_and_plugin_are_kept_in_place(
    plain_python: str, plain_top: Path
) -> None:
    repo = Path(__file__).parents[2]
    env = {**os.environ, "HOME": str(plain_top), "PYTHONPATH": str(repo)}
    env.pop("TETHER_STATE_DIR", None)
    done = subprocess.run(
        [*AS_NOBODY, plain_python, "-c", HOST, str(plain_top), str(WORKER)],
        env=env,
        cwd=str(plain_top),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout
    assert done.returncode == 0 and "--- worker" in out, (out, done.stderr[-3000:])
    assert "runtime uid 65534" in out, out
    host, boxed = out.split("--- host")[1].split("--- sandbox")
    boxed, debuggee = boxed.split("--- debuggee")
    debuggee, worker = debuggee.split("--- worker")
    worker, checked = worker.split("--- checker")
    checked, plugin = checked.split("--- plugin")
    # the differential: a host cell of the same runtime reaches what nobody may
    assert "B's secret" in host and "portfile OPEN" in host and "signal OPEN" in host, host
    assert "uid 65534" in host, host
    assert (plain_top / "planted-65534").exists(), host
    # in the sandbox: none of it
    assert boxed.startswith(" error=False"), boxed
    assert "B's secret" not in boxed and "secret refused FileNotFoundError" in boxed, boxed
    assert not (plain_top / "planted-1000").exists(), boxed  # (it went to its private /tmp)
    assert "portfile refused FileNotFoundError" in boxed, boxed
    assert "state ['kernels', 'layers']" in boxed, boxed  # (the way to its own kernel only)
    assert "signal refused ProcessLookupError" in boxed, boxed
    assert "cap 0000000000000000" in boxed and "uid 1000" in boxed, boxed
    assert (plain_top / "sandbox" / "mine.txt").read_text() == "written by A"
    # the debuggee (debugpy) and the worker (tests/vibe/worker.py) of a sandboxed run: the
    # same reads, write and port file, and the tree process by signal, ptrace and /proc
    assert debuggee.startswith(" error=False"), debuggee
    port_file = out.split("portfile-name ")[1].split()[0]
    kinds = [("debuggee", debuggee), ("worker", worker), ("checker", checked), ("plugin", plugin)]
    for kind, text in kinds:
        kept_in_its_place(kind, text, port_file, plain_top / f"planted-{kind}")
        assert "B's secret" not in text, (kind, text)
