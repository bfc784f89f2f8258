"""IPython idioms rewritten into plain code: the rewrite as a table, its refusals, and each
idiom run in a real kernel (ipykernel; Deno's kernel for JavaScript) after the prelude."""

from __future__ import annotations

import io
import sys
import time
import types
import zipfile
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import wait_until
from tests.kernels.kernel_cells import DirectKernel, missing, render
from tether.kernels import MagicError, prelude, rewrite
from tether.kernels.cell_lines import JsScanner, javascript_code_end
from tether.kernels.magics_javascript import looks_like_shell
from tether.processes import still_running

# ---- the rewrite, as a table -----------------------------------------------------------------

PYTHON = [
    ("!ls -la", "_tether_sh('ls -la')"),
    ("! ls", "_tether_sh('ls')"),
    ("files = !ls {path}", "files = _tether_sh_lines('ls {path}')"),
    ("a, b = !echo 1", "a, b = _tether_sh_lines('echo 1')"),
    ("!!date", "_tether_sh_lines('date')"),
    ("%pip install -U requests", "_tether_pip('install -U requests')"),
    ("!pip install requests", "_tether_pip('install requests')"),
    ("!python -m pip list", "_tether_pip('list')"),
    ("%cd /tmp", "_tether_cd('/tmp')"),
    ("%cd", "_tether_cd('')"),
    ("%pwd", "_tether_pwd()"),
    ("here = %pwd", "here = _tether_pwd()"),
    ("%env HOME", "_tether_env('HOME')"),
    ("%env A=1", "_tether_env('A=1')"),
    ("%who int", "_tether_who('int')"),
    ("names = %who_ls", "names = _tether_who_ls('')"),
    ("%whos", "_tether_whos('')"),
    ("%time f(1)  # slow", "_tether_time(lambda: (f(1)))"),
    ("r = %time f(1)", "r = _tether_time(lambda: (f(1)))"),
    ("%time x = f(1); y = 2", "with _tether_timer(): x = f(1); y = 2"),
    ("%time await g()", "with _tether_timer(): await g()"),
    ("%timeit sum(range(9))", "_tether_timeit('sum(range(9))', number=0, repeat=7)"),
    ("%timeit -n 3 -r 2 f()", "_tether_timeit('f()', number=3, repeat=2)"),
    ("%matplotlib inline", "pass"),
    ("%ll /tmp", "_tether_sh('ls -F -l /tmp')"),
    ("%mkdir out", "_tether_sh('mkdir out')"),
    ("%sx ls", "_tether_sh_lines('ls')"),
    # indented: the translation keeps the line's indentation
    ("for f in fs:\n    !rm {f}\n", "for f in fs:\n    _tether_sh('rm {f}')\n"),
    # not idioms: inside strings, inside brackets, comparisons, comments
    ('s = """\n!ls\n%cd /x\n"""\n', None),
    ("s = '''a\n  x = !ls\n'''\n", None),
    ('f"""{x}\n!ls\n"""\n', None),
    ("x = (1\n% 2)\n", None),
    ("y = [a,\n!b]\n", None),
    ("x = a if b != c else d\n", None),
    ("# !ls\n#%cd /\n", None),
    ("z = 1 \\\n  % 2\n", None),
    # a magic line with an unbalanced quote or bracket does not derail what follows
    ("!echo it's\nx = 1\n!ls\n", "_tether_sh(\"echo it's\")\nx = 1\n_tether_sh('ls')\n"),
    ("!echo (\n!ls\n", "_tether_sh('echo (')\n_tether_sh('ls')\n"),
    # cell magics (the first non-blank line)
    ("%%bash\necho $HOME\n", "_tether_sh('echo $HOME\\n', shell='bash', expand=False)\n"),
    ("\n%%sh\nls\n", "\n_tether_sh('ls\\n', shell='sh', expand=False)\n"),
    (
        "%%timeit -n 5 x = 2\nx * 2\n",
        "_tether_timeit('x * 2\\n', setup='x = 2', number=5, repeat=7)\n",
    ),
    ("%%writefile -a out.txt\nhi\n", "_tether_writefile('out.txt', 'hi\\n', append=True)\n"),
    ("%%time\nx = 1\n!ls\n", "with _tether_timer():\n    x = 1\n    _tether_sh('ls')\n"),
    ('%%time\ns = """a\nb"""\n', 'with _tether_timer():\n    s = """a\nb"""\n'),
    ("%%time\nif x:\n\ty = 1\n", "with _tether_timer():\n\tif x:\n\t\ty = 1\n"),
    ("%%time\n", "with _tether_timer(): pass\n"),
]


