"""`tether serve`: the tools of many conversations, on one runtime, over MCP streamable HTTP.

config (the workdir allowlist and limits, as validated data), auth (Host/Origin and the
bearer token, checked before a request is read), conversations (server-minted handles, each
a Run, and the calls in flight on them), face (the MCP tools/list and tools/call), app (the
routes, the HTTP server and its drain on SIGTERM).
"""

from tether.serve.config import ConfigError, ServeConfig, Workdir, load

__all__ = ["ConfigError", "ServeConfig", "Workdir", "load"]
