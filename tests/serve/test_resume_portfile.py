"""The state dir a restarted server resumes from holds more than port files: `reap_stale`
(every runtime's start) reads and removes port files only, by their name and record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tether.host.portfile import port_files, reap_stale


def dead_host(port: int) -> dict[str, object]:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return {"admin_port": port, "host_pid": gone.pid, "host_create_time": 1.0}


def test_only_port_files_are_reaped_and_nothing_else_in_the_state_dir_is_read(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "23456.json").write_text(json.dumps(dead_host(23456)))  # a dead host's: reaped
    others = {
        "notes.json": {},  # a user's file, a JSON object with no host in it
        "serve-conversations": {"c-AAAAAAAAAAAAAAAA": {"workdir": "app"}},
        "07777.json": dead_host(7777),  # not a port's name (a leading zero)
        "99999.json": dead_host(99999),  # no such port
        "24000.json": dead_host(1),  # its record is another port's
    }
    for name, record in others.items():
        (state / name).write_text(json.dumps(record))
    (state / "serve-runs").mkdir(mode=0o700)
    (state / "serve-runs" / "c-AAAAAAAAAAAAAAAA.state").write_text("{}")
    assert [p.name for p in port_files(state)] == ["23456.json", "24000.json"]
    assert reap_stale(state) == [23456]
    assert not (state / "23456.json").exists()
    assert sorted(p.name for p in state.iterdir()) == sorted([*others, "serve-runs"])
    assert (state / "serve-runs" / "c-AAAAAAAAAAAAAAAA.state").read_text() == "{}"
