"""What the client advertises in `initialize` (LSP 3.17 ClientCapabilities).

Dynamic registration is accepted where a server needs it to offer pull diagnostics or
configuration; workspace edits may create, rename and delete files (applied all or nothing).
"""

from __future__ import annotations

from tether.json_types import JSONObject


def client_capabilities() -> JSONObject:
    return {
        "general": {"positionEncodings": ["utf-8", "utf-16"]},
        "window": {"workDoneProgress": True, "showMessage": {}},
        "workspace": {
            "applyEdit": True,
            "configuration": True,
            "workspaceFolders": True,
            "didChangeConfiguration": {"dynamicRegistration": True},
            "didChangeWatchedFiles": {"dynamicRegistration": True},
            "symbol": {"dynamicRegistration": False},
            "workspaceEdit": {
                "documentChanges": True,
                "resourceOperations": ["create", "rename", "delete"],
                "failureHandling": "transactional",
            },
            "executeCommand": {"dynamicRegistration": False},
        },
        "textDocument": {
            "synchronization": {"dynamicRegistration": False, "didSave": True},
            "hover": {"contentFormat": ["markdown", "plaintext"]},
            "definition": {"linkSupport": True},
            "typeDefinition": {"linkSupport": True},
            "implementation": {"linkSupport": True},
            "references": {},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
            "codeAction": {
                "codeActionLiteralSupport": {
                    "codeActionKind": {
                        "valueSet": [
                            "",
                            "quickfix",
                            "refactor",
                            "refactor.extract",
                            "refactor.inline",
                            "refactor.rewrite",
                            "source",
                            "source.organizeImports",
                            "source.fixAll",
                        ]  # fmt: skip
                    }
                },
                "isPreferredSupport": True,
                "dataSupport": True,
            },
            "rename": {"prepareSupport": True},
            # servers may advertise a hierarchy only when the client declares it
            # (typescript-language-server's callHierarchyProvider)
            "callHierarchy": {"dynamicRegistration": False},
            "typeHierarchy": {"dynamicRegistration": False},
            "publishDiagnostics": {"versionSupport": True, "relatedInformation": False},
            "diagnostic": {"dynamicRegistration": True, "relatedDocumentSupport": True},
        },
    }