@pytest.mark.parametrize(("code", "expected"), PYTHON)
def test_python_rewrite(code: str, expected: str | None) -> None:
    assert rewrite("python", code).code == (code if expected is None else expected)


JAVASCRIPT = [
    ("!ls -la", 'await _tether_sh("ls -la");'),
    ("!./run.sh", 'await _tether_sh("./run.sh");'),
    ("!deno --version", 'await _tether_sh("deno --version");'),
    ("%cd /tmp", '_tether_cd("/tmp");'),
    ("%cd 'a b'", '_tether_cd("a b");'),
    ("%pwd", "Deno.cwd();"),
    ("%env A=1", '_tether_env("A=1");'),
    (
        "%time const x = await f() // slow",
        "_tether_time_start(); const x = await f(); _tether_time_end();",
    ),
    ("%timeit -n 2 f()", "await _tether_timeit(async () => { f(); }, {number: 2, repeat: 7});"),
    ("%ls", 'await _tether_sh("ls");'),
    ("%%bash\necho $0\n", 'await _tether_sh("echo $0\\n", {shell: "bash"});\n'),
    (
        "%%timeit -r 3\nf()\n",
        "await _tether_timeit(async () => {\nf()\n\n}, {number: 0, repeat: 3});\n",
    ),
    ("%%time\nconst a = 1\n", "_tether_time_start();\nconst a = 1\n\n_tether_time_end();\n"),
    ("%%writefile x.ts\nexport {}\n", '_tether_writefile("x.ts", "export {}\\n", false);\n'),
    # JavaScript that looks like an idiom stays JavaScript
    ("const ok = !ready", None),
    ("let x = !ls", None),
    ("!!flag", None),
    ("! x", None),
    ("!done && next()", None),
    ("!obj.flag", None),
    ("!f(x)", None),
    ("!function(){}()", None),
    ("const a = b &&\n  !c\n", None),
    ("const n = a\n% b\n", None),
    ("const s = `\n!ls\n${ `\n%cd /` }\n`\n", None),
    ("/* \n!ls\n*/\n", None),
    ("f(\n!x)\n", None),
    ("const s = '!ls'; // !ls\n", None),
    # a regex or a string holding a quote does not derail what follows
    ('const r = /"/;\n!ls\n', 'const r = /"/;\nawait _tether_sh("ls");\n'),
    ('const q = "\'";\n!ls\n', 'const q = "\'";\nawait _tether_sh("ls");\n'),
    ("const t = a / b / c;\n!ls\n", 'const t = a / b / c;\nawait _tether_sh("ls");\n'),
]


@pytest.mark.parametrize(("code", "expected"), JAVASCRIPT)
def test_javascript_rewrite(code: str, expected: str | None) -> None:
    assert rewrite("javascript", code).code == (code if expected is None else expected)


@pytest.mark.parametrize(
    ("rest", "shell"),
    [("ls", True), ("ls -la", True), ("make | tee log", True), ("ok", True), ("a.b", False),
     ("a.b -x", True), ("x && y", False), ("x || y", False), ("x ?? y", False), ("(x)", False),
     ("true", False), ("Deno.cwd()", False), ("x;", False), ("x === y", False)],
)  # fmt: skip
def test_a_bang_line_is_a_command_only_when_it_cannot_be_javascript(rest: str, shell: bool) -> None:
    assert looks_like_shell(rest) is shell


