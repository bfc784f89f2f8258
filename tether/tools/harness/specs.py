"""The declarations of read, write, edit and apply_patch: schemas and descriptions."""

from __future__ import annotations

from tether.json_types import JSONObject
from tether.tools.harness.edit import edit
from tether.tools.harness.patch import apply_patch
from tether.tools.harness.read import MAX_READ_BYTES, MAX_READ_LINES, read
from tether.tools.harness.write import write
from tether.tools.schema import MAX_LINE
from tether.tools.spec import Needs, Tier, ToolSpec

_PATH: JSONObject = {
    "type": "string",
    "minLength": 1,
    "description": "workspace-relative path, e.g. 'src/app.py'",
}


def specs() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="read",
            tier=Tier.READ,
            description=(
                "Read a text file of the workspace. Lines come back numbered ('   12\\tcode'); "
                "the numbers are not part of the file. Use start_line/end_line for a range of "
                f"a large file; output is capped at {MAX_READ_LINES} lines or "
                f"{MAX_READ_BYTES // 1024} KiB and says how to read on. "
                'Example: read {"path": "src/app.py", "start_line": 40, "end_line": 80}'
            ),
            schema={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "start_line": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LINE,
                        "description": "first line to show, 1-indexed (default 1)",
                    },
                    "end_line": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LINE,
                        "description": "last line to show, inclusive (default: to the cap)",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            handler=read,
            needs=frozenset({Needs.WORKDIR}),
            path_args=("path",),
        ),
        ToolSpec(
            name="write",
            tier=Tier.WRITE,
            description=(
                "Create a file or replace its whole content. Parent directories are created. "
                "To change part of an existing file prefer edit or apply_patch. "
                'Example: write {"path": "notes/todo.md", "content": "- fix login\\n"}'
            ),
            schema={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "content": {"type": "string", "description": "the complete new content"},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            handler=write,
            needs=frozenset({Needs.WORKDIR}),
            path_args=("path",),
        ),
        ToolSpec(
            name="edit",
            tier=Tier.WRITE,
            description=(
                "Replace an exact piece of text in a file. old_string must match the file "
                "exactly (indentation included, without read's line numbers) and exactly once; "
                "include surrounding lines to make it unique, or set replace_all to change "
                "every occurrence. "
                'Example: edit {"path": "src/app.py", "old_string": "retries = 3", '
                '"new_string": "retries = 5"}'
            ),
            schema={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "old_string": {
                        "type": "string",
                        "minLength": 1,
                        "description": "the exact text to replace",
                    },
                    "new_string": {"type": "string", "description": "the text to put instead"},
                    "replace_all": {
                        "type": "boolean",
                        "description": "replace every occurrence (default false: exactly one)",
                    },
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": False,
            },
            handler=edit,
            needs=frozenset({Needs.WORKDIR}),
            path_args=("path",),
        ),
        ToolSpec(
            name="apply_patch",
            tier=Tier.WRITE,
            description=(
                "Apply a unified diff to one or more files, all or nothing: if any hunk does "
                "not apply, no file is changed. Create a file with '--- /dev/null', delete one "
                "with '+++ /dev/null'. Paths are workspace-relative (a/ and b/ prefixes are "
                "accepted). Example patch:\n"
                "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n import os\n"
                "-retries = 3\n+retries = 5\n"
            ),
            schema={
                "type": "object",
                "properties": {
                    "patch": {
                        "type": "string",
                        "minLength": 1,
                        "description": "the unified diff text",
                        "examples": [
                            "--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
                        ],
                    },
                },
                "required": ["patch"],
                "additionalProperties": False,
            },
            handler=apply_patch,
            needs=frozenset({Needs.WORKDIR}),
        ),
    ]
