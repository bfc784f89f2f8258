"""The serve config as validated data: each bad value named, with what to write instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.serve.config import ConfigError, load


def config_file(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "serve-config"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("data", "pairs", "error"),
    [
        ({}, [], "no workdirs to serve: pass --workdir NAME=DIR"),
        ({}, ["app"], "--workdir takes NAME=DIR, e.g. app=/srv/app; got 'app'"),
        ({}, ["../x=/tmp"], "workdir name '../x' is not a plain name"),
        ({}, ["app=/nope"], "workdir 'app': '/nope' is not a directory"),
        ({"workdirs": {"a": {"path": "/tmp", "place": "moon"}}}, [], "unknown place 'moon'"),
        ({"workdirs": {"a": {"path": "/tmp", "surface": "x"}}}, [], "surface 'x' is not one of"),
        ({"workdirs": {"a": {"path": "/tmp", "approval": "ask"}}}, [], "approval is a map"),
        ({"workdirs": {"a": {"path": "/tmp", "approval": {"write": "maybe"}}}}, [], "'maybe'"),
        ({"workdirs": {"a": "/tmp"}, "prot": 1}, [], "unknown keys ['prot']; the keys are"),
        ({"workdirs": {"a": "/tmp"}, "max_conversations": 0}, [], "max_conversations must be"),
        ([1], [], "the top level must be a JSON object"),
    ],
)
def test_a_bad_config_is_refused_saying_what_to_write(
    tmp_path: Path, data: object, pairs: list[str], error: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load(config_file(tmp_path, data), pairs)
    assert error in str(refused.value)


def test_pairs_add_to_the_file_and_flags_override_it(tmp_path: Path) -> None:
    data = {"workdirs": {"a": {"path": str(tmp_path), "place": "sandbox"}}, "port": 1}
    config = load(config_file(tmp_path, data), [f"b={tmp_path}"], port=0, grace=None)
    assert sorted(config.workdirs) == ["a", "b"] and config.port == 0 and config.grace == 20
    assert config.workdir("a").place == "sandbox" and config.workdir("b").place == "host"
    with pytest.raises(ConfigError, match="no workdir 'c' on this server; it serves a, b"):
        config.workdir("c")