def test_rewrites_keep_line_numbers_and_say_what_they_changed() -> None:
    code = "a = 1\n%matplotlib inline\n!pip install x\nb = 2\n"
    result = rewrite("python", code)
    assert len(result.code.splitlines()) == len(code.splitlines())
    assert result.notes == [
        "line 2: %matplotlib inline is the default here: the line does nothing",
        "line 3: !pip runs as %pip: the kernel's own interpreter's pip",
    ]


def test_plain_code_comes_back_unchanged_in_both_languages() -> None:
    python = "import os\nprint(os.getcwd())\nx = {'a': 1} % 2 if False else 3\n"
    javascript = "const x = 1;\nconsole.log(x % 2, !x);\n"
    assert rewrite("python", python).code == python
    assert rewrite("typescript", javascript).code == javascript
    assert rewrite("python", "").code == ""


def test_javascript_code_end_drops_a_trailing_comment_but_not_one_in_a_string() -> None:
    assert javascript_code_end("f() // c") == "f()"
    assert javascript_code_end("f('//') // c") == "f('//')"
    assert javascript_code_end("f(`//${a}`)") == "f(`//${a}`)"
    scanner = JsScanner()
    scanner.feed_line("const t = `a ${ {b: 1}.b } c\n")
    assert scanner.modes == ["code", "template"]  # still inside the template literal


# ---- refusals, with what to do instead --------------------------------------------------------

REFUSED = [
    ("python", "x = 1\n%load_ext autoreload", "line 2: %load_ext: not supported in eval; modules are not reloaded automatically"),
    ("python", "%frobnicate", "line 1: %frobnicate: not supported in eval; eval rewrites %cat, %cd,"),
    ("python", "%%html\n<b>x</b>", "line 1: %%html: not supported in eval; display it:"),
    ("python", "x = 1\n%%bash\nls", "line 2: %%bash: a cell magic works only on the first line of a cell; move it to the top"),
    ("python", "%time for i in x: pass", "line 1: %time: a compound statement cannot follow %time on one line; put %%time"),
    ("python", "%time", "line 1: %time: nothing to time; write %time followed by a statement"),
    ("python", "%time x = (", "line 1: %time: the statement does not parse"),
    ("python", "%timeit -q f()", "line 1: %timeit: unknown option '-q'; known options: -n, -r"),
    ("python", "%timeit -n zero f()", "line 1: %timeit: -n wants a positive whole number, got 'zero'"),
    ("python", "%matplotlib qt", "line 1: %matplotlib: backend 'qt' is not available here"),
    ("python", "x = %matplotlib inline", "line 1: %matplotlib: its result cannot be assigned"),
    ("python", "%%bash -x\nls", "line 1: %%bash: takes no arguments here, got '-x'"),
    ("python", "%%writefile\nx", "line 1: %%writefile: needs a file name"),
    ("javascript", "%pip install chalk", 'line 1: %pip: JavaScript has no pip; import npm packages directly: import chalk from "npm:chalk@5"'),
    ("javascript", "%who", "line 1: %who: let/const bindings cannot be listed in JavaScript"),
    ("javascript", "%matplotlib inline", "line 1: %matplotlib: there is no matplotlib in JavaScript; plot in Python"),
    ("javascript", "%load_ext x", "line 1: %load_ext: not supported in eval; eval rewrites %cat, %cd,"),
    ("javascript", "%%timeit setup()\nf()", "line 1: %%timeit: takes no setup statement in JavaScript"),
    ("javascript", "%cd a b", "line 1: %cd: expected one path, got 2; quote a path with spaces"),
]  # fmt: skip


@pytest.mark.parametrize(("language", "code", "message"), REFUSED)
def test_an_idiom_without_a_plain_equivalent_is_refused_with_advice(
    language: str, code: str, message: str
) -> None:
    with pytest.raises(MagicError) as refused:
        rewrite(language, code)
    assert refused.value.message.startswith(message), refused.value.message


