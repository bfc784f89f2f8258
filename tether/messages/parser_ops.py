"""The ops of the tree-sitter parser pool (kind "parser", `tether.actors.parser`).

A search, edit or index is fanned out by the host to every pool slot, each with its share
(`Sharded`): slot `shard` of `nshards`, and the files under `root` that hash to it, listed
once by the host (`tether.structural.ops.split_work`); None lets the slot list them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tether.messages.ops import Vocabulary

PARSER = Vocabulary("parser")


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


@PARSER.op
@dataclass(frozen=True, kw_only=True)
class Index(Sharded):
    """Parse this share into the slot's cache in the background (a chunk per timer tick),
    every language a grammar claims or only `languages`, at most `max_files`."""

    languages: list[str] = field(default_factory=list)
    max_files: int = 20000


@PARSER.op
@dataclass(frozen=True)
class Unindex:
    """The run `run` closed: drop the files still queued for it (and its late Index calls)."""

    run: str = ""


@PARSER.op
@dataclass(frozen=True)
class Stats:
    """The slot's parse cache counters, its searches and edits in flight per run (`jobs`),
    and per run how far each of its jobs got (`searched`: a list of {files, of, started,
    done} - files scanned so far, of the share's planned count or None when the slot lists
    its files itself, the job's start as time.monotonic(), and whether it settled; the
    last settled jobs are kept, so a progress probe also counts a share that finished)."""


@PARSER.op
@dataclass(frozen=True)
class Clear:
    """Drop every cached file and tree (benchmarks measure cold searches with it)."""
