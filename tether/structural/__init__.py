"""Structural search and rewrite on tree-sitter, as a library.

Pure code (languages, pattern, matcher, query, search, rewrite, staging, cache, scan, ops)
that runs without actors: the host-side tool (`tether.tools.structural`) compiles
patterns, stages and commits rewrites with it, and the parser-pool actor
(`tether.actors.parser`) serves its ops. It imports nothing of actors, supervisors, the
runtime or the tools (tests/test_layout.py).
"""