def test_an_unknown_language_is_named_with_the_ones_there_are() -> None:
    with pytest.raises(ValueError, match="unknown language 'ruby': eval runs python or javascript"):
        rewrite("ruby", "x")
    with pytest.raises(ValueError, match="unknown language 'ruby'"):
        prelude("ruby")


# ---- the prelude's decisions, in this process ------------------------------------------------


def _prelude_module() -> types.ModuleType:
    from tether.kernels import python_prelude

    return python_prelude


def test_pip_keeps_packages_with_compiled_extensions_and_drops_pure_ones(capsys: Any) -> None:
    prelude_module = _prelude_module()
    extension = types.ModuleType("tether_fake_ext")
    extension.__file__ = "/x/tether_fake_ext/core.cpython-311-x86_64-linux-gnu.so"
    pure = types.ModuleType("tether_fake_pure")
    pure.__file__ = "/x/tether_fake_pure/__init__.py"
    user_ns = {"p": pure}
    prelude_module._STATE["user_ns"] = user_ns
    sys.modules.update(
        {
            "tether_fake_ext.core": extension,
            "tether_fake_ext": types.ModuleType("tether_fake_ext"),
            "tether_fake_pure": pure,
        }
    )
    try:
        prelude_module._forget_modules({"tether_fake_ext", "tether_fake_pure"})
        assert "tether_fake_pure" not in sys.modules  # the next import loads the new version
        assert "tether_fake_ext.core" in sys.modules  # an extension cannot load twice
    finally:
        for name in ("tether_fake_ext", "tether_fake_ext.core", "tether_fake_pure"):
            sys.modules.pop(name, None)
    out = capsys.readouterr().out
    assert "note: dropped 1 modules of tether_fake_pure from sys.modules" in out
    assert "note: tether_fake_ext has compiled extensions loaded in this kernel" in out
    assert "restart the kernel (eval with reset=true)" in out
    assert "note: p still refer to the old modules: import them again" in out


def test_expansion_evaluates_fields_in_the_callers_scope_and_leaves_the_rest() -> None:
    expand = _prelude_module()._expand
    name, n = "world", 3
    frame = sys._getframe()
    assert expand("echo {name} $name {n + 1}", frame) == "echo world world 4"
    assert (
        expand("awk '{print $1}' $HOME {undefined_thing} {}", frame)
        == "awk '{print $1}' $HOME {undefined_thing} {}"
    )
    assert expand("cost $$5 {{literal}}", frame) == "cost $5 {literal}"
    assert (name, n) == ("world", 3)


# ---- each idiom in a real Python kernel --------------------------------------------------------


def _run_ok(kernel: Any, code: str) -> Any:
    rendered = render(kernel, code)
    assert rendered.error is None, rendered.error
    return rendered


def test_shell_commands_stream_output_and_bind_lines(python_kernel: Any) -> None:
    rendered = _run_ok(python_kernel, "!echo out; echo err >&2; exit 3")
    assert rendered.text == "out\nerr\n(exit status 3)"
    assert _run_ok(python_kernel, "_exit_code").text == "3"
    rendered = _run_ok(python_kernel, "who = 'kernel'\nlines = !printf '%s\\n' a {who} $who\nlines")
    assert rendered.text == "['a', 'kernel', 'kernel']"
    assert _run_ok(python_kernel, "!!echo twice").text == "['twice']"


def test_bash_and_sh_cells_run_their_body_as_written(python_kernel: Any) -> None:
    assert _run_ok(python_kernel, "%%bash\nx=bash\necho $x ${BASH_VERSION:+yes}").text == "bash yes"
    assert _run_ok(python_kernel, "%%sh\necho {not_expanded}").text == "{not_expanded}"


