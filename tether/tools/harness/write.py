"""`write`: create a file or replace its whole content, atomically."""

from __future__ import annotations

import stat

from tether import beneath
from tether.json_types import JSONObject
from tether.tools.harness.files import atomic_write, lstat, refused, regular_file
from tether.tools.results import ToolResult
from tether.tools.spec import ToolContext

MAX_WRITE_BYTES = 10 * 1024 * 1024


def write(ctx: ToolContext, args: JSONObject) -> ToolResult:
    rel, content = str(args["path"]), str(args["content"])  # (strings: validated)
    path = ctx.resolve_path(rel)
    data = content.encode("utf-8", errors="surrogatepass")
    if len(data) > MAX_WRITE_BYTES:
        return ToolResult.error(
            f"content is {len(data)} bytes; write takes at most {MAX_WRITE_BYTES} bytes."
        )
    mode = None
    try:
        st = lstat(ctx, path)
    except beneath.SymlinkRefused as e:
        return refused(rel, e, "written")
    existed = st is not None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            return ToolResult.error(f"'{rel}' is a directory; give a file path to write.")
        problem = regular_file(ctx, path, rel)
        if problem is not None:
            return problem
        mode = st.st_mode
    atomic_write(ctx, path, data, mode)  # (makes the missing directories, beneath the root)
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    verb = "overwrote" if existed else "created"
    written = ctx.relative(path)
    return ToolResult.ok(
        f"{verb} '{written}' ({len(data)} bytes, {lines} lines).",
        data={"written": [written], "created": not existed},
    )
