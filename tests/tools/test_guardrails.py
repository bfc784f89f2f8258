"""Workspace confinement, protected paths and the approval policy."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from tether.questions import ALLOW, DENY, Answer, CardKind
from tether.run import Run
from tether.tools.guardrails import (
    Approval,
    Confinement,
    GuardrailError,
    decide,
    make_policy,
)
from tether.tools.spec import Tier

from .conftest import KindsRuntime, ScriptedPort

# ---- confinement, directly ----------------------------------------------------------------


@pytest.fixture
def conf(workdir: Path) -> Confinement:
    return Confinement.build(workdir)


def _refusal(conf: Confinement, rel: str) -> str:
    with pytest.raises(GuardrailError) as e:
        conf.resolve(rel)
    return e.value.message


def test_relative_inside(conf: Confinement, workdir: Path) -> None:
    assert conf.resolve("src/app.py") == workdir.resolve() / "src/app.py"


def test_dotdot_inside_is_fine(conf: Confinement, workdir: Path) -> None:
    assert conf.resolve("src/../README.md") == workdir.resolve() / "README.md"


def test_absolute_inside_is_fine(conf: Confinement, workdir: Path) -> None:
    assert conf.resolve(str(workdir / "README.md")) == workdir.resolve() / "README.md"


def test_absolute_outside(conf: Confinement) -> None:
    assert "'/etc/passwd' is an absolute path outside the workspace" in _refusal(
        conf, "/etc/passwd"
    )


def test_dotdot_escape(conf: Confinement) -> None:
    assert "climbs out of the workspace with '..'" in _refusal(conf, "src/../../x")


def test_home_escape(conf: Confinement) -> None:
    assert "outside the workspace" in _refusal(conf, "~/.ssh/id_rsa")


def test_symlink_escape(conf: Confinement, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "key").write_text("k")
    os.symlink(outside, workdir / "link")
    msg = _refusal(conf, "link/key")
    assert "leads out of the workspace through a symlink" in msg and str(outside) in msg


def test_symlink_inside_is_fine(conf: Confinement, workdir: Path) -> None:
    os.symlink(workdir / "src", workdir / "alias")
    assert conf.resolve("alias/app.py") == workdir.resolve() / "src/app.py"


def test_git_protected(conf: Confinement) -> None:
    assert "protected path '.git/'" in _refusal(conf, ".git/config")


def test_git_itself_protected(conf: Confinement) -> None:
    assert "protected path '.git/'" in _refusal(conf, ".git")


def test_nested_git_protected(conf: Confinement) -> None:
    assert "protected path '.git/'" in _refusal(conf, "vendor/lib/.git/HEAD")


def test_symlink_to_git_protected(conf: Confinement, workdir: Path) -> None:
    os.symlink(workdir / ".git", workdir / "innocent")
    assert "protected path '.git/'" in _refusal(conf, "innocent/config")


def test_gitignore_not_protected(conf: Confinement, workdir: Path) -> None:
    assert conf.resolve(".gitignore") == workdir.resolve() / ".gitignore"


def test_extra_root_allows(workdir: Path, tmp_path: Path) -> None:
    extra = tmp_path / "shared"
    extra.mkdir()
    conf = Confinement.build(workdir, extra_roots=[extra])
    assert conf.resolve(str(extra / "lib.py")) == extra.resolve() / "lib.py"
    assert conf.resolve("../shared/lib.py") == extra.resolve() / "lib.py"


def test_custom_protected_prefix(workdir: Path) -> None:
    conf = Confinement.build(workdir, protected=[".git", "secrets/prod"])
    assert "protected path 'secrets/prod/'" in _refusal(conf, "secrets/prod/db.key")
    assert conf.resolve("secrets/dev.key") == workdir.resolve() / "secrets/dev.key"


def test_empty_and_nul(conf: Confinement) -> None:
    assert "is empty" in _refusal(conf, "")
    assert "NUL" in _refusal(conf, "a\x00b")


# ---- confinement through the pipeline, by every tool that takes a path ---------------------


@pytest.mark.parametrize(
    "tool,args",
    [
        ("read", {"path": "/etc/passwd"}),
        ("read", {"path": "../../etc/passwd"}),
        ("read", {"path": ".git/config"}),
        ("write", {"path": "/tmp/tether-escape.txt", "content": "x"}),
        ("write", {"path": "../escape.txt", "content": "x"}),
        ("write", {"path": ".git/hooks/pre-commit", "content": "x"}),
        ("edit", {"path": ".git/config", "old_string": "core", "new_string": "x"}),
        ("edit", {"path": "/etc/hosts", "old_string": "a", "new_string": "b"}),
    ],
)
def test_pipeline_refuses_escapes(run: Run, workdir: Path, tool: str, args: dict) -> None:
    res = run.call(tool, args)
    assert res.is_error and res.text.startswith("refused: `path`"), res.text
    assert not Path("/tmp/tether-escape.txt").exists()
    assert not (workdir.parent / "escape.txt").exists()
    assert (workdir / ".git/config").read_text() == "[core]\n"


def test_pipeline_symlink_escape_on_write(run: Run, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "out"
    outside.mkdir()
    os.symlink(outside, workdir / "out")
    res = run.call("write", {"path": "out/x.txt", "content": "x"})
    assert res.is_error and "through a symlink" in res.text
    assert not (outside / "x.txt").exists()


def test_run_extra_roots(workdir: Path, tmp_path: Path) -> None:
    extra = tmp_path / "docs"
    extra.mkdir()
    (extra / "guide.md").write_text("hello\n")
    with Run(workdir=workdir, extra_roots=[extra]) as r:
        assert r.call("read", {"path": str(extra / "guide.md")}).text == "     1\thello"
    with Run(workdir=workdir) as r:
        assert r.call("read", {"path": str(extra / "guide.md")}).is_error


# ---- approval -----------------------------------------------------------------------------


def test_make_policy_accepts_strings() -> None:
    assert make_policy({"write": "ask", Tier.EXEC: Approval.DENY}) == {
        Tier.WRITE: Approval.ASK,
        Tier.EXEC: Approval.DENY,
    }


def test_make_policy_bad_tier() -> None:
    with pytest.raises(ValueError, match=r"unknown tier 'admin' \(valid: read, write, exec\)"):
        make_policy({"admin": "allow"})


def test_make_policy_bad_decision() -> None:
    with pytest.raises(
        ValueError, match=r"has unknown decision 'maybe' \(valid: allow, ask, deny\)"
    ):
        make_policy({"write": "maybe"})


def test_no_policy_allows_every_tier() -> None:
    assert {decide(None, t) for t in Tier} == {Approval.ALLOW}


def test_unmentioned_tier_allowed() -> None:
    assert decide({Tier.WRITE: Approval.DENY}, Tier.READ) is Approval.ALLOW


def test_deny(workdir: Path) -> None:
    with Run(workdir=workdir, approval={"write": "deny"}) as r:
        res = r.call("write", {"path": "x.txt", "content": "x"})
        assert res.is_error and "refused by the host's policy: write-tier tools" in res.text
        assert not (workdir / "x.txt").exists()
        assert not r.call("read", {"path": "README.md"}).is_error


def test_ask_without_port_fails_closed(workdir: Path) -> None:
    with Run(workdir=workdir, approval={"write": "ask"}) as r:
        res = r.call("write", {"path": "x.txt", "content": "x"})
    assert res.is_error and "no approver is connected" in res.text
    assert not (workdir / "x.txt").exists()


def test_ask_without_human_fails_closed(workdir: Path) -> None:
    port = ScriptedPort(answer=Answer.answered([ALLOW]), human=False)
    with Run(workdir=workdir, approval={"write": "ask"}, question_port=port) as r:
        res = r.call("write", {"path": "x.txt", "content": "x"})
    assert res.is_error and "no human is connected" in res.text
    assert port.cards == [] and not (workdir / "x.txt").exists()


def test_ask_allowed(workdir: Path) -> None:
    port = ScriptedPort(answer=Answer.answered([ALLOW]))
    with Run(workdir=workdir, approval={"write": "ask"}, question_port=port) as r:
        res = r.call("write", {"path": "x.txt", "content": "x"})
    assert not res.is_error and (workdir / "x.txt").read_text() == "x"
    card = port.cards[0]
    assert card.kind is CardKind.PERMISSION and card.tool == "write"
    assert card.question == "May I run write?" and [o.label for o in card.options] == [ALLOW, DENY]
    assert card.arguments == {"path": "x.txt", "content": "x"}


@pytest.mark.parametrize(
    "answer,why",
    [
        (Answer.answered([DENY]), "the user denied it"),
        (Answer.skipped(), "the user skipped the permission card"),
        (Answer.timed_out(), "nobody answered the permission card in time"),
    ],
)
def test_ask_not_approved(workdir: Path, answer: Answer, why: str) -> None:
    port = ScriptedPort(answer=answer)
    with Run(workdir=workdir, approval={"write": "ask"}, question_port=port) as r:
        res = r.call("write", {"path": "x.txt", "content": "x"})
    assert res.is_error and f"refused: write was not approved: {why}" in res.text
    assert not (workdir / "x.txt").exists()


def test_ask_port_that_hangs_times_out(workdir: Path) -> None:
    never = threading.Event()
    port = ScriptedPort(answer=Answer.answered([ALLOW]), block=never)
    port.ask = lambda card, timeout: never.wait(60) or Answer.answered([ALLOW])  # type: ignore[method-assign,assignment,return-value]
    with Run(
        workdir=workdir, approval={"write": "ask"}, question_port=port, approval_timeout=0.2
    ) as r:
        res = r.call("write", {"path": "x.txt", "content": "x"})
    never.set()
    assert res.is_error and "nobody answered the permission card in time" in res.text


def test_ask_port_that_raises(workdir: Path) -> None:
    port = ScriptedPort()

    def boom(card, timeout):  # noqa: ANN001
        raise RuntimeError("socket closed")

    port.ask = boom  # type: ignore[method-assign]
    with Run(workdir=workdir, approval={"write": "ask"}, question_port=port) as r:
        res = r.call("write", {"path": "x.txt", "content": "x"})
    assert res.is_error and "the question port failed: RuntimeError('socket closed')" in res.text


def test_read_tier_not_asked(workdir: Path) -> None:
    port = ScriptedPort(answer=Answer.answered([DENY]))
    with Run(workdir=workdir, approval={"write": "ask", "exec": "ask"}, question_port=port) as r:
        assert not r.call("read", {"path": "README.md"}).is_error
    assert port.cards == []


# ---- FIFOs, sockets and devices: refused by every tool, before any open --------------------


def _special(kind: str, path: Path) -> str:
    """Make a special file of `kind` at `path`; returns how the refusal names it."""
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO (named pipe)"
    if kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()  # the socket file stays
        return "a socket"
    try:  # /dev/zero's numbers: a read that never ends
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    return "a character device"


SPECIAL_CALLS = [
    ("read", {"path": "odd.py"}),
    ("write", {"path": "odd.py", "content": "x = 1\n"}),
    ("edit", {"path": "odd.py", "old_string": "a", "new_string": "b"}),
    ("apply_patch", {"patch": "--- a/odd.py\n+++ b/odd.py\n@@ -1 +1 @@\n-a\n+b\n"}),
    ("lsp", {"action": "hover", "file": "odd.py", "line": 1, "symbol": "x"}),
    ("lsp", {"action": "diagnostics", "file": "odd.py"}),
    ("lsp", {"action": "symbols", "file": "odd.py"}),
    ("lsp_rename", {"file": "odd.py", "line": 1, "symbol": "x", "new_name": "y"}),
    ("ast_grep", {"pattern": "x", "path": "odd.py"}),
    ("ast_edit", {"pattern": "x", "rewrite": "y", "path": "odd.py"}),
]


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
@pytest.mark.parametrize("tool,args", SPECIAL_CALLS, ids=lambda v: v if isinstance(v, str) else "")
def test_special_files_refused_by_every_tool(
    workdir: Path, kind: str, tool: str, args: dict
) -> None:
    """The guardrail refuses by a stat, so nothing opens the file: a FIFO with no writer
    would block the open forever (the call returning at all shows it was not opened), and
    a write would replace the FIFO with a regular file."""
    what = _special(kind, workdir / "odd.py")
    # the language-server and parser tools are on the surface; nothing may reach them
    with Run(runtime=KindsRuntime({"language_server", "parser"}), workdir=workdir) as run:
        box: list = []
        t = threading.Thread(target=lambda: box.append(run.call(tool, args)), daemon=True)
        t.start()
        t.join(10)
        if not box and kind == "fifo":
            with open(workdir / "odd.py", "w"):  # unblock the reader before failing
                pass
        assert box, f"{tool} blocked on {what}"
    res = box[0]
    assert res.is_error, res.text
    arg = "path" if "path" in args else "file" if "file" in args else "path"
    assert f"`{arg}` 'odd.py' is {what}, not a regular file" in res.text, res.text
    mode = os.lstat(workdir / "odd.py").st_mode
    assert not stat.S_ISREG(mode), "the special file was replaced"


def test_confinement_refuses_special_files_not_directories_or_missing(workdir: Path) -> None:
    os.mkfifo(workdir / "src" / "pipe.py")
    conf = Confinement.build(workdir)
    assert conf.resolve("src") == workdir.resolve() / "src"  # a directory is fine
    assert "is a FIFO" in _refusal(conf, "src/pipe.py")
    assert conf.resolve("src/new.py") == workdir.resolve() / "src/new.py"  # missing is fine


def test_a_search_skips_a_fifo_in_its_directory(runtime: Any, workdir: Path) -> None:
    os.mkfifo(workdir / "src" / "pipe.py")
    run = runtime.open_run("fifo-dir", workdir=str(workdir))
    box: list = []
    t = threading.Thread(
        target=lambda: box.append(
            run.call("ast_grep", {"pattern": "retries = $X", "language": "python"})
        ),
        daemon=True,
    )
    t.start()
    t.join(30)
    assert box, "ast_grep blocked on a FIFO in the searched directory"
    assert not box[0].is_error and "src/app.py:3" in box[0].text, box[0].text
