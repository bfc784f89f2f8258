"""What the model sees: tool specs, the registry and its call pipeline, one module or
package per tool family (`harness/`, `lsp/`, `structural.py`, `ask_user.py`).

Host side only: a tool reaches an actor through a `Call` message, and computes with the
libraries (`tether.lsp`, `tether.structural`), never with actor modules.
"""
