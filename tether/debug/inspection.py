"""What a stopped program shows: its stack, threads, scopes, variables and evaluations.

A part of `tether.debug.session.Session` (held as `session.inspection`), sans-io like it:
the methods here are generators of what they wait for, driven one at a time by
`tether.debug.driver`. The session checks that the program is stopped; this part asks the
adapter and shapes its answers.

Frame ids and variable references are only valid while the program stays stopped where
it was: the inspection remembers the ones it handed out since the last stop (`moved`
forgets them), and refuses any other with an error that says to ask `stack` again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tether.debug.dap import as_int, as_list, as_obj, as_objs
from tether.debug.driver import DebugError, Step, ask
from tether.json_types import JSONObject
from tether.messages.calls import ErrorCode
from tether.messages.debug_ops import (
    Children,
    EvaluateReply,
    ExceptionInfo,
    Frame,
    ScopeRow,
    ScopesReply,
    ThreadRow,
    ThreadsReply,
    Variable,
    VariablesReply,
)

MAX_FRAMES = 30  # stack: frames shown
MAX_CHILDREN = 50  # variables: children shown
MAX_VALUE = 400  # characters of one value shown


@dataclass
class Inspection:
    frames: set[int] = field(default_factory=set)  # frame ids valid at this stop
    references: set[int] = field(default_factory=set)  # variable references valid now

    def moved(self) -> None:
        """The program moved: every frame id and reference handed out is stale."""
        self.frames.clear()
        self.references.clear()

    def stack(
        self, thread: int | None, timeout: float, line_text: Callable[[str, int], str]
    ) -> Step[tuple[list[Frame], int]]:
        """The top MAX_FRAMES frames of `thread` (each with its line's text, read by
        `line_text`), and how many there are."""
        resp = yield from ask(
            "stackTrace",
            {"threadId": thread, "startFrame": 0, "levels": MAX_FRAMES},
            timeout,
        )
        raw = as_objs(resp.body.get("stackFrames"))[:MAX_FRAMES]
        frames: list[Frame] = []
        for f in raw:
            frame_id = as_int(f.get("id"))
            if frame_id is None:
                raise DebugError(ErrorCode.FAILED, f"a stack frame without an id: {f!r:.120}")
            source = as_obj(f.get("source"))
            path = str(source.get("path") or "")
            line = as_int(f.get("line")) or 0
            self.frames.add(frame_id)
            frames.append(
                Frame(
                    frame_id,
                    str(f.get("name", "")),
                    path or str(source.get("name", "")),
                    line,
                    line_text(path, line) if path else "",
                )
            )
        total = as_int(resp.body.get("totalFrames")) or len(raw)
        return frames, max(total, len(raw))

    def top_locals(self, frame_id: int, timeout: float) -> Step[Children]:
        """The first scope of the frame that is not expensive to read: a stop's locals."""
        scopes = yield from ask("scopes", {"frameId": frame_id}, timeout)
        for scope in as_objs(scopes.body.get("scopes")):
            ref = as_int(scope.get("variablesReference"))
            if ref and not scope.get("expensive"):
                return (yield from self.children(ref, str(scope.get("name", "")), timeout))
        return Children("", 0, [], 0)

    def scopes(self, frame_id: int, timeout: float) -> Step[ScopesReply]:
        self.require_frame(frame_id)
        resp = yield from ask("scopes", {"frameId": frame_id}, timeout)
        out: list[ScopeRow] = []
        for s in as_objs(resp.body.get("scopes")):
            ref = as_int(s.get("variablesReference")) or 0
            if ref:
                self.references.add(ref)
            out.append(ScopeRow(str(s.get("name", "")), ref, bool(s.get("expensive"))))
        return ScopesReply(frame_id, out)

    def variables(self, reference: int, timeout: float) -> Step[VariablesReply]:
        if reference not in self.references:
            raise DebugError(ErrorCode.BAD_REQUEST, _stale("reference", reference))
        block = yield from self.children(reference, "", timeout)
        return VariablesReply(block.scope, block.reference, block.variables, block.total)

    def children(self, reference: int, scope: str, timeout: float) -> Step[Children]:
        self.references.add(reference)
        resp = yield from ask("variables", {"variablesReference": reference}, timeout)
        raw = as_list(resp.body.get("variables"))
        shown: list[Variable] = []
        for v in as_objs(raw[:MAX_CHILDREN]):
            ref = as_int(v.get("variablesReference")) or 0
            if ref:
                self.references.add(ref)
            shown.append(
                Variable(
                    str(v.get("name", "")),
                    _cap(str(v.get("value", ""))),
                    str(v.get("type") or ""),
                    ref,
                )
            )
        return Children(scope, reference, shown, len(raw))

    def evaluate(
        self, expression: str, frame_id: int | None, context: str, timeout: float
    ) -> Step[EvaluateReply]:
        """`expression` in `frame_id` (None: the innermost frame known, if any)."""
        if frame_id is None:
            frame_id = min(self.frames) if self.frames else None
        else:
            self.require_frame(frame_id)
        args: JSONObject = {"expression": expression, "context": context}
        if frame_id is not None:
            args["frameId"] = frame_id
        try:
            resp = yield from ask("evaluate", args, timeout)
        except DebugError as e:
            raise DebugError(ErrorCode.FAILED, f"evaluate {expression!r}: {e.message}") from e
        ref = as_int(resp.body.get("variablesReference")) or 0
        if ref:
            self.references.add(ref)
        return EvaluateReply(
            expression,
            frame_id,
            _cap(str(resp.body.get("result", ""))),
            str(resp.body.get("type") or ""),
            ref,
        )

    def require_frame(self, frame_id: int) -> None:
        if frame_id not in self.frames:
            raise DebugError(ErrorCode.BAD_REQUEST, _stale("frame", frame_id))


def threads(timeout: float) -> Step[ThreadsReply]:
    resp = yield from ask("threads", None, timeout)
    rows = [
        ThreadRow(as_int(t.get("id")) or 0, str(t.get("name", "")))
        for t in as_objs(resp.body.get("threads"))
    ]
    return ThreadsReply(rows)


def exception(
    thread: int | None, body: JSONObject, capabilities: JSONObject, timeout: float
) -> Step[ExceptionInfo]:
    """What a stop on an exception says of it: the adapter's exceptionInfo where it has
    one, else the stop's own text."""
    said = ExceptionInfo("", str(body.get("text") or body.get("description") or ""))
    if not capabilities.get("supportsExceptionInfoRequest"):
        return said
    try:
        info = yield from ask("exceptionInfo", {"threadId": thread}, timeout)
    except DebugError:
        return said
    details = as_obj(info.body.get("details"))
    return ExceptionInfo(
        str(details.get("typeName") or info.body.get("exceptionId") or ""),
        _cap(str(info.body.get("description") or details.get("message") or "")),
    )


def _cap(text: str, limit: int = MAX_VALUE) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text) - limit} more characters)"


def _stale(what: str, value: int) -> str:
    return (
        f"{what} {value} is not valid here: frame ids and references last only until the "
        "program moves (a step or continue makes them stale); call stack (then scopes) "
        "again and use the ids it gives"
    )