def test_cd_pwd_and_back(python_kernel: Any, tmp_path: Path) -> None:
    start = _run_ok(python_kernel, "%pwd").text
    rendered = _run_ok(python_kernel, f"target = {str(tmp_path)!r}\n%cd {{target}}\n%pwd")
    assert rendered.text.splitlines() == [str(tmp_path), repr(str(tmp_path))]
    assert _run_ok(python_kernel, "%cd -").text == start.strip("'")
    failed = render(python_kernel, "%cd /no/such/dir")
    assert failed.error is not None and "FileNotFoundError" in failed.error
    assert "----> 1 %cd /no/such/dir" in failed.error  # the user's own line, not its rewrite
    assert "tether-prelude" not in failed.error and "os.chdir" not in failed.error


def test_env_sets_reads_and_lists_with_secrets_hidden(python_kernel: Any) -> None:
    assert _run_ok(python_kernel, "%env TETHER_PROBE=on").text == "env: TETHER_PROBE=on"
    assert _run_ok(python_kernel, "%env TETHER_PROBE").text == "'on'"
    _run_ok(python_kernel, "%env MY_API_KEY=sk-123")
    listing = _run_ok(python_kernel, "%env").text
    assert "'TETHER_PROBE': 'on'" in listing and "'MY_API_KEY': '<hidden>'" in listing
    assert "sk-123" not in listing
    assert "is not set" in (render(python_kernel, "%env TETHER_NOT_SET").error or "")


def test_who_lists_the_users_names_not_the_helpers(python_kernel: Any) -> None:
    _run_ok(python_kernel, "who_a = 1\nwho_b = 'x'\n_private = 2")
    names = _run_ok(python_kernel, "%who").text.split("\t")
    assert {"who_a", "who_b"} <= set(names)
    assert not [n for n in names if n.startswith("_") or n in ("In", "Out", "get_ipython")]
    assert "who_a" in _run_ok(python_kernel, "%who int").text.split("\t")
    assert "who_b" not in _run_ok(python_kernel, "%who int").text.split("\t")
    assert "who_a" in _run_ok(python_kernel, "names = %who_ls\nnames").text
    table = _run_ok(python_kernel, "%whos str").text.splitlines()
    assert table[0].split() == ["Variable", "Type", "Data/Info"]
    assert any(line.split()[:3] == ["who_b", "str", "'x'"] for line in table[2:])


def test_time_echoes_an_expression_and_keeps_an_assignment(python_kernel: Any) -> None:
    lines = _run_ok(python_kernel, "%time sum(range(10))").text.splitlines()
    assert lines[0].startswith("Wall time: ") and lines[1] == "45"
    _run_ok(python_kernel, "%time timed = 6 * 7")
    assert _run_ok(python_kernel, "timed").text == "42"
    rendered = _run_ok(python_kernel, "%%time\ncell_timed = 1\n!echo inside")
    assert rendered.text.splitlines()[0] == "inside"
    assert rendered.text.splitlines()[1].startswith("Wall time: ")
    assert _run_ok(python_kernel, "cell_timed").text == "1"


def test_timeit_reports_loops_and_runs(python_kernel: Any) -> None:
    line = _run_ok(python_kernel, "base = 3\n%timeit -n 4 -r 2 base * 2").text
    assert line.endswith("per loop (mean ± std. dev. of 2 runs, 4 loops each)"), line
    cell = _run_ok(python_kernel, "%%timeit -n 3 -r 2 y = base\ny * 2").text
    assert cell.endswith("(mean ± std. dev. of 2 runs, 3 loops each)"), cell


