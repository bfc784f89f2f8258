"""The ops of the tree-sitter parser pool (kind "parser", `tether.actors.parser`).

A search, edit or index is fanned out by the host to every pool slot, each with its share
(`Sharded`): slot `shard` of `nshards`, and the files under `root` that hash to it, listed
once by the host (`tether.structural.ops.split_work`); None lets the slot list them.

Each op declares its reply (`op.reply`), a frozen dataclass built by the slot. A reply
crosses flat as the `Reply` payload (`plain`: the same keys as before replies were typed),
the records inside it (a match, a proposed file, a job's progress) as maps; the host reads
it back with `read_reply`, which checks every field of the reply and of each record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from tether.messages.nested import record_lists, records
from tether.messages.ops import Records, Vocabulary

PARSER = Vocabulary("parser", idempotent=False)  # (its searches and edits are)
REPLIES = Records("parser reply")  # checks a reply as it comes off the wire
RECORDS = Records("parser record")  # and the records inside one


# --- records and replies ------------------------------------------------------------------
@RECORDS.op
@dataclass(frozen=True)
class Match:
    """One match: where (1-based lines, 1-based columns in code points), its text, and what
    each metavariable captured. Also the model's record (ast_grep's data["matches"])."""

    path: str
    start_line: int
    start_col: int
    end_line: int
    end_col: int
    text: str
    captures: dict[str, str]


@REPLIES.op
@dataclass(frozen=True)
class SearchReply:
    """The first `limit` matches of the share in path order, of `total`, in `files` files;
    `stats`: the search's counters (files, prefiltered, parsed, unreadable, binary)."""

    matches: list[Match]
    total: int
    files: int
    stats: dict[str, int]


@RECORDS.op
@dataclass(frozen=True)
class ProposedFile:
    """A file an edit rewrites: its content's hash when read (`old_hash`), the new content,
    how many matches were replaced, and what broke if the rewrite does not parse ("")."""

    path: str
    old_hash: str
    new: bytes
    replacements: int
    syntax: str


@REPLIES.op
@dataclass(frozen=True)
class EditReply:
    files: list[ProposedFile]
    total: int  # replacements, over the files


@REPLIES.op
@dataclass(frozen=True)
class IndexReply:
    queued: int  # files queued for background parsing


@REPLIES.op
@dataclass(frozen=True)
class DroppedReply:
    """Unindex: the queued files dropped; Clear: the cached files dropped."""

    dropped: int


@RECORDS.op
@dataclass(frozen=True)
class JobProgress:
    """How far one search or edit job got: files scanned, of the share's planned count
    (None: the slot lists its files itself), its start (time.monotonic(), one clock for
    the machine's processes), whether it settled."""

    files: int
    of: int | None
    started: float
    done: bool


@REPLIES.op
@dataclass(frozen=True)
class StatsReply:
    """The parse cache's counters, the searches and edits in flight per run (`jobs`), and
    per run how far each of its jobs here got (`searched`)."""

    files: int
    trees: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int
    parses: int
    jobs: dict[str, int]
    searched: dict[str, list[JobProgress]]


ParserReply = SearchReply | EditReply | IndexReply | DroppedReply | StatsReply
R = TypeVar("R", bound=ParserReply)


def read_reply(expect: type[R], payload: Mapping[str, object]) -> R:
    """The `Reply` payload back as `expect`, the records inside it too (OpError if a field
    of either is missing or mistyped)."""
    args = dict(payload)
    name = f"parser {expect.__name__}"
    if expect is SearchReply:
        args["matches"] = records(RECORDS, Match, args.get("matches"), f"{name}.matches")
    elif expect is EditReply:
        args["files"] = records(RECORDS, ProposedFile, args.get("files"), f"{name}.files")
    elif expect is StatsReply:
        args["searched"] = record_lists(
            RECORDS, JobProgress, args.get("searched"), f"{name}.searched"
        )
    reply: R = REPLIES.build(expect, args)
    return reply


# --- ops ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Sharded:
    """One slot's share of work over the files under `root` (paths in `files` relative
    to it); `exclude`: directory names to skip when the slot lists the files itself."""

    root: str
    shard: int = 0
    nshards: int = 1
    exclude: list[str] = field(default_factory=list)
    files: list[str] | None = None


@PARSER.op
@dataclass(frozen=True, kw_only=True)
class Search(Sharded):
    """The first `limit` matches of `pattern` (a `lang` code pattern) in this share."""

    lang: str
    pattern: str
    limit: int = 50
    budget_s: float = 0.0  # 0: the default (tether.structural.budget)
    budget_steps: int = 0
    budget_node_steps: int = 0  # steps one candidate may take
    reply: ClassVar[type[SearchReply]] = SearchReply
    idempotent: ClassVar[bool] = True  # retried once on a restarted slot


@PARSER.op
@dataclass(frozen=True, kw_only=True)
class Edit(Sharded):
    """The files of this share rewritten: every match of `pattern` becomes `rewrite`
    (nothing is written: the host stages and commits)."""

    lang: str
    pattern: str
    rewrite: str
    budget_s: float = 0.0
    budget_steps: int = 0
    budget_node_steps: int = 0
    reply: ClassVar[type[EditReply]] = EditReply
    idempotent: ClassVar[bool] = True  # (it only proposes)


@PARSER.op
@dataclass(frozen=True, kw_only=True)
class Index(Sharded):
    """Parse this share into the slot's cache in the background (a chunk per timer tick),
    every language a grammar claims or only `languages`, at most `max_files`."""

    languages: list[str] = field(default_factory=list)
    max_files: int = 20000
    reply: ClassVar[type[IndexReply]] = IndexReply


@PARSER.op
@dataclass(frozen=True)
class Unindex:
    """The run `run` closed: drop the files still queued for it (and its late Index calls)."""

    run: str = ""
    reply: ClassVar[type[DroppedReply]] = DroppedReply


@PARSER.op
@dataclass(frozen=True)
class Stats:
    """The slot's parse cache counters, its searches and edits in flight per run (`jobs`),
    and per run how far each of its jobs got (`searched`: a list of {files, of, started,
    done} - files scanned so far, of the share's planned count or None when the slot lists
    its files itself, the job's start as time.monotonic(), and whether it settled; the
    last settled jobs are kept, so a progress probe also counts a share that finished)."""

    reply: ClassVar[type[StatsReply]] = StatsReply


@PARSER.op
@dataclass(frozen=True)
class Clear:
    """Drop every cached file and tree (benchmarks measure cold searches with it)."""

    reply: ClassVar[type[DroppedReply]] = DroppedReply
