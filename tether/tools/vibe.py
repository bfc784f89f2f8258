"""vibe_spawn, vibe_send, vibe_wait, vibe_kill, vibe_list: direct background workers
(SPEC.md "vibe_*"). Registered only while vibe mode is on; all tier read (the gate sits on
the workers' own actions, which reach the run's approval policy and question port).
The machinery is tether.tools.vibe_workers; this module is what the model sees.
"""

from __future__ import annotations

from tether.json_types import JSONObject
from tether.messages.calls import ResourceError
from tether.messages.nested import plain
from tether.messages.worker_ops import CAP_NAMES, WorkerSnapshot
from tether.tools.results import ToolResult
from tether.tools.spec import Handler, Needs, Tier, ToolContext, ToolSpec
from tether.tools.vibe_workers import LIVE, TIERS, VibeError, Worker, workers_of

FAMILY = "vibe"
# the largest a spawn may ask for, per cap (its tier's cap, below these, is the real limit)
CAP_MAXIMA = {"seconds": 7 * 86400, "output_chars": 10**9, "tool_calls": 10**6, "tokens": 10**10}
DEFAULT_WAIT = 30.0
MAX_WAIT = 300.0
LIST_CHARS = 300  # chars of output / result per worker in vibe_list
WAIT_CHARS = 3000  # chars of output / result in vibe_wait
NEEDS = frozenset({Needs.VIBE, Needs.CONVERSATION, Needs.WORKDIR})


def _tail(text: str, limit: int) -> str:
    text = text.rstrip("\n")
    return text if len(text) <= limit else f"[... {len(text) - limit} chars before]" + text[-limit:]