def test_writefile_writes_and_appends(python_kernel: Any, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    assert _run_ok(python_kernel, f"%%writefile {target}\nfirst\n").text == f"Writing {target}"
    assert (
        _run_ok(python_kernel, f"%%writefile -a {target}\nsecond\n").text
        == f"Appending to {target}"
    )
    assert target.read_text() == "first\nsecond\n"


def test_aliases_and_matplotlib_inline_need_no_ipython(python_kernel: Any, tmp_path: Path) -> None:
    (tmp_path / "listed.txt").write_text("x")
    assert "listed.txt" in _run_ok(python_kernel, f"%ls {tmp_path}").text
    assert _run_ok(python_kernel, "%matplotlib inline\n1").text == "1"


def test_magic_text_inside_strings_reaches_the_kernel_untouched(python_kernel: Any) -> None:
    code = 's = """\n!ls\n%cd /\n"""\nprint(s)'
    assert _run_ok(python_kernel, code).text == "\n!ls\n%cd /"


def _wheel(path: Path, version: str) -> Path:
    """A minimal pure-Python wheel of `tether_probe_pkg` (no build step, no index)."""
    wheel = path / f"tether_probe_pkg-{version}-py3-none-any.whl"
    info = f"tether_probe_pkg-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("tether_probe_pkg/__init__.py", f"VERSION = {version!r}\n")
        archive.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: tether-probe-pkg\nVersion: {version}\n",
        )
        archive.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        archive.writestr(f"{info}/top_level.txt", "tether_probe_pkg\n")
        archive.writestr(f"{info}/RECORD", "")
    return wheel


def test_pip_installs_with_the_kernels_interpreter_and_the_next_import_sees_it(
    python_kernel: Any, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    target.mkdir()
    old, new = _wheel(tmp_path, "1.0"), _wheel(tmp_path, "2.0")
    _run_ok(python_kernel, f"import sys\nsys.path.insert(0, {str(target)!r})")
    pip = "%pip install --no-index --no-deps --upgrade --target {target} {wheel}"
    first = _run_ok(python_kernel, f"target, wheel = {str(target)!r}, {str(old)!r}\n{pip}")
    assert "note: pip changed tether-probe-pkg 1.0 (new)" in first.text, first.text
    assert (
        _run_ok(python_kernel, "import tether_probe_pkg\ntether_probe_pkg.VERSION").text == "'1.0'"
    )
    second = _run_ok(python_kernel, f"wheel = {str(new)!r}\n{pip}")
    assert "note: pip changed tether-probe-pkg 1.0 -> 2.0" in second.text, second.text
    assert "note: dropped 1 modules of tether_probe_pkg from sys.modules" in second.text
    assert "note: tether_probe_pkg still refer to the old modules: import them again" in second.text
    reimported = "import tether_probe_pkg\ntether_probe_pkg.VERSION"
    assert _run_ok(python_kernel, reimported).text == "'2.0'"
    python = _run_ok(python_kernel, "!!{sys.executable} -c 'import sys; print(sys.prefix)'").text
    assert python == repr([sys.prefix])  # the kernel's interpreter is this one


def test_an_interrupted_shell_command_is_killed_with_its_children(python_kernel: Any) -> None:
    kernel = python_kernel

    def interrupt_once_started(kind: str, content: dict[str, Any]) -> None:
        if kind == "stream" and "started" in content.get("text", ""):
            wait_until(lambda: _sleepers(kernel.pid), timeout=10)
            kernel.manager.interrupt_kernel()

    rendered = render(
        kernel, "!echo started; sleep 300 & sleep 300", on_message=interrupt_once_started
    )
    assert rendered.error is not None and "KeyboardInterrupt" in rendered.error
    wait_until(lambda: not _sleepers(kernel.pid), timeout=10)
    assert _run_ok(kernel, "1 + 1").text == "2"  # the kernel lives on


def test_a_command_left_in_the_background_does_not_hold_the_cell(tmp_path: Path) -> None:
    absent = missing("python")
    if absent:
        pytest.skip(f"not installed: {absent}")
    kernel = DirectKernel("python", tmp_path)
    try:
        kernel.run_prelude()
        started = time.monotonic()
        rendered = _run_ok(kernel, "!echo start; sleep 297.5 & echo done")
        assert time.monotonic() - started < 10
        assert rendered.text.splitlines()[:2] == ["start", "done"]
        assert "note: a background process still holds the command's output" in rendered.text
        assert _background_sleep(), "the background process runs on while the kernel lives"
    finally:
        kernel.close(now=False)  # a clean exit: the prelude's atexit hook ends what ! left
    wait_until(lambda: not _background_sleep(), timeout=10)


def _background_sleep() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] == ["sleep", "297.5"] and still_running(proc):
            found.append(proc)
    return found


