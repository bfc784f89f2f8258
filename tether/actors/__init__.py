"""Actors only: the resource-actor bases and one module per resource kind's actor.

`base` (TetherActor, ResourceActor), `process` (ProcessActor: owns a subprocess),
`language_server` and `parser` (thin shells over `tether.lsp` and `tether.structural`,
each with its kind's `KINDS`), `echo` (test kinds); `run` (the RunActor) moves to
`tether.supervisors`. What an actor computes lives in a library package; actors import
libraries, never the other way (tests/test_layout.py).
"""
