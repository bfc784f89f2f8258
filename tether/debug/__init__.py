"""The debug-adapter library: the DAP client state (`dap`), the adapter table (`adapters`),
the session driver that turns tool ops into DAP exchanges (`session`), and the rendering
of what the adapter answered (`render`). Sans-io and actor-free: the DebugSessionActor
owns the pipes and the clock, tests and benchmarks drive the same code over a socket."""
