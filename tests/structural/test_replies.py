"""The parser and git kinds' typed replies: built by the actor, flat on the wire (the keys
they had before they were typed), read back checked by the host, records inside too."""

from __future__ import annotations

import pytest

from tether.messages.calls import Reply
from tether.messages.codec import decode, encode
from tether.messages.git_ops import FilesReply, ListFiles, read_files_reply
from tether.messages.nested import plain
from tether.messages.ops import OpError
from tether.messages.parser_ops import (
    Clear,
    DroppedReply,
    Edit,
    EditReply,
    Index,
    IndexReply,
    JobProgress,
    Match,
    ProposedFile,
    Search,
    SearchReply,
    Stats,
    StatsReply,
    Unindex,
    read_reply,
)

MATCH = Match("/w/a.py", 1, 1, 1, 7, "foo(1)", {"X": "1"})
STATS = StatsReply(
    files=2, trees=1, bytes=10, max_bytes=100, hits=3, misses=1, parses=1,
    jobs={"conv-1": 1},
    searched={"conv-1": [JobProgress(5, None, 12.5, False), JobProgress(3, 3, 11.0, True)]},
)  # fmt: skip
REPLIES = [
    SearchReply([MATCH], 4, 1, {"files": 2, "binary": 0}),
    EditReply([ProposedFile("/w/a.py", "ab12", b"bar(1)\n", 1, "")], 1),
    IndexReply(7),
    DroppedReply(3),
    STATS,
]


def _over_the_wire(payload: dict[str, object]) -> dict[str, object]:
    back = decode(encode(Reply(call_id="c1", ok=True, payload=payload)))
    assert isinstance(back, Reply)
    return back.payload


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: type(r).__name__)
def test_a_reply_comes_back_as_it_was_sent(reply: object) -> None:
    payload = _over_the_wire(plain(reply))  # type: ignore[arg-type]
    assert read_reply(type(reply), payload) == reply  # type: ignore[arg-type]


def test_each_op_declares_its_reply() -> None:
    declared = {
        Search: SearchReply, Edit: EditReply, Index: IndexReply,
        Unindex: DroppedReply, Stats: StatsReply, Clear: DroppedReply,
    }  # fmt: skip
    assert {op: op.reply for op in declared} == declared


def test_the_wire_keeps_the_keys_readers_of_the_payload_know() -> None:
    payload = plain(STATS)
    assert payload["parses"] == 1 and payload["searched"] == {
        "conv-1": [
            {"files": 5, "of": None, "started": 12.5, "done": False},
            {"files": 3, "of": 3, "started": 11.0, "done": True},
        ]
    }
    assert plain(SearchReply([MATCH], 1, 1, {}))["matches"] == [
        {"path": "/w/a.py", "start_line": 1, "start_col": 1, "end_line": 1, "end_col": 7,
         "text": "foo(1)", "captures": {"X": "1"}}
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("expect", "payload", "says"),
    [
        (IndexReply, {}, "needs 'queued'"),
        (IndexReply, {"queued": "7"}, "queued must be int"),
        (SearchReply, {"matches": None, "total": 0, "files": 0, "stats": {}}, "must be a list"),
        (
            SearchReply,
            {"matches": [{"path": "/a"}], "total": 1, "files": 1, "stats": {}},
            "needs 'start_line'",
        ),
        (
            EditReply,
            {"files": [{**plain(REPLIES[1])["files"][0], "new": "text"}], "total": 1},
            "new must be bytes",
        ),
        (StatsReply, {**plain(STATS), "searched": {"conv-1": [{"files": 1}]}}, "needs 'of'"),
    ],
)
def test_a_malformed_reply_is_refused_saying_what_is_wrong(
    expect: type[SearchReply], payload: dict[str, object], says: str
) -> None:
    with pytest.raises(OpError, match=says):
        read_reply(expect, payload)


def test_git_files_reply() -> None:
    assert ListFiles.reply is FilesReply
    for files in (["a.py", "b/c.py"], None):
        assert read_files_reply(_over_the_wire(plain(FilesReply(files)))) == FilesReply(files)
    with pytest.raises(OpError, match="files must be"):
        read_files_reply({"files": "a.py"})
