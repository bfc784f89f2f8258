"""What one conversation may ask of a language server that every conversation shares.

A server (one per server + root) answers the runs of every conversation on that root, and
the servers here are single-threaded: one request that takes a minute holds up everyone
behind it. So each request has a budget, a server that stops answering everyone is
restarted, and a file too large for it is never sent (measured: a 14 MB Python file kept
basedpyright from answering anybody for 24 s; parsing is not cancellable). The limits are
the `language_server` kind's config (`KindSpec.config["limits"]`), read by the actor and,
for the early refusal of a large file, by the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from tether.json_types import JSONObject, JSONValue

MB = 1024 * 1024


@dataclass(frozen=True)
class LspLimits:
    # bytes: a larger file is refused (not opened in the server); a few MB is far beyond
    # any hand-written source file and still parses in a few seconds
    max_file_bytes: int = 4 * MB
    # s one request may take with the server before it is cancelled ($/cancelRequest, and
    # the cancellation file of servers that read one) and its caller told so
    request_budget: float = 20.0
    # s without an answer to any request while one has waited that long: the server is
    # stuck for everyone, and is restarted
    stall_timeout: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.max_file_bytes, int) or self.max_file_bytes < 1:
            raise ValueError(f"max_file_bytes must be a positive int, got {self.max_file_bytes!r}")
        for name in ("request_budget", "stall_timeout"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 < value < 24 * 3600:
                raise ValueError(f"{name} must be seconds in (0, 86400), got {value!r}")

    def to_config(self) -> JSONObject:
        return asdict(self)

    @classmethod
    def from_config(cls, config: Mapping[str, JSONValue] | None) -> LspLimits:
        """The limits in a kind's config (its "limits" entry); the defaults for what is
        missing. Raises ValueError on an unknown name or a bad value."""
        given = (config or {}).get("limits") or {}
        if not isinstance(given, dict):
            raise ValueError(f"lsp limits must be a map of limit names, got {given!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValueError(f"unknown lsp limit(s) {unknown}; known: {sorted(known)}")
        default = cls()
        size = given.get("max_file_bytes", default.max_file_bytes)
        if not isinstance(size, int):
            raise ValueError(f"max_file_bytes must be a positive int, got {size!r}")
        budget = _seconds("request_budget", given.get("request_budget", default.request_budget))
        stall = _seconds("stall_timeout", given.get("stall_timeout", default.stall_timeout))
        return cls(max_file_bytes=size, request_budget=budget, stall_timeout=stall)


def _seconds(name: str, value: JSONValue) -> float:
    if not isinstance(value, int | float):
        raise ValueError(f"{name} must be seconds in (0, 86400), got {value!r}")
    return value


def size_text(n: int) -> str:
    if n >= MB:
        return f"{n / MB:.1f} MB"
    return f"{n // 1024} KB" if n >= 1024 else f"{n} bytes"


def too_large(name: str, size: int, limit: int) -> str:
    """Why a file is not given to a language server, and what to do instead."""
    return (
        f"'{name}' is {size_text(size)}, over the {size_text(limit)} limit for files given to "
        "a language server (a file that large stalls the server for every conversation on "
        "its root). Read the part you need with read (start_line / end_line), or search it "
        "with ast_grep."
    )