def _amount(n: float) -> str:
    for size, unit in ((1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:g}"


def usage_text(s: WorkerSnapshot) -> str:
    """Elapsed time and use against the caps: "3.2 s of 1800 s, output 1.2k of 4M
    chars, tool calls 3 of 500, tokens not reported"."""
    caps, used = s.caps, s.usage

    def of(name: str) -> str:
        return f" of {_amount(caps[name])}" if name in caps else ""

    parts = [f"{s.elapsed:.1f} s" + (f" of {caps['seconds']:g} s" if "seconds" in caps else "")]
    parts.append(f"output {_amount(used.get('output_chars', 0))}{of('output_chars')} chars")
    for name, words in (("tool_calls", "tool calls"), ("tokens", "tokens")):
        if name in used:
            parts.append(f"{words} {_amount(used[name])}{of(name)}")
        elif name in caps:
            parts.append(f"{words} not reported")
    return ", ".join(parts)


def _line(w: Worker) -> str:
    s = w.snapshot
    status = w.status if not w.gone else w.gone
    exit_code = f", exit {s.exit_code}" if s.exit_code not in (None, 0) else ""
    head = f"{w.worker_id} [{w.tier}] {w.label!r}: {status}{exit_code}, {usage_text(s)}"
    if w.isolated:
        edit = w.change.edit_id if w.change is not None else None
        head += f"; own view, change staged as {edit}" if edit else "; own view"
    if s.prompts:
        head += f", waiting for permission to run {s.prompts[0].tool}"
    body = s.output if w.status in LIVE else s.result
    what = "output so far" if w.status in LIVE else "last result"
    return head + (f"\n  {what}: {_tail(body, LIST_CHARS)}" if body.strip() else "")


def _data(w: Worker, **extra: bool) -> dict[str, object]:
    s = w.snapshot
    change = w.change.data() if w.change is not None else None
    return {
        "worker_id": w.worker_id,
        "status": w.status,
        "label": s.label,
        "tier": s.tier,
        "elapsed": s.elapsed,
        "exit_code": s.exit_code,
        "error": s.error,
        "run": s.run,
        "prompts": [plain(p) for p in s.prompts],
        "caps": s.caps,
        "usage": s.usage,
        "capped": plain(s.capped) if s.capped is not None else None,
        "isolated": w.isolated,
        "change": change,
        **extra,
    }


def _guarded(fn: Handler) -> Handler:
    def handler(ctx: ToolContext, args: JSONObject) -> ToolResult:
        try:
            return fn(ctx, args)
        except VibeError as exc:
            return ToolResult.error(str(exc))
        except ResourceError as exc:
            return ToolResult.error(f"the worker could not be reached: {exc.message}")

    return handler


def _spawn(ctx: ToolContext, args: JSONObject) -> ToolResult:
    table = workers_of(ctx)
    tier = str(args.get("tier") or table.config.default_tier)
    isolated, caps = args.get("isolated"), args.get("caps")
    w = table.spawn(
        str(args["brief"]),
        str(args["label"]),
        tier,
        isolated if isinstance(isolated, bool) else None,
        caps if isinstance(caps, dict) else None,
    )
    where = (
        "on its own copy of the workspace (its change comes back staged, for resolve)"
        if w.isolated
        else "in the workspace itself"
    )
    return ToolResult.ok(
        f"Started worker {w.worker_id} ({w.label!r}, tier {tier}) {where}; it runs in the "
        "background. "
        f'Collect its result with vibe_wait {{"worker_id": "{w.worker_id}"}}; vibe_list shows '
        "its progress.",
        data=_data(w),
    )


def _send(ctx: ToolContext, args: JSONObject) -> ToolResult:
    w, stopped = workers_of(ctx).send(str(args["worker_id"]), str(args["message"]))
    how = "stopped its current run and started" if stopped else "started"
    return ToolResult.ok(
        f"Appended the message to {w.worker_id}'s brief and {how} run {w.snapshot.run}.",
        data=_data(w, stopped_previous=stopped),
    )


def _wait(ctx: ToolContext, args: JSONObject) -> ToolResult:
    timeout = args.get("timeout_seconds", DEFAULT_WAIT)
    asked = float(timeout) if isinstance(timeout, int | float | str) else DEFAULT_WAIT
    seconds = min(asked, MAX_WAIT)
    capped = f" (timeout_seconds is capped at {MAX_WAIT:g})" if asked > MAX_WAIT else ""
    w, finished = workers_of(ctx).wait(str(args["worker_id"]), seconds)
    s = w.snapshot
    if not finished:
        return ToolResult.ok(
            f"Worker {w.worker_id} is still running after waiting {seconds:g} s{capped} "
            f"(running for {s.elapsed:.1f} s). Output so far:\n"
            f"{_tail(s.output, WAIT_CHARS) or '(none yet)'}\n"
            "Wait again, send it a message with vibe_send, or stop it with vibe_kill.",
            data=_data(w, finished=False, timed_out=True),
        )
    if w.gone:
        return ToolResult.error(
            f"Worker {w.worker_id} is {w.gone}; its last output:\n"
            f"{_tail(s.output, WAIT_CHARS) or '(none)'}",
            data=_data(w, finished=True, timed_out=False),
        )
    ending = {
        "done": "finished",
        "failed": "failed",
        "killed": "was killed",
        "capped": "was stopped",
    }.get(w.status, w.status)
    error = f" ({s.error})" if s.error and w.status != "killed" else ""
    so_far = " What it had done so far" if w.status == "capped" else " Result"
    text = (
        f"Worker {w.worker_id} ({w.label!r}) {ending}{error} after {s.elapsed:.1f} s "
        f"({usage_text(s)}).{so_far}:\n"
        f"{_tail(s.result, WAIT_CHARS) or '(no output)'}"
    )
    if w.change is not None:
        text += "\n\n" + w.change.describe()
    elif w.isolated and w.status == "killed":
        text += "\n\nIts own view, and the change in it, were removed."
    data = _data(w, finished=True, timed_out=False)
    return (
        ToolResult.error(text, data=data)
        if w.status in ("failed", "capped")
        else ToolResult.ok(text, data=data)
    )


def _kill(ctx: ToolContext, args: JSONObject) -> ToolResult:
    w, was = workers_of(ctx).kill(str(args["worker_id"]))
    if was in LIVE:
        text = f"Killed worker {w.worker_id} ({w.label!r}): its process group is gone."
        if w.isolated:
            text += " Its own view, and the change in it, were removed."
    else:
        text = f"Worker {w.worker_id} had already ended ({w.gone or was}); nothing to stop."
        edit = w.change.edit if w.change is not None else None
        if w.isolated and edit is not None and edit.status == "staged":
            text += (
                f" Its view is removed; its change stays staged as {edit.edit_id} until you "
                "resolve it (accept or discard)."
            )
    return ToolResult.ok(text, data=_data(w, killed_now=was in LIVE))


def _list(ctx: ToolContext, args: JSONObject) -> ToolResult:
    workers = workers_of(ctx).refresh()
    if not workers:
        return ToolResult.ok(
            "No workers on this run; start one with vibe_spawn.", data={"workers": []}
        )
    return ToolResult.ok(
        "\n".join(_line(w) for w in workers), data={"workers": [_data(w) for w in workers]}
    )


WORKER_ID: JSONObject = {
    "type": "string",
    "minLength": 1,
    "description": "the id vibe_spawn returned, e.g. w1",
}


def _spec(
    name: str, description: str, properties: JSONObject, required: list[str], fn: Handler
) -> ToolSpec:
    schema: JSONObject = {
        "type": "object",
        "properties": properties,
        "required": [*required],
        "additionalProperties": False,
    }
    return ToolSpec(name, Tier.READ, description, schema, _guarded(fn), NEEDS)


def specs() -> list[ToolSpec]:
    return [
        _spec(
            "vibe_spawn",
            "Start a background worker on a task and return at once with its id. tier 'fast' "
            "is for mechanical work with a clear spec, 'good' for design, judgement or "
            "reviewing a fast worker's output. An isolated worker edits its own copy of the "
            "workspace; when it ends, vibe_wait shows its change, staged as an edit_id for "
            'resolve. Example: vibe_spawn {"brief": "Add type hints to src/util.py", '
            '"label": "hints", "tier": "fast", "caps": {"seconds": 600}}',
            {
                "brief": {"type": "string", "minLength": 1, "description": "the task, in full"},
                "label": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 60,
                    "description": "a short name",
                },
                "tier": {
                    "type": "string",
                    "enum": list(TIERS),
                    "description": "fast (default) or good",
                },
                "isolated": {
                    "type": "boolean",
                    "description": "work on its own copy-on-write view of the workspace, its "
                    "change staged for resolve (default: true in a git work tree, else false)",
                },
                "caps": {
                    "type": "object",
                    "properties": {
                        n: {"type": "number", "exclusiveMinimum": 0, "maximum": CAP_MAXIMA[n]}
                        for n in CAP_NAMES
                    },
                    "additionalProperties": False,
                    "description": "lower this worker's caps below its tier's: seconds "
                    "(wall-clock), output_chars, tool_calls, tokens (the last two as its "
                    "backend reports them); a worker at a cap is stopped",
                },
            },
            ["brief", "label"],
            _spawn,
        ),
        _spec(
            "vibe_send",
            "Append a message to a worker's brief and run it again (a running worker is "
            'stopped first). Example: vibe_send {"worker_id": "w1", "message": "also cover '
            'the tests"}',
            {"worker_id": WORKER_ID, "message": {"type": "string", "minLength": 1}},
            ["worker_id", "message"],
            _send,
        ),
        _spec(
            "vibe_wait",
            "Wait until a worker finishes, at most timeout_seconds (default 30, at most 300), "
            "and say which happened; a worker still running shows its output so far. "
            'Example: vibe_wait {"worker_id": "w1", "timeout_seconds": 60}',
            {
                "worker_id": WORKER_ID,
                "timeout_seconds": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 86400,  # beyond a day is a mistake; up to it is capped at 300
                    "description": "default 30, cap 300",
                },
            },
            ["worker_id"],
            _wait,
        ),
        _spec(
            "vibe_kill",
            'Stop a worker (its whole process group). Safe to repeat. Example: vibe_kill {"worker_id": "w1"}',
            {"worker_id": WORKER_ID},
            ["worker_id"],
            _kill,
        ),
        _spec(
            "vibe_list",
            "The run's workers: id, label, tier, status, elapsed time and use against its "
            "caps, its staged change, and the output so far or the last result (both "
            "capped). Example: vibe_list {}",
            {},
            [],
            _list,
        ),
    ]
