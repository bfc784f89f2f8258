"""The `tether` command: tools, call, status, demo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tether.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_tools_lists_harness(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tools on the default surface")
    assert "  read " in out and "  apply_patch " in out and "ask_user" not in out


def test_tools_plan_hides_write(capsys: pytest.CaptureFixture[str]) -> None:
    main(["tools", "--surface", "plan"])
    out = capsys.readouterr().out
    assert "  read " in out and "  write " not in out


def test_tools_all_shows_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    main(["tools", "--surface", "readonly", "--all"])
    out = capsys.readouterr().out
    assert "absent: tier write is hidden on the readonly surface" in out


def test_tools_json_formats(capsys: pytest.CaptureFixture[str]) -> None:
    main(["tools", "--json", "--format", "anthropic", "--questions"])
    declared = json.loads(capsys.readouterr().out)
    assert {"read", "ask_user"} <= {d["name"] for d in declared}
    assert all("input_schema" in d for d in declared)


def test_call_ok(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", "--workdir", str(workdir), "read", '{"path": "README.md"}']) == 0
    assert capsys.readouterr().out == "     1\t# demo\n"


def test_call_error_exits_1(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", "--workdir", str(workdir), "read", '{"path": "/etc/passwd"}']) == 1
    assert "refused" in capsys.readouterr().out


def test_call_json(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(
        ["call", "--workdir", str(workdir), "--json", "write", '{"path": "a.txt", "content": "x"}']
    )
    out = json.loads(capsys.readouterr().out)
    assert out["is_error"] is False and out["data"]["written"] == ["a.txt"]


def test_call_plan_surface_refuses_write(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "call",
            "--workdir",
            str(workdir),
            "--surface",
            "plan",
            "write",
            '{"path": "a", "content": ""}',
        ]
    )
    assert code == 1 and "refused: write is a write-tier tool" in capsys.readouterr().out


def test_call_bad_json(workdir: Path) -> None:
    with pytest.raises(SystemExit, match="the arguments are not valid JSON"):
        main(["call", "--workdir", str(workdir), "read", "{path: x}"])


def test_call_non_object_json(workdir: Path) -> None:
    with pytest.raises(SystemExit, match="must be a JSON object"):
        main(["call", "--workdir", str(workdir), "read", "[1]"])


def test_call_bad_workdir(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="is not a directory"):
        main(["call", "--workdir", str(tmp_path / "nope"), "read", "{}"])


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: tether" in capsys.readouterr().out


def test_exit_code_through_a_process(workdir: Path) -> None:
    cmd = [sys.executable, "-m", "tether.cli", "call", "--workdir", str(workdir), "read"]
    ok = subprocess.run(
        [*cmd, '{"path": "README.md"}'], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    bad = subprocess.run(
        [*cmd, '{"path": "missing"}'], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (ok.returncode, bad.returncode) == (0, 1)
    assert bad.stdout.startswith("no such file: 'missing'")


def test_call_starts_a_runtime_when_the_tool_needs_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tether_state_dir: Path
) -> None:
    from tether.tools.registry import Registry

    if Registry.default().get("lsp") is None:
        pytest.skip("the lsp family is not in this tree")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert main(["call", "--workdir", str(tmp_path), "lsp", '{"action": "status"}']) == 0
    assert "basedpyright" in capsys.readouterr().out


def test_status_of_a_running_runtime(runtime: object, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--port", str(runtime.admin_port)]) == 0  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert out.startswith("tether runtime on 127.0.0.1:") and "└── runs  [ready]" in out


def test_status_nothing_listening(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--port", "1"]) == 1
    captured = capsys.readouterr()
    assert "nothing listens on 127.0.0.1:1" in captured.out + captured.err
