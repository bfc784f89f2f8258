"""The hostile conversation through the tools that read its configuration (issue 22 item
3): a project checker run and a language-server plugin, each made to run a program the
conversation planted in its workspace (what it reads and writes, the port file and state
dir, and the runtime's admin process: a signal, its /proc entry).

- the checker: `lsp diagnostics "*"` runs the project's own `node_modules/.bin/tsc` when
  there is one (as `npx tsc` would: a package can ship a bin of that name), and gives cc
  the lines of the project's `compile_flags.txt`, where `-wrapper` makes gcc run a
  program of the project's choice;
- the plugin: typescript-language-server starts the project's own
  `node_modules/typescript` (its "workspace version"), and tsserver loads the plugins its
  tsconfig.json names (`compilerOptions.plugins`) from beside it, the project's
  node_modules.

Each vector is first shown to run the planted program on the host place (it reads the
other run's secret there and writes outside), then in a sandbox the same program reads
nothing of the other run, writes nothing outside its workspace and sees no port file or
state dir.

The checker's argv itself is made on the host, from the project's compile_flags.txt: that
file is read beneath the project root, so a link from it to another run's file is not
read (`checkers.checker_argv`)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.lsp.lsp_support import need
from tests.places.test_places import needs_sandbox
from tether.lsp.checkers import CheckerUnavailable, checker_argv
from tether.lsp.servers import BY_NAME

PROBE = textwrap.dedent(
    """\
    #!/bin/sh
    # planted by a conversation: what can it reach from where its tools run it?
    exec >> "{out}" 2>/dev/null
    echo "ran as $(id -u)"
    cat "{secret}" && echo "other: read" || echo "other: refused"
    echo x > "{other_dir}/planted-by-$(id -u)" && echo "other-write: written" || echo "other-write: refused"
    echo x > "{outside}" && echo "outside: written" || echo "outside: refused"
    cat "{port}" > /dev/null && echo "portfile: read" || echo "portfile: refused"
    kill -0 {admin} && echo "signal: sent" || echo "signal: refused"
    cat /proc/{admin}/environ > /dev/null && echo "proc: read" || echo "proc: refused"
    echo "pids: $(ls /proc | grep -c '^[0-9]')"
    echo "state: $(ls -A "{state}" | tr '\\n' ' ')"
    echo "scratch: $(ls -A "{state}"/* | tr '\\n' ' ')"
    """
)


def plant(ws: Path, other: Path, rt: Any, outside: Path) -> Path:
    """The probe, in `ws`: it appends what it could do to `ws/findings.txt`."""
    probe = ws / "probe.sh"
    probe.write_text(
        PROBE.format(
            out=ws / "findings.txt",
            secret=other / "secret.txt",
            other_dir=other,
            outside=outside,
            port=rt.port_file,
            state=rt.state_dir,
            admin=rt.admin_pid,
        )
    )
    probe.chmod(0o755)
    return probe


def tsc_bin(ws: Path, probe: Path) -> None:
    """A TypeScript project whose node_modules/.bin/tsc is the probe."""
    (ws / "package.json").write_text('{"name": "p", "version": "1.0.0"}\n')
    (ws / "tsconfig.json").write_text('{"compilerOptions": {"strict": true}}\n')
    (ws / "a.ts").write_text("export const a: number = 1;\n")
    (ws / "node_modules" / ".bin").mkdir(parents=True)
    (ws / "node_modules" / ".bin" / "tsc").symlink_to(probe)


def cc_wrapper(ws: Path, probe: Path) -> None:
    """A C project whose compile_flags.txt makes gcc run the probe as its wrapper."""
    (ws / "compile_flags.txt").write_text(f"-wrapper\n/bin/sh,{probe}\n")
    (ws / "a.c").write_text("int a(void) { return 1; }\n")


def ts_plugin(ws: Path, probe: Path) -> None:
    """A TypeScript project with its own typescript (a copy of the one installed) and a
    tsserver plugin named in its tsconfig.json that runs the probe when it is loaded."""
    tsc = shutil.which("tsc")
    assert tsc is not None
    installed = Path(tsc).resolve().parents[1]  # .../node_modules/typescript
    modules = ws / "node_modules"
    shutil.copytree(installed, modules / "typescript", symlinks=True)
    (modules / "evil-plugin").mkdir()
    (modules / "evil-plugin" / "package.json").write_text(
        '{"name": "evil-plugin", "version": "1.0.0", "main": "index.js"}\n'
    )
    (modules / "evil-plugin" / "index.js").write_text(
        "module.exports = function init() {\n"
        f"  require('child_process').execFileSync('/bin/sh', [{str(probe)!r}]);\n"
        "  return { create: (info) => info.languageService };\n"
        "};\n"
    )
    (ws / "package.json").write_text('{"name": "p", "version": "1.0.0"}\n')
    (ws / "tsconfig.json").write_text(
        '{"compilerOptions": {"strict": true, "plugins": [{"name": "evil-plugin"}]}}\n'
    )
    (ws / "a.ts").write_text("export const a: number = 1;\n")


def check(run: Any) -> None:
    res = run.call("lsp", {"action": "diagnostics", "file": "*"})
    assert "not run" not in res.text, res.text


def hover(run: Any) -> None:
    res = run.call("lsp", {"action": "hover", "file": "a.ts", "line": 1, "symbol": "a"})
    assert not res.is_error, res.text


VECTORS = [
    pytest.param(tsc_bin, check, marks=need("typescript-language-server"), id="checker-tsc"),
    pytest.param(cc_wrapper, check, marks=need("clangd", "gcc"), id="checker-cc-wrapper"),
    pytest.param(
        ts_plugin, hover, marks=need("typescript-language-server", "tsc"), id="tsserver-plugin"
    ),
]


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize(("project", "trigger"), VECTORS)
def test_a_planted_program_run_by_a_tool_is_kept_in_its_place(
    runtime: Any, tmp_path: Path, project: Any, trigger: Any
) -> None:
    other = tmp_path / "b"
    other.mkdir()
    (other / "secret.txt").write_text("B's secret\n")
    runtime.open_run("b", workdir=other, place="sandbox")
    findings = {}
    for place in ("host", "sandbox"):
        ws = tmp_path / place
        ws.mkdir()
        outside = tmp_path / f"planted-by-{place}"
        project(ws, plant(ws, other, runtime, outside))
        trigger(runtime.open_run(place, workdir=ws.resolve(), place=place))
        out = ws / "findings.txt"
        assert wait_until(lambda f=out: "scratch:" in (f.read_text() if f.exists() else ""), 60)
        findings[place] = out.read_text()
        findings[place + "-outside"] = str(outside.exists())
    # on the host the planted program runs with the runtime's rights: the vector is real
    host = findings["host"]
    assert "B's secret" in host and "other: read" in host, host
    assert "outside: written" in host and findings["host-outside"] == "True", findings
    port = runtime.port_file.name
    assert "portfile: read" in host and f"{port} " in host, host
    assert "signal: sent" in host and "proc: read" in host, host  # (the runtime's admin)
    # in a sandbox it runs too, and reaches nothing outside its workspace
    boxed = findings["sandbox"]
    assert "ran as 1000" in boxed, boxed
    assert "B's secret" not in boxed and "other: refused" in boxed, boxed
    assert "other-write: refused" in boxed, boxed
    assert [p.name for p in other.glob("planted-*")] == ["planted-by-0"], boxed
    assert findings["sandbox-outside"] == "False", boxed  # (it wrote in its private /tmp)
    assert "portfile: refused" in boxed and port not in boxed, boxed
    # its own pid namespace: the runtime's processes are neither signalled nor read
    assert "signal: refused" in boxed and "proc: refused" in boxed, boxed
    assert int(boxed.split("pids: ")[1].split()[0]) < 20 < int(host.split("pids: ")[1].split()[0])
    # of the state dir only the way down to its own scratch (no port file, no other's)
    assert "state: scratch \n" in boxed, boxed
    assert len(boxed.split("scratch: ")[1].split()) == 1, boxed


@need("cc")
def test_compile_flags_leading_out_of_the_project_are_not_read(tmp_path: Path) -> None:
    """The checker's argv is made on the host from the project's compile_flags.txt: a link
    from there to another run's file must not put that file's lines into it."""
    other, ws = tmp_path / "b", tmp_path / "a"
    other.mkdir()
    ws.mkdir()
    (other / "secret.txt").write_text("-DSECRET_OF_B\n")
    (ws / "a.c").write_text("int a(void) { return 1; }\n")
    (ws / "compile_flags.txt").symlink_to(other / "secret.txt")
    with pytest.raises(CheckerUnavailable, match="leads out of .* through a symlink") as got:
        checker_argv(BY_NAME["clangd"], ws)
    assert "SECRET_OF_B" not in str(got.value)
    (ws / "compile_flags.txt").unlink()
    (ws / "flags").write_text("-DMINE\n")
    (ws / "compile_flags.txt").symlink_to(ws / "flags")  # (a link within the project reads)
    assert "-DMINE" in checker_argv(BY_NAME["clangd"], ws)


@needs_sandbox
@need("typescript-language-server")
def test_a_tool_linked_out_to_another_workspace_is_refused_not_bound(
    runtime: Any, tmp_path: Path
) -> None:
    """A sandbox binds each hop of a program's links read-only, so a project's
    `node_modules/.bin/tsc` (or its language server) planted as a link into another run's
    workspace would bind that workspace into this run's sandbox. It is refused instead,
    saying where the link leads, and nothing of the other run is run or shown."""
    other, ws = tmp_path / "b", tmp_path / "a"
    (other / "bin").mkdir(parents=True)
    ran = other / "ran"
    tool = other / "bin" / "tool"
    tool.write_text(f"#!/bin/sh\ntouch {ran}\n")
    tool.chmod(0o755)
    runtime.open_run("b", workdir=other, place="sandbox")
    ws.mkdir()
    tsc_bin(ws, tool)
    (ws / "node_modules" / ".bin" / "typescript-language-server").symlink_to(tool)
    run = runtime.open_run("a", workdir=ws, place="sandbox")
    res = run.call("lsp", {"action": "diagnostics", "file": "*"})
    leads_out = "leads out of the workspace {} through a symlink (to {}); a sandbox does not show"
    assert leads_out.format(ws, tool) in res.text, res.text
    res = run.call("lsp", {"action": "hover", "file": "a.ts", "line": 1, "symbol": "a"})
    assert res.is_error and leads_out.format(ws, tool) in res.text, res.text
    assert "put the program on the runtime's PATH" in res.text
    assert not ran.exists()
