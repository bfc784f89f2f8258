"""The declarations of `lsp` and `lsp_rename`: schemas and descriptions for a model."""

from __future__ import annotations

from tether.tools.lsp_tool.actions import ACTIONS, lsp, lsp_rename
from tether.tools.schema import MAX_LINE
from tether.tools.spec import Needs, Tier, ToolSpec

_LSP_DESCRIPTION = """Ask the project's language server (Python: basedpyright, TypeScript/JavaScript: \
typescript-language-server, C/C++: clangd, Go: gopls, Rust: rust-analyzer, Dart: dart).
Positions are a 1-indexed `line` plus a `symbol` substring on that line (never a column); \
use "name#2" for its second occurrence on the line.
Actions:
- definition / type_definition / implementation / references / hover / code_actions: file, line, symbol
- call_hierarchy: file, line, symbol, direction "incoming" (who calls it) or "outgoing" (what it calls)
- type_hierarchy: file, line, symbol, direction "supertypes" or "subtypes"
- diagnostics: file (errors and warnings of one file), or file "*" (runs the project's own checker)
- symbols: query (workspace search, cap 100) or file (that file's symbols, cap 200)
- status: which servers run for which root, or why one cannot (marker or binary missing)
- reload: restart the server for this workspace (or for file's server)
References and hierarchies are capped at 50; a hierarchy is one level (ask again about a \
caller to go further), and a server without one says so and names the servers that have it. \
Example: {"action": "references", "file": "src/app.py", \
"line": 12, "symbol": "load_config"}"""


def specs() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="lsp",
            tier=Tier.READ,
            description=_LSP_DESCRIPTION,
            schema={
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": list(ACTIONS)},
                    "file": {
                        "type": "string",
                        "description": 'workspace-relative file; "*" with diagnostics',
                    },
                    "line": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LINE,
                        "description": "1-indexed line",
                    },
                    "symbol": {
                        "type": "string",
                        "minLength": 1,
                        "description": "substring of that line naming the symbol (name#2 = 2nd)",
                    },
                    "query": {"type": "string", "description": "workspace symbol search"},
                    "direction": {
                        "type": "string",
                        "enum": ["incoming", "outgoing", "supertypes", "subtypes"],
                        "description": "call_hierarchy: incoming | outgoing; "
                        "type_hierarchy: supertypes | subtypes",
                    },
                },
                "required": ["action"],
                "additionalProperties": False,
            },
            handler=lsp,
            needs=frozenset({Needs.WORKDIR, Needs.LANGUAGE_SERVERS}),
            path_args=("file",),
        ),
        ToolSpec(
            name="lsp_rename",
            tier=Tier.WRITE,
            description=(
                "Rename a symbol across the project through its language server, all files or "
                "none. Point at it with file + 1-indexed line + a substring of that line. "
                'Example: {"file": "src/app.py", "line": 12, "symbol": "load_config", '
                '"new_name": "read_config"}'
            ),
            schema={
                "type": "object",
                "properties": {
                    "file": {"type": "string", "description": "workspace-relative file"},
                    "line": {"type": "integer", "minimum": 1, "maximum": MAX_LINE},
                    "symbol": {"type": "string", "minLength": 1},
                    "new_name": {"type": "string", "minLength": 1},
                },
                "required": ["file", "line", "symbol", "new_name"],
                "additionalProperties": False,
            },
            handler=lsp_rename,
            needs=frozenset({Needs.WORKDIR, Needs.LANGUAGE_SERVERS}),
            path_args=("file",),
        ),
    ]
