"""`write`: create a file or replace its whole content, atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tether.tools.harness.files import (
    atomic_write,
    make_parents,
    regular_file,
    suppress_os,
)
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

MAX_WRITE_BYTES = 10 * 1024 * 1024


def write(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    rel = args["path"]
    content: str = args["content"]
    path = ctx.resolve_path(rel)
    data = content.encode("utf-8", errors="surrogatepass")
    if len(data) > MAX_WRITE_BYTES:
        return ToolResult.error(
            f"content is {len(data)} bytes; write takes at most {MAX_WRITE_BYTES} bytes."
        )
    mode = None
    existed = path.exists() or path.is_symlink()
    if existed:
        if path.is_dir():
            return ToolResult.error(f"'{rel}' is a directory; give a file path to write.")
        problem = regular_file(ctx, path, rel)
        if problem is not None:
            return problem
        mode = path.stat().st_mode
    root = Path(ctx.workdir).resolve()
    created = make_parents(path, root)
    try:
        atomic_write(path, data, mode)
    except BaseException:
        for d in reversed(created):
            with suppress_os():
                d.rmdir()
        raise
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    verb = "overwrote" if existed else "created"
    written = ctx.relative(path)
    return ToolResult.ok(
        f"{verb} '{written}' ({len(data)} bytes, {lines} lines).",
        data={"written": [written], "created": not existed},
    )
