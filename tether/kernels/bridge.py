"""The tool bridge, kernel side and wire format: `tool(name, args)` inside a cell.

A cell calls `tool("read", {"path": "a.py"})` (JavaScript: `await tool(...)`). The helper
asks for input on the kernel's own stdin channel, with a prompt that starts with
`SENTINEL`, then the kernel's nonce and the request as JSON. The kernel actor recognises
it, the host runs the call through the run's pipeline, and the input reply carries the
result back as JSON: the text (an error result raises `ToolError` in the cell). No port,
no socket, no secret beyond the kernel's own HMAC-signed channel. The nonce tells a
bridge request from a prompt the cell's own code happens to print.

`tools([(name, args), ...])` sends a batch in one request: the host runs its calls
concurrently (where the tools allow it) and returns their texts in order.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from tether.json_types import JSONObject

SENTINEL = "__tether_tool__:"


@dataclass(frozen=True)
class BridgeRequest:
    calls: list[tuple[str, JSONObject]]  # (tool name, args)
    batch: bool  # tools([...]) (answer a list) or tool(...) (answer one)


def new_nonce() -> str:
    return secrets.token_hex(16)


def parse_request(prompt: str, nonce: str) -> BridgeRequest | str | None:
    """A bridge request, or None for a plain input() prompt, or an error text for a bridge
    request that is malformed."""
    head = SENTINEL + nonce + ":"
    if not prompt.startswith(head):
        return None
    try:
        body = json.loads(prompt[len(head) :])
        calls = [(str(c["name"]), dict(c.get("args") or {})) for c in body["calls"]]
    except (ValueError, KeyError, TypeError) as exc:
        return f"malformed tool() request: {exc}"
    return BridgeRequest(calls, bool(body.get("batch")))


def encode_answer(results: list[JSONObject]) -> str:
    """The input reply: one {"ok", "text", "data"} per call, in order."""
    return json.dumps({"results": results}, default=str)


PYTHON = r"""
def __tether_bridge(nonce, sentinel):
    import json as _json

    class ToolError(Exception):
        '''A tool called from this cell answered with an error.'''

    def _ask(calls, batch):
        from IPython import get_ipython
        prompt = sentinel + nonce + ":" + _json.dumps({"calls": calls, "batch": batch})
        answer = _json.loads(get_ipython().kernel.raw_input(prompt))
        return answer["results"]

    def tool(name, args=None):
        '''Call one of your tools through the harness (guardrails and approvals apply):
        tool("read", {"path": "README.md"}) returns its text; an error raises ToolError.'''
        result = _ask([{"name": name, "args": args or {}}], False)[0]
        if not result["ok"]:
            raise ToolError(result["text"])
        return result["text"]

    def tools(calls):
        '''Several tool calls at once, run concurrently where the tools allow it:
        tools([("read", {"path": "a"}), ("read", {"path": "b"})]) returns their texts.'''
        results = _ask([{"name": n, "args": a or {}} for n, a in calls], True)
        failed = [r["text"] for r in results if not r["ok"]]
        if failed:
            raise ToolError("; ".join(failed))
        return [r["text"] for r in results]

    return tool, tools, ToolError

tool, tools, ToolError = __tether_bridge(%(nonce)r, %(sentinel)r)
del __tether_bridge
"""

JAVASCRIPT = r"""
{
  const nonce = %(nonce)s, sentinel = %(sentinel)s;
  class ToolError extends Error {}
  // Deno's prompt() gives null when no client's stdin connection is there 100 ms after it
  // asks; the kernel actor runs no cell before its stdin connection is up, so that is a
  // connection lost meanwhile. An answer always carries `results`.
  const ask = (calls, batch) => {
    const answer = prompt(sentinel + nonce + ":" + JSON.stringify({ calls, batch }));
    if (answer) return JSON.parse(answer).results;
    throw new ToolError("tool() got no answer: the kernel's stdin connection to tether is gone; call again");
  };
  globalThis.ToolError = ToolError;
  globalThis.tool = async (name, args) => {
    const [r] = ask([{ name, args: args ?? {} }], false);
    if (!r.ok) throw new ToolError(r.text);
    return r.text;
  };
  globalThis.tools = async (calls) => {
    const rs = ask(calls.map(([name, args]) => ({ name, args: args ?? {} })), true);
    const failed = rs.filter((r) => !r.ok).map((r) => r.text);
    if (failed.length) throw new ToolError(failed.join("; "));
    return rs.map((r) => r.text);
  };
}
"""


def prelude(language: str, nonce: str) -> str:
    """Code a fresh kernel runs once: defines tool(), tools() and ToolError."""
    if language == "python":
        return PYTHON % {"nonce": nonce, "sentinel": SENTINEL}
    return JAVASCRIPT % {"nonce": json.dumps(nonce), "sentinel": json.dumps(SENTINEL)}
