"""The debug-adapter library: the DAP client state (`dap`), the adapter table (`adapters`),
and the session driver that turns tool ops into DAP exchanges (`session`); what the model
reads of an answer is the tool's (`tether.tools.debug_tool.render`). Sans-io and
actor-free: the DebugSessionActor owns the pipes and the clock, tests and benchmarks drive
the same code over a socket."""
