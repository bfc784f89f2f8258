"""A request past its budget is cancelled with `$/cancelRequest` (the LSP's own way) on the
servers without basedpyright's cancellation file, and that frees the shared server.

typescript-language-server forwards the cancel to tsserver (its cancellation pipe), which
checks it between files: a `references` over 12000 files (~11 s whole here) stops at the
budget, and the hover another conversation sent behind it is answered then, not after the
whole search (without the cancel message, that hover waits past its own budget: checked).
clangd answers a cancelled request at once and serves other files meanwhile (a worker per
file), so its test shows no restart and no waiting, and would pass without the cancel too;
the parse the cancelled request waited on goes on, as it is the file's own AST (measured:
~0.3 of a core for the rest of its ~30 s). gopls serves requests concurrently
and stops a cancelled one (no CPU right after it); no warm gopls request could be made
slow enough here for a timing test that does not flake, so it has none."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.lsp.lsp_support import (
    health_nodes,
    hover,
    in_background,
    kinds,
    need,
    server_status,
    timed,
)
from tether.call_scope import CallScope

pytestmark = pytest.mark.slow
_ids = itertools.count()
BUDGET = 2.0
REFERENCES_PER_FILE = 50


def _slow_one_cancelled_while_others_answer(rt: Any, root: Path, slow: Any, cheap: Any) -> None:
    """`slow(run_a)` runs past the budget while conversation b asks `cheap(run_b)`: the
    slow one fails at its budget, saying it was cancelled; b's answers come at once after
    (within the budget and a margin: not after the slow request's whole time); the server
    was not restarted for it."""
    a = rt.open_run(f"slow-{next(_ids)}", workdir=str(root))
    b = rt.open_run(f"cheap-{next(_ids)}", workdir=str(root))
    wait_until(lambda: not cheap(b).is_error, timeout=120, interval=0.2)  # loaded, analysed
    pid = server_status(b)["pid"]
    thread, box = in_background(slow, a)
    wait_until(
        lambda: any(n["extra"].get("pending_requests") for n in health_nodes(rt)), timeout=20
    )
    # b's first call queues behind a's search. Sent 3/4 into a's budget, its own budget
    # outlasts a's cancel by BUDGET/2 s: tsserver's time to see the cancel between files.
    # (Sent at once, it had only the poll's few ms: on a loaded CI machine it failed at
    # its own budget while tsserver was still finishing the file it was in.)
    time.sleep(0.75 * BUDGET)  # when the probe is sent, not a wait for a state
    answers = [timed(cheap, b) for _ in range(3)]
    thread.join(BUDGET + 30)
    assert box, "the slow request never returned"
    r, took = box[0]
    assert r.is_error and f"within {BUDGET:g} s, the budget of one request" in r.text, r.text
    assert took < BUDGET + 4, took
    assert all(not res.is_error for res, _ in answers), [res.text for res, _ in answers]
    assert answers[0][1] < BUDGET, answers  # freed by the cancel, within its own budget
    st = server_status(b)
    assert st["pid"] == pid and st["restarts"] == 0, st  # cancelled, not restarted
    assert st["cancelled_requests"] >= 1, st


def references_project(root: Path) -> Path:
    """A TypeScript project where `references` of `hello` (src/a.ts line 1) takes ~11 s:
    12000 files that each call it REFERENCES_PER_FILE times. tsserver checks the cancel
    between files, and the whole search takes far longer than the budget even on a quiet,
    fast machine (with one reference per file it took 1.7 s there, inside the budget; with
    50, 13 s here). Also tests/serve/test_cancel_and_drain.py's over MCP."""
    (root / "src").mkdir(parents=True)
    (root / "package.json").write_text('{"name": "p", "private": true}\n')
    (root / "tsconfig.json").write_text(
        '{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2020"}, '
        '"include": ["src"]}\n'
    )
    (root / "src" / "a.ts").write_text(
        "export function hello(x: number): number {\n  return x;\n}\n"
    )
    calls = ", ".join(f"hello({j})" for j in range(REFERENCES_PER_FILE))
    for i in range(12000):
        (root / "src" / f"f{i}.ts").write_text(
            f"import {{ hello }} from './a';\nexport const v{i} = [{calls}];\n"
        )
    return root.resolve()


@need("typescript-language-server", "tsc")
def test_typescript_stops_a_cancelled_search_and_answers_the_next_call(
    runtime_factory: Any, tmp_path: Path
) -> None:
    root = references_project(tmp_path / "ts")
    rt = runtime_factory(kinds=kinds(request_budget=BUDGET))
    _slow_one_cancelled_while_others_answer(
        rt,
        root.resolve(),
        lambda run: run.call(
            "lsp", {"action": "references", "file": "src/a.ts", "line": 1, "symbol": "hello"}
        ),
        lambda run: hover(run, "src/a.ts", 1, "hello"),
    )
    _caller_cancels_and_the_server_is_free(rt, root.resolve())


def _caller_cancels_and_the_server_is_free(rt: Any, root: Path) -> None:
    """A caller that gives up (its CallScope cancelled, as an MCP cancel does) before the
    budget: the call ends at once saying so, the server hears `$/cancelRequest`, and another
    conversation's hover is answered within 2 s of the cancel."""
    a = rt.open_run(f"gives-up-{next(_ids)}", workdir=str(root))
    b = rt.open_run(f"next-{next(_ids)}", workdir=str(root))
    before = server_status(b)["cancelled_requests"]
    scope = CallScope.start(timeout=60)
    references = {"action": "references", "file": "src/a.ts", "line": 1, "symbol": "hello"}
    thread, box = in_background(lambda: a.call("lsp", references, scope))
    wait_until(
        lambda: any(n["extra"].get("pending_requests") for n in health_nodes(rt)), timeout=20
    )
    cancelled_at = time.monotonic()
    scope.cancel("the client cancelled")
    thread.join(10)
    assert box and box[0][0].is_error and "cancelled" in box[0][0].text, box
    answer, _ = timed(hover, b, "src/a.ts", 1, "hello")
    assert not answer.is_error, answer.text
    assert time.monotonic() - cancelled_at < 2.0 + 0.5, "the server was still busy"
    assert server_status(b)["cancelled_requests"] == before + 1


@need("clangd")
def test_clangd_answers_a_cancelled_request_and_serves_other_files(
    runtime_factory: Any, tmp_path: Path
) -> None:
    root = tmp_path / "c"
    root.mkdir()
    # a constant clang evaluates for tens of seconds while it parses the file
    (root / "compile_flags.txt").write_text("-std=c++17\n-fconstexpr-steps=2147483647\n")
    (root / "slow.cpp").write_text(
        "constexpr long f() { long s = 0; for (long i = 0; i < 100000000L; i++) s += i % 7;"
        " return s; }\nconstexpr long big = f();\nlong use() { return big; }\n"
    )
    (root / "a.cpp").write_text("int hello(int x) {\n  return x;\n}\n")
    rt = runtime_factory(kinds=kinds(request_budget=BUDGET))
    _slow_one_cancelled_while_others_answer(
        rt,
        root.resolve(),
        lambda run: hover(run, "slow.cpp", 3, "big"),
        lambda run: hover(run, "a.cpp", 1, "hello"),
    )