def _sleepers(pid: int) -> list[psutil.Process]:
    return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "sleep"]


def test_an_unknown_magic_never_reaches_the_kernel(python_kernel: Any) -> None:
    with pytest.raises(MagicError, match="line 1: %load_ext"):
        python_kernel.run("%load_ext autoreload")
    assert _run_ok(python_kernel, "'still here'").text == "'still here'"


# ---- each idiom in Deno's kernel --------------------------------------------------------------


def test_deno_shell_commands_and_bash_cells(deno_kernel: Any) -> None:
    assert (
        _run_ok(deno_kernel, "!echo out; echo err >&2; exit 4").text == "out\nerr\n(exit status 4)"
    )
    assert _run_ok(deno_kernel, "_exit_code").text == "4"
    assert _run_ok(deno_kernel, "%%bash\nx=deno\necho $x").text == "deno"
    assert _run_ok(deno_kernel, "const negated = !false; negated").text == "true"


def test_deno_a_command_left_in_the_background_does_not_hold_the_cell(deno_kernel: Any) -> None:
    try:
        rendered = _run_ok(deno_kernel, "!echo start; sleep 297.5 & echo done")
        assert rendered.text.splitlines()[:2] == ["start", "done"]
        assert "note: a background process still holds the command's output" in rendered.text
        assert _run_ok(deno_kernel, "!echo next").text == "next"  # nothing late leaks in
    finally:
        for proc in _background_sleep():
            proc.kill()


def test_deno_cd_pwd_env(deno_kernel: Any, tmp_path: Path) -> None:
    start = _run_ok(deno_kernel, "%pwd").text
    assert _run_ok(deno_kernel, f"%cd {tmp_path}").text == str(tmp_path)
    assert _run_ok(deno_kernel, "%cd -").text == start.strip('"')
    assert _run_ok(deno_kernel, "%env TETHER_PROBE=deno").text == "env: TETHER_PROBE=deno"
    assert _run_ok(deno_kernel, "%env TETHER_PROBE").text == '"deno"'
    failed = render(deno_kernel, "%cd /no/such/dir")
    assert failed.error is not None and failed.error.startswith("NotFound")
    assert "tether-prelude" not in failed.error


def test_deno_time_timeit_and_writefile(deno_kernel: Any, tmp_path: Path) -> None:
    assert _run_ok(deno_kernel, "%time const timedValue = 6 * 7").text.startswith("Wall time: ")
    assert _run_ok(deno_kernel, "timedValue").text == "42"
    line = _run_ok(deno_kernel, "%timeit -n 3 -r 2 [1, 2].map((x) => x * 2)").text
    assert line.endswith("(mean ± std. dev. of 2 runs, 3 loops each)"), line
    cell = _run_ok(deno_kernel, "%%timeit -n 2 -r 2\nconst xs = [1, 2]\nxs.map((x) => x)").text
    assert cell.endswith("(mean ± std. dev. of 2 runs, 2 loops each)"), cell
    target = tmp_path / "deno.txt"
    assert _run_ok(deno_kernel, f"%%writefile {target}\nhello\n").text == f"Writing {target}"
    assert target.read_text() == "hello\n"


def test_deno_refuses_pip_before_the_kernel_sees_it(deno_kernel: Any) -> None:
    with pytest.raises(MagicError, match='import chalk from "npm:chalk@5"'):
        deno_kernel.run("%pip install chalk")


def test_prelude_is_plain_code_for_each_language() -> None:
    python = prelude("python")
    compile(python, "<prelude>", "exec")  # plain Python: no magics, no IPython syntax
    assert "<tether-prelude>" in python
    assert prelude("javascript").startswith("(0, eval)(")
    assert "tether-prelude.js" in prelude("typescript")
    assert io.StringIO(python).read().count("\n") == 1  # one statement, nothing left behind
