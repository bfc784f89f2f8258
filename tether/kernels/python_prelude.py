"""Helpers that run inside the Python kernel: what rewritten IPython idioms call.

tether never imports this module. `prelude("python")` sends its source to the kernel,
which runs it once at start in a namespace of its own under the file name
`<tether-prelude>` (so a traceback can drop these frames), then `install` copies the
`_tether_*` helpers into the user's namespace: the prefix keeps them clear of user names,
and everything else here (imports, state) stays out of sight.

Also installed: matplotlib's inline backend (figures come back as PNG), and a
`text/markdown` formatter that shows a pandas DataFrame or Series as a table capped in
rows, columns and cell width, saying what it left out.

Stdlib only, plus IPython when it is there. Shell commands run in their own session with
stdin closed (nothing can wait on a prompt), their output streamed as it comes; an
interrupt kills the command's whole process group.
"""

from __future__ import annotations

import atexit
import codecs
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import math
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import timeit
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # (types only: the kernel runs none of this, and starts no slower for it)
    from typing import IO, TextIO, TypedDict, TypeVar

    from IPython.core.interactiveshell import InteractiveShell

    class _State(TypedDict):
        user_ns: dict[str, object]  # the user's namespace: whatever the cells made
        hidden: frozenset[str]  # its names at start (%who leaves them out)
        oldpwd: str | None  # for %cd -
        groups: set[int]  # process groups `!cmd &` left running

    _T = TypeVar("_T")

_STATE: _State = {"user_ns": {}, "hidden": frozenset(), "oldpwd": None, "groups": set()}
_FIELD = re.compile(r"\$\$|\{\{|\}\}|\{([^{}]*)\}|\$([A-Za-z_]\w*)")
_QUIET_AFTER_EXIT = 0.1  # seconds of silence after the shell exits before leaving its pipes
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH", re.IGNORECASE)


def install(
    user_ns: dict[str, object], rows: int = 20, columns: int = 12, cell_chars: int = 40
) -> None:
    """Put the helpers into `user_ns` and set up figures and tables (once, at kernel start)."""
    helpers = {name: value for name, value in globals().items() if name.startswith("_tether_")}
    user_ns.update(helpers)
    _STATE["user_ns"], _STATE["hidden"] = user_ns, frozenset(user_ns)
    atexit.register(_kill_groups)
    _interleave_streams()
    _inline_figures()
    _register_tables(rows, columns, cell_chars)
    _release_held_off()
    _give_back_freed()


def _release_held_off() -> None:
    """Let a cell import what the kernel was started without (`launch.HELD_OFF`: a None in
    sys.modules makes an import fail; ipykernel has run without them by now)."""
    for name in ("jedi", "debugpy"):
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]


