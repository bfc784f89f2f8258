"""Reference file tools of the harness: read, write, edit, apply_patch.

A host may replace them with its own; they exist so a run works out of the box, so the
eval bridge's `tool("read", ...)` has something to reach, and because they are the wrap
points of diagnostics-on-write (every successful write puts `data["written"]`, the
workspace-relative paths it changed, in its result).

Writes are atomic per file (temp file in the same directory, then rename) and
`apply_patch` is atomic across files: every hunk of every file is applied in memory
first, and only then are the files replaced (`tether.atomic_files`); if replacing the
third file fails, the first two are restored. A patch lands whole or not at all (DESIGN.md
invariant 2).

Modules: `read`, `write`, `edit`, `patch` (apply_patch), `files` (what they share) and
`specs` (the declarations).
"""

from tether.tools.harness.specs import specs

FAMILY = "harness"

__all__ = ["FAMILY", "specs"]
