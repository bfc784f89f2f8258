"""The DAP client state (tether.debug.dap) and the adapter table, without an adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.debug import adapters
from tether.debug.dap import AdapterRequest, DapClient, Event, Response
from tether.protocol import FramingError, encode


def test_responses_match_their_request_and_late_ones_are_dropped() -> None:
    client = DapClient()
    seq, data = client.request("threads")
    assert json.loads(data.split(b"\r\n\r\n", 1)[1]) == {
        "seq": seq,
        "type": "request",
        "command": "threads",
    }
    late, _ = client.request("stackTrace", {"threadId": 1})
    client.forget(late)
    frames = [
        encode({"type": "response", "request_seq": late, "success": True, "command": "stackTrace"}),
        encode({"type": "event", "event": "stopped", "body": {"threadId": 1}}),
        encode({"type": "response", "request_seq": seq, "success": True, "body": {"threads": []}}),
    ]
    blob = b"".join(frames)
    got = client.feed(blob[:7]) + client.feed(blob[7:])  # a frame split across reads
    assert got == [
        Event("stopped", {"threadId": 1}),
        Response(seq, "threads", True, "", {"threads": []}),
    ]
    assert client.late_responses == 1 and not client.pending


def test_an_adapter_request_gets_exactly_one_answer() -> None:
    client = DapClient()
    [req] = client.feed(encode({"type": "request", "seq": 7, "command": "runInTerminal"}))
    assert req == AdapterRequest(7, "runInTerminal", {})
    answer = json.loads(client.respond(req, False, message="no").split(b"\r\n\r\n", 1)[1])
    assert answer["request_seq"] == 7 and answer["success"] is False


def test_a_stream_that_is_not_dap_is_refused() -> None:
    with pytest.raises(FramingError):
        DapClient().feed(b"Content-Length: 5\r\n\r\nhello")


@pytest.mark.parametrize(
    ("name", "adapter"),
    [("app.py", "debugpy"), ("main.go", "delve"), ("lib.dart", "dart"), ("notes.txt", None)],
)
def test_the_adapter_of_a_program(tmp_path: Path, name: str, adapter: str | None) -> None:
    (tmp_path / name).write_text("")
    row = adapters.adapter_for(tmp_path / name)
    assert (row.name if row else None) == adapter


def test_a_go_package_directory_and_an_executable(tmp_path: Path) -> None:
    (tmp_path / "main.go").write_text("package main\n")
    assert adapters.adapter_for(tmp_path).name == "delve"  # type: ignore[union-attr]
    assert adapters.delve_mode(tmp_path) == "debug"
    binary = tmp_path / "prog"
    binary.write_text("")
    binary.chmod(0o755)
    assert adapters.adapter_for(binary).name == "lldb"  # type: ignore[union-attr]
    assert adapters.delve_mode(binary) == "exec"


def test_the_table_refuses_a_bad_row() -> None:
    with pytest.raises(ValueError, match="transport"):
        adapters.AdapterRow("x", ("m",), ("b",), (), (".x",), "get it", transport="pipe")


def test_attach_arguments_per_adapter_and_what_each_refuses() -> None:
    by = adapters.BY_NAME
    assert adapters.attach_config(by["delve"], 4000, None) == {
        "mode": "remote",
        "stopOnEntry": False,
    }
    assert adapters.attach_config(by["delve"], None, 42) == {"mode": "local", "processId": 42}
    assert adapters.attach_config(by["lldb"], 4000, None)["gdb-remote-port"] == 4000
    with pytest.raises(ValueError, match="debugpy cannot attach by pid.*--listen"):
        adapters.attach_config(by["debugpy"], None, 42)
    with pytest.raises(ValueError, match="dart cannot attach by pid.*vm-service"):
        adapters.attach_config(by["dart"], None, 42)
    with pytest.raises(ValueError, match="port_attach"):
        adapters.AdapterRow("x", ("m",), ("b",), (), (".x",), "get it", port_attach="ssh")
    with pytest.raises(ValueError, match="attach_help"):
        adapters.AdapterRow("x", ("m",), ("b",), (), (".x",), "get it", pid_attach=True)