def _give_back_freed() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim): compiling
    this prelude leaves ~2 MiB freed but still resident in a kernel that then waits idle
    (a pool's spare). Elsewhere (another libc) nothing happens."""
    try:
        import ctypes  # (ipykernel has imported it already)

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


# ---- expansion of {expr} and $name, as IPython does it -------------------------------------


def _expand(text: str, frame: types.FrameType) -> str:
    """`text` with `{expr}` and `$name` replaced by their values in the caller's scope;
    a field that does not evaluate stays as written (`{print $1}` for awk, `$HOME`)."""

    def value(match: re.Match[str]) -> str:
        whole, expression, name = match.group(0), match.group(1), match.group(2)
        if whole in ("$$", "{{", "}}"):
            return whole[0]
        if name is not None:
            scope = {**frame.f_globals, **frame.f_locals}
            return str(scope[name]) if name in scope else whole
        try:
            return str(eval(expression, frame.f_globals, frame.f_locals))
        except Exception:
            return whole

    return _FIELD.sub(value, text)


# ---- shell commands ---------------------------------------------------------------------


def _tether_sh(command: str, shell: str | None = None, expand: bool = True) -> None:
    """`!command`: run it in a shell, its output streamed into the cell."""
    text = _expand(command, sys._getframe(1)) if expand else command
    code, _ = _run([_shell(shell), "-c", text])
    _exit_code(code)


def _tether_sh_lines(command: str) -> list[str]:
    """`x = !command`: its stdout as a list of lines (stderr still shown)."""
    code, out = _run([_shell(None), "-c", _expand(command, sys._getframe(1))], capture=True)
    _exit_code(code)
    return out.splitlines()


def _shell(name: str | None) -> str:
    if name == "sh":
        return "/bin/sh"
    return shutil.which("bash") or "/bin/sh"


def _exit_code(code: int) -> None:
    _STATE["user_ns"]["_exit_code"] = code
    if code:
        print(f"(exit status {code})", file=sys.stderr, flush=True)


def _run(
    argv: list[str], capture: bool = False, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run `argv` with stdin closed, streaming its output (stdout captured instead when
    asked); kill its process group if the cell is interrupted."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
    )
    _STATE["groups"].add(proc.pid)  # its own session: the group id is its pid
    captured: list[str] = []
    try:
        _pump(proc, captured if capture else None)
        return proc.wait(), "".join(captured)
    except BaseException:
        _kill_group(proc)
        raise


def _pump(proc: subprocess.Popen[bytes], captured: list[str] | None) -> None:
    """Copy the command's output as it comes until both pipes close - or, once the shell
    itself has exited, until they go quiet: a process it left in the background
    (`!server &`) holds them open, and the cell must not wait for it."""
    assert proc.stdout is not None and proc.stderr is not None
    sinks = {proc.stdout.fileno(): sys.stdout, proc.stderr.fileno(): sys.stderr}
    decoders = {fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in sinks}
    with selectors.DefaultSelector() as selector:
        for stream in (proc.stdout, proc.stderr):
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            ready = selector.select(_QUIET_AFTER_EXIT)
            if not ready and proc.poll() is not None:
                break
            for key, _ in ready:
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                text = decoders[key.fd].decode(data)
                if captured is not None and key.fd == proc.stdout.fileno():
                    captured.append(text)
                else:
                    sinks[key.fd].write(text)
                    sinks[key.fd].flush()
        still = {key.fileobj for key in selector.get_map().values()}
        left_open = [pipe for pipe in (proc.stdout, proc.stderr) if pipe in still]
    for pipe in (proc.stdout, proc.stderr):
        if pipe not in left_open:
            pipe.close()
    if left_open:
        print(
            "note: a background process still holds the command's output; what it writes "
            "from now on is discarded (redirect it to keep it: cmd > log.txt 2>&1 &)",
            file=sys.stderr,
            flush=True,
        )
        threading.Thread(target=_discard, args=(left_open,), daemon=True).start()


def _discard(pipes: list[IO[bytes]]) -> None:
    """Read a background process's pipes to their end so it never blocks on a full one."""
    for pipe in pipes:
        while os.read(pipe.fileno(), 65536):
            pass


def _kill_groups() -> None:
    """At kernel exit, whatever `!cmd &` left running goes with the kernel."""
    for group in _STATE["groups"]:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


# ---- %cd, %pwd, %env, %%writefile -------------------------------------------------------


def _one_path(text: str) -> str:
    """A path as typed: quoted the shell way, or bare (spaces and all, as IPython takes it)."""
    text = text.strip()
    if text[:1] in ("'", '"'):
        return shlex.split(text)[0]
    return text


def _tether_cd(where: str = "") -> None:
    text = _expand(where, sys._getframe(1)).strip()
    if text == "-":
        if _STATE["oldpwd"] is None:
            raise FileNotFoundError("%cd -: there is no previous directory yet")
        target = _STATE["oldpwd"]
    else:
        target = os.path.expanduser(_one_path(text) if text else "~")
    previous = os.getcwd()
    os.chdir(target)
    _STATE["oldpwd"] = previous
    print(os.getcwd())


def _tether_pwd() -> str:
    return os.getcwd()


def _tether_env(args: str = "") -> dict[str, str] | str | None:
    """`%env` lists (secrets hidden), `%env NAME` reads, `%env NAME=value` sets."""
    text = _expand(args, sys._getframe(1)).strip()
    if not text:
        return {k: ("<hidden>" if _SECRET.search(k) else v) for k, v in sorted(os.environ.items())}
    name, sep, value = text.partition("=")
    if not sep:
        name, _, value = text.partition(" ")
    name, value = name.strip(), value.strip()
    if not sep and not value:
        if name not in os.environ:
            raise KeyError(f"%env: environment variable {name!r} is not set")
        return os.environ[name]
    os.environ[name] = value
    print(f"env: {name}={value}")
    return None


def _tether_writefile(path: str, text: str, append: bool = False) -> None:
    target = os.path.expanduser(_one_path(_expand(path, sys._getframe(1))))
    existed = os.path.exists(target)
    with open(target, "a" if append else "w", encoding="utf-8") as handle:
        handle.write(text)
    verb = "Appending to" if append else ("Overwriting" if existed else "Writing")
    print(f"{verb} {target}")


# ---- %who, %who_ls, %whos ---------------------------------------------------------------


def _user_names(type_names: str) -> list[str]:
    wanted = set(type_names.split())
    names = []
    for name, value in _STATE["user_ns"].items():
        if name.startswith("_") or name in _STATE["hidden"]:
            continue
        if not wanted or type(value).__name__ in wanted:
            names.append(name)
    return sorted(names)


def _tether_who(types: str = "") -> None:
    names = _user_names(types)
    print("\t".join(names) if names else "Interactive namespace is empty.")


def _tether_who_ls(types: str = "") -> list[str]:
    return _user_names(types)


def _tether_whos(types: str = "") -> None:
    names = _user_names(types)
    if not names:
        print("Interactive namespace is empty.")
        return
    rows = [(n, type(_STATE["user_ns"][n]).__name__, _short(_STATE["user_ns"][n])) for n in names]
    width = max(len("Variable"), *(len(r[0]) for r in rows))
    kind = max(len("Type"), *(len(r[1]) for r in rows))
    print(f"{'Variable':<{width}}   {'Type':<{kind}}   Data/Info")
    print("-" * (width + kind + 18))
    for name, type_name, info in rows:
        print(f"{name:<{width}}   {type_name:<{kind}}   {info}")


def _short(value: object, limit: int = 60) -> str:
    try:
        text = repr(value).replace("\n", " ")
    except Exception as error:  # a broken __repr__ must not break %whos
        text = f"<repr failed: {error}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- %time, %%time, %timeit, %%timeit ---------------------------------------------------


def _duration(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


@contextmanager
def _tether_timer() -> Iterator[None]:
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        spent = _duration(time.perf_counter() - wall)
        print(f"Wall time: {spent} (CPU {_duration(time.process_time() - cpu)})")


def _tether_time(thunk: Callable[[], _T]) -> _T:
    with _tether_timer():
        return thunk()


def _tether_timeit(statement: str, setup: str = "pass", number: int = 0, repeat: int = 7) -> None:
    frame = sys._getframe(1)
    scope = frame.f_globals
    if frame.f_locals is not frame.f_globals:
        scope = {**frame.f_globals, **frame.f_locals}
    timer = timeit.Timer(statement, setup, globals=scope)
    if number == 0:
        number, _ = timer.autorange()
    runs = [total / number for total in timer.repeat(repeat, number)]
    import statistics  # (here, not at start: every kernel runs the prelude, few time)

    spread = statistics.stdev(runs) if len(runs) > 1 else 0.0
    print(
        f"{_duration(statistics.fmean(runs))} ± {_duration(spread)} per loop "
        f"(mean ± std. dev. of {repeat} runs, {number} loops each)"
    )


# ---- %pip --------------------------------------------------------------------------------


def _tether_pip(args: str) -> None:
    """pip of this kernel's own interpreter; then make the next import see the change."""
    argv = shlex.split(_expand(args, sys._getframe(1)))
    if not argv:
        raise ValueError("%pip needs a pip command, for example: %pip install requests")
    if argv[0] == "uninstall" and not {"-y", "--yes"} & set(argv):
        argv.insert(1, "--yes")  # stdin is closed: pip's confirmation prompt would fail
    before = _distributions()
    tops_before = _all_top_levels(before) if argv[0] == "uninstall" else {}
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_COLOR": "1"}
    code, _ = _run([sys.executable, "-m", "pip", *argv], env=env)
    importlib.invalidate_caches()
    _report_changes(before, _distributions(), tops_before)
    _STATE["user_ns"]["_exit_code"] = code
    if code:
        print(f"(pip exited with status {code})", file=sys.stderr, flush=True)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


Installed = dict[str, dict[str, importlib.metadata.Distribution]]  # name -> version -> it


def _distributions() -> Installed:
    """What is installed on sys.path; a name may have several versions (pip --target
    leaves the old one's metadata behind)."""
    found: Installed = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(_canonical(name), {}).setdefault(dist.version, dist)
    return found


def _top_levels(name: str, dist: importlib.metadata.Distribution) -> set[str]:
    """The importable top-level names a distribution installs."""
    try:
        listed = dist.read_text("top_level.txt")
        files = dist.files or []
    except OSError:
        listed, files = None, []
    if listed:
        return {line.strip() for line in listed.splitlines() if line.strip()}
    names = set()
    for file in files:
        first = file.parts[0]
        if first in ("..", "__pycache__") or first.endswith(
            (".dist-info", ".egg-info", ".data", ".pth")
        ):
            continue
        top = first.split(".")[0]
        if top.isidentifier():
            names.add(top)
    return names or {name.replace("-", "_")}


def _all_top_levels(installed: Installed) -> dict[str, set[str]]:
    tops: dict[str, set[str]] = {}
    for name, versions in installed.items():
        for dist in versions.values():
            tops.setdefault(name, set()).update(_top_levels(name, dist))
    return tops


def _report_changes(before: Installed, after: Installed, tops_before: dict[str, set[str]]) -> None:
    changed = sorted(
        n for n in before.keys() | after.keys() if set(before.get(n, ())) != set(after.get(n, ()))
    )
    if not changed:
        return
    print("note: pip changed " + ", ".join(_change(n, before, after) for n in changed))
    tops: set[str] = set()
    for name in changed:
        if name in after:
            tops |= _all_top_levels({name: after[name]})[name]
        else:
            tops |= tops_before.get(name, {name.replace("-", "_")})
    _forget_modules(tops)


def _change(name: str, before: Installed, after: Installed) -> str:
    old, new = set(before.get(name, ())), set(after.get(name, ()))
    if not old:
        return f"{name} {', '.join(sorted(new))} (new)"
    if not new:
        return f"{name} {', '.join(sorted(old))} (removed)"
    return f"{name} {', '.join(sorted(old - new) or sorted(old))} -> {', '.join(sorted(new - old) or sorted(new))}"


def _forget_modules(tops: set[str]) -> None:
    """Drop the changed packages' modules from sys.modules so the next import loads the
    new code - except those with compiled extensions loaded: an extension module cannot
    be loaded twice in one process (numpy refuses outright), so they need a restart."""
    loaded = {
        top: [m for m in list(sys.modules) if m == top or m.startswith(top + ".")] for top in tops
    }
    loaded = {top: mods for top, mods in loaded.items() if mods}
    compiled = sorted(top for top, mods in loaded.items() if any(_is_extension(m) for m in mods))
    pure = sorted(set(loaded) - set(compiled))
    dropped = [m for top in pure for m in loaded[top]]
    stale = sorted(
        name
        for name, value in _STATE["user_ns"].items()
        if isinstance(value, types.ModuleType)
        and value.__name__ in dropped
        and not name.startswith("_")
    )
    for module in dropped:
        del sys.modules[module]
    if dropped:
        print(
            f"note: dropped {len(dropped)} modules of {', '.join(pure)} from sys.modules: the next import loads the new version"
        )
    if compiled:
        print(
            f"note: {', '.join(compiled)} has compiled extensions loaded in this kernel, which cannot "
            "be reloaded: restart the kernel (eval with reset=true) to use the new version"
        )
    if stale:
        print(f"note: {', '.join(stale)} still refer to the old modules: import them again")


def _is_extension(module: str) -> bool:
    path = getattr(sys.modules.get(module), "__file__", None) or ""
    return path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


# ---- streams, figures and tables -----------------------------------------------------------------


def _interleave_streams() -> None:
    """ipykernel buffers stdout and stderr apart, each flushed on its own 0.2 s timer, so
    `print(a); print(b, file=sys.stderr); print(c)` arrives as "a c" then "b". Flushing
    the other stream whenever the writer switches keeps the order the cell wrote in."""
    if not all(type(s).__module__.startswith("ipykernel") for s in (sys.stdout, sys.stderr)):
        return
    last: list[TextIO | None] = [None]

    def ordered(stream: TextIO, other: TextIO) -> Callable[[str], int]:
        write = stream.write

        def write_in_order(text: str) -> int:
            if last[0] is other:
                other.flush()
            last[0] = stream
            return write(text)

        return write_in_order

    sys.stdout.write = ordered(sys.stdout, sys.stderr)  # type: ignore[method-assign]
    sys.stderr.write = ordered(sys.stderr, sys.stdout)  # type: ignore[method-assign]


def _inline_figures() -> None:
    """Figures come back as PNG: matplotlib's inline backend, chosen before matplotlib is
    first imported (cheaper than importing it now), or switched to if it already is."""
    if importlib.util.find_spec("matplotlib_inline") is None:
        return
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    shell = _ipython()
    if "matplotlib" in sys.modules and shell is not None:
        shell.run_line_magic("matplotlib", "inline")


def _ipython() -> InteractiveShell | None:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _register_tables(rows: int, columns: int, cell_chars: int) -> None:
    shell = _ipython()
    if shell is None or shell.display_formatter is None:  # (not in an IPython kernel)
        return
    markdown = shell.display_formatter.formatters["text/markdown"]

    def table(value: _Table) -> str:  # (a pandas DataFrame or Series)
        return _tether_markdown_table(value, rows, columns, cell_chars)

    # pandas 3 names its classes' module "pandas", earlier versions the defining module
    for module, name in (
        ("pandas", "DataFrame"), ("pandas.core.frame", "DataFrame"),
        ("pandas", "Series"), ("pandas.core.series", "Series"),
    ):  # fmt: skip
        markdown.for_type_by_name(module, name, table)


class _Labels(Protocol):  # (a pandas Index: what a table reads of it)
    names: Sequence[object]

    def __getitem__(self, position: int, /) -> object: ...


class _Cells(Protocol):  # (a frame's `iat`: a cell by its row and column positions)
    def __getitem__(self, at: tuple[int, int], /) -> object: ...


class _Table(Protocol):
    """What a markdown table reads of a pandas DataFrame or Series (pandas is untyped)."""

    ndim: int
    shape: tuple[int, ...]
    index: _Labels
    columns: _Labels
    iat: _Cells

    def to_frame(self) -> _Table: ...


def _tether_markdown_table(
    frame: _Table, rows: int = 20, columns: int = 12, cell_chars: int = 40
) -> str:  # (frame: a pandas DataFrame or Series)
    """A DataFrame (or Series) as a markdown table: the first and last rows and columns
    when it is bigger than `rows` x `columns`, with a line saying what was left out."""
    if frame.ndim == 1:
        frame = frame.to_frame()
    n_rows, n_columns = frame.shape
    picked_rows, picked_columns = _pick(n_rows, rows), _pick(n_columns, columns)
    index_name = ", ".join(str(n) for n in frame.index.names if n is not None)

    def cell(value: object) -> str:
        return _cell(value, cell_chars)

    header = [cell(index_name)] + [
        "…" if c is None else cell(_label(frame.columns[c])) for c in picked_columns
    ]
    lines = [_row(header), "|" + "|".join("---" for _ in header) + "|"]
    for r in picked_rows:
        if r is None:
            lines.append(_row(["…"] * len(header)))
            continue
        values = ["…" if c is None else cell(frame.iat[r, c]) for c in picked_columns]
        lines.append(_row([cell(_label(frame.index[r]))] + values))
    return "\n".join(lines) + "\n\n" + _shape_note(n_rows, n_columns, rows, columns)


def _pick(count: int, cap: int) -> list[int | None]:
    """Positions to show of `count`: all of them, or the first and last with None between."""
    if count <= cap:
        return list(range(count))
    tail = cap // 2
    head = cap - tail
    return [*range(head), None, *range(count - tail, count)]


def _shape_note(n_rows: int, n_columns: int, rows: int, columns: int) -> str:
    shown = []
    if n_rows > rows:
        shown.append(f"the first {rows - rows // 2} and last {rows // 2} rows")
    if n_columns > columns:
        shown.append(f"the first {columns - columns // 2} and last {columns // 2} columns")
    note = f"[{n_rows} rows × {n_columns} columns"
    return note + (f"; showing {' and '.join(shown)}]" if shown else "]")


def _label(value: object) -> object:
    return " / ".join(str(part) for part in value) if isinstance(value, tuple) else value


def _cell(value: object, limit: int) -> str:
    if isinstance(value, float):
        text = "NaN" if math.isnan(value) else f"{value:.6g}"
    else:
        text = str(value)
    text = text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


if (
    "_tether_install_into" in globals()
):  # sent by prelude(): install into the kernel's user namespace
    install(*globals()["_tether_install_into"])
