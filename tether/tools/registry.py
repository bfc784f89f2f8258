"""The tool registry: which tools exist, which a run sees, and the one call pipeline.

The tools come from the families (`tether.tools.families`: the modules listed once, each
loaded or refused with its cause).

Visibility is decided here and nowhere else, as tier x surface x connected resources:
PLAN and READONLY see tier read only (SPEC.md "Approval tiers"), and a tool whose needs
are not all connected is absent. `Registry.status` keeps the reason for every absent
tool, for operators. (A tool's declaration in a provider's shape is `export.py`'s.)

Every call, whether the model issued it or the eval bridge re-entered it, goes through
`Registry.call`:

    lookup -> tier refusal (by surface) -> needs connected -> schema validation
           -> guardrails (path confinement) -> approval -> wrappers -> handler

and ends in exactly one `ToolResult`. Exceptions never escape: a refused path, a failed
resource, a handler bug each become an error result that says what to do next.
"""

from __future__ import annotations

import contextlib
import difflib
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NotRequired, Protocol, TypedDict, Unpack

from tether.json_types import JSONObject, JSONValue
from tether.messages.calls import ResourceError
from tether.questions import (
    ALLOW,
    DENY,
    Answer,
    AnswerStatus,
    Card,
    CardKind,
    Option,
    QuestionPort,
)
from tether.tools.families import Family, FamilyLoadError, Wrapper, load_families
from tether.tools.guardrails import Approval, Confinement, GuardrailError, decide
from tether.tools.results import ToolResult
from tether.tools.schema import ArgumentError, describe, format_errors, validate
from tether.tools.spec import Needs, Surface, Tier, ToolContext, ToolSpec

READ_ONLY_SURFACES = frozenset({Surface.PLAN, Surface.READONLY})
MAX_NESTING = 8  # eval bridge re-entry depth: tool() inside a cell calling eval calling tool() ...

NEED_REASONS: dict[Needs, str] = {
    Needs.WORKDIR: "the run has no working directory (open it with workdir=...)",
    Needs.CONVERSATION: "the run has no conversation id",
    Needs.LANGUAGE_SERVERS: "the runtime has no language-server supervisor",
    Needs.DEBUG_SESSIONS: "the runtime has no debug-session supervisor",
    Needs.PARSER: "the runtime has no tree-sitter parser pool",
    Needs.KERNELS: "the runtime has no kernel factory",
    Needs.QUESTION_PORT: "the run has no question port (open it with question_port=...)",
    Needs.TARGET_SPACE: "the question port has no target space to show cards in",
    Needs.VIBE: "vibe mode is off (open the run with vibe=True)",
}


@dataclass(frozen=True)
class ToolStatus:
    """One tool as a run sees it: visible, or absent with the reason."""

    spec: ToolSpec
    visible: bool
    reason: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def tier(self) -> Tier:
        return self.spec.tier

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def needs(self) -> frozenset[Needs]:
        return self.spec.needs


class QuestionFields(TypedDict):
    """A question card's fields but its number and kind: `RunContext.ask_question`."""

    question: str
    context: NotRequired[str]
    header: NotRequired[str]
    options: NotRequired[tuple[Option, ...]]
    allow_free_text: NotRequired[bool]
    multi_select: NotRequired[bool]
    tool: NotRequired[str]
    arguments: NotRequired[JSONObject]


class CardFields(QuestionFields):
    """A card's fields but its number (the run numbers it): `CallSite.new_card`."""

    kind: CardKind


class CallSite(Protocol):
    """What the pipeline needs from the run a call belongs to (tether.run.Run implements it)."""

    surface: Surface
    question_port: QuestionPort | None
    approval_timeout: float

    def connected(self) -> frozenset[Needs]: ...

    @property
    def confinement(self) -> Confinement | None: ...

    @property
    def policy(self) -> Mapping[Tier, Approval] | None: ...

    def context(self) -> ToolContext: ...

    def new_card(self, **fields: Unpack[CardFields]) -> Card: ...

    def ask_card(self, card: Card, timeout: float) -> Answer: ...

    def serial_lock(self, name: str) -> contextlib.AbstractContextManager[object]: ...  # (unused)


def absence_reason(spec: ToolSpec, surface: Surface, connected: frozenset[Needs]) -> str:
    """Why `spec` is absent from this surface ("" when it is visible)."""
    if surface in READ_ONLY_SURFACES and spec.tier is not Tier.READ:
        return (
            f"tier {spec.tier.value} is hidden on the {surface.value} surface, "
            "which sees only read tools"
        )
    missing = sorted(spec.needs - connected, key=lambda n: n.value)
    if missing:
        return "; ".join(NEED_REASONS.get(n, f"needs {n.value}") for n in missing)
    return ""


class Registry:
    """Tool specs and wrappers by name, plus the call pipeline."""

    def __init__(
        self,
        specs: Iterable[ToolSpec],
        wrappers: Mapping[str, Sequence[Wrapper]] | None = None,
        families: Mapping[str, str] | None = None,
    ):
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in self._specs:
                raise FamilyLoadError(f"tool {spec.name!r} is registered twice")
            if not isinstance(spec.schema, Mapping) or spec.schema.get("type") != "object":
                raise FamilyLoadError(f"tool {spec.name!r}: its schema must be {{type: object}}")
            self._specs[spec.name] = spec
        self._wrappers: dict[str, tuple[Wrapper, ...]] = {
            k: tuple(v) for k, v in (wrappers or {}).items()
        }
        self.families: dict[str, str] = dict(families or {})  # tool name -> family name

    @classmethod
    def from_families(cls, families: Iterable[Family]) -> Registry:
        specs: list[ToolSpec] = []
        wrappers: dict[str, list[Wrapper]] = {}
        owners: dict[str, str] = {}
        for family in families:
            for spec in family.specs:
                specs.append(spec)
                owners[spec.name] = family.name
            for name, wrapper in family.wrappers.items():
                wrappers.setdefault(name, []).append(wrapper)
        return cls(specs, wrappers, owners)

    _default: Registry | None = None
    _default_lock = threading.Lock()

    @classmethod
    def default(cls) -> Registry:
        """The registry of families.FAMILY_MODULES, loaded once per process."""
        with cls._default_lock:
            if cls._default is None:
                cls._default = cls.from_families(load_families())
            return cls._default

    # ---- lookup and visibility ----------------------------------------------------------
    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def specs(self) -> list[ToolSpec]:
        return list(self._specs.values())

    def names(self) -> list[str]:
        return list(self._specs)

    def wrappers_for(self, name: str) -> tuple[Wrapper, ...]:
        return self._wrappers.get(name, ())

    def status(self, surface: Surface, connected: frozenset[Needs]) -> list[ToolStatus]:
        out = []
        for spec in self._specs.values():
            reason = absence_reason(spec, surface, connected)
            out.append(ToolStatus(spec, visible=not reason, reason=reason))
        return out

    def visible(self, surface: Surface, connected: frozenset[Needs]) -> list[ToolSpec]:
        return [s.spec for s in self.status(surface, connected) if s.visible]

    # ---- the pipeline -------------------------------------------------------------------
    def call(self, site: CallSite, name: object, args: object) -> ToolResult:
        """Run one call through the whole pipeline; always returns a ToolResult. `name` and
        `args` are whatever the model or host sent: checked here."""
        try:
            return self._call(site, name, args)
        except GuardrailError as e:
            return ToolResult.error(e.message)
        except ResourceError as e:
            return ToolResult.error(f"{name}: {e.message}", data={"code": e.code})
        except OSError as e:
            where = f" ({e.filename})" if e.filename else ""
            return ToolResult.error(f"{name} failed: {e.strerror or type(e).__name__}{where}.")
        except Exception as e:  # noqa: BLE001 - the model must get a result, not a traceback
            return ToolResult.error(
                f"{name} failed inside tether: {type(e).__name__}: {e}. This is a bug in the "
                "tool, not in your call; try another way or report it."
            )

    def _call(self, site: CallSite, name: object, args: object) -> ToolResult:
        connected = site.connected()
        if not isinstance(name, str) or name not in self._specs:
            return self._unknown(site, name, connected)
        spec = self._specs[name]
        if site.surface in READ_ONLY_SURFACES and spec.tier is not Tier.READ:
            article = "an" if spec.tier.value[0] in "aeiou" else "a"
            return ToolResult.error(
                f"refused: {name} is {article} {spec.tier.value}-tier tool and this run's surface is "
                f"{site.surface.value}, which may only call read tools. Describe the change "
                "you would make instead.",
                data={"refused": "tier"},
            )
        missing = spec.needs - connected
        if missing:
            return ToolResult.error(
                f"{name} is not available on this run: {absence_reason(spec, site.surface, connected)}.",
                data={"refused": "not_connected"},
            )
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            problem = f"expected a JSON object of named arguments, got {describe(args)}"
            return ToolResult.error(
                format_errors(name, spec.schema, [ArgumentError("the arguments", problem)]),
                data={"refused": "arguments"},
            )
        checked: JSONObject = dict(args)  # (JSON once validated: the errors say where not)
        errors = validate(spec.schema, checked)
        if errors:
            return ToolResult.error(
                format_errors(name, spec.schema, errors, checked), data={"refused": "arguments"}
            )
        self._check_paths(site, spec, checked)
        refusal = self._approve(site, spec, checked)
        if refusal is not None:
            return refusal
        ctx = site.context()
        lock = contextlib.nullcontext() if spec.parallel_safe else site.serial_lock(name)
        with lock:
            return self._run_wrapped(ctx, spec, checked)

    def _unknown(self, site: CallSite, name: object, connected: frozenset[Needs]) -> ToolResult:
        visible = [s.name for s in self.visible(site.surface, connected)]
        close = difflib.get_close_matches(str(name), visible, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return ToolResult.error(
            f"unknown tool {name!r}.{hint} Tools on this run: {', '.join(visible) or 'none'}.",
            data={"refused": "unknown"},
        )

    def _check_paths(self, site: CallSite, spec: ToolSpec, args: JSONObject) -> None:
        for arg in spec.path_args:
            value = args.get(arg)
            if value is None or value == "*":
                continue
            confinement = site.confinement
            if confinement is None:
                raise GuardrailError(
                    f"refused: {spec.name} takes a path but this run has no working directory"
                )
            values = value if isinstance(value, list | tuple) else [value]
            for v in values:
                if not isinstance(v, str):  # (its schema says string: a bug in the family)
                    raise TypeError(f"{spec.name}: path argument {arg!r} holds {v!r}")
                if v != "*":
                    confinement.resolve(v, arg)

    def _approve(self, site: CallSite, spec: ToolSpec, args: JSONObject) -> ToolResult | None:
        verdict = permission(site, spec.name, spec.tier, args)
        if verdict.allowed:
            return None
        name, tier = spec.name, spec.tier.value
        if verdict.refused == "policy":
            return ToolResult.error(
                f"refused by the host's policy: {tier}-tier tools such as "
                f"{name} are denied on this run. Do not retry; find a way without it.",
                data={"refused": "policy"},
            )
        if verdict.refused == "no_port":
            return ToolResult.error(
                f"refused: {name} needs approval ({tier} tier) and no approver "
                "is connected (this run has no question port). Do not retry; ask the user to "
                "allow it or find a way without it.",
                data={"refused": "no_approver"},
            )
        if verdict.refused == "no_human":
            return ToolResult.error(
                f"refused: {name} needs approval ({tier} tier) and no human is "
                "connected to approve it. Do not retry until someone is.",
                data={"refused": "no_approver"},
            )
        return ToolResult.error(
            f"refused: {name} was not approved: {verdict.how}. Do not retry the same call; "
            "continue without it or ask the user what they want instead.",
            data={"refused": "not_approved", "card": verdict.card},
        )

    def _run_wrapped(self, ctx: ToolContext, spec: ToolSpec, args: JSONObject) -> ToolResult:
        def handler() -> ToolResult:
            return _checked(spec.name, spec.handler(ctx, args))

        call_next: Callable[[], ToolResult] = handler
        # The first registered wrapper is the outermost.
        for wrapper in reversed(self.wrappers_for(spec.name)):
            call_next = _wrap(spec.name, wrapper, ctx, args, call_next)
        return call_next()


@dataclass(frozen=True)
class Verdict:
    """The run's answer to "may `tool` run?": allowed, or refused and why.
    refused: "policy" (the host denies the tier), "no_port" / "no_human" (nobody can
    approve: fail closed), "not_approved" (the permission card was denied, skipped or timed
    out; `how` says which, `card` is its number)."""

    allowed: bool
    refused: str = ""
    how: str = ""
    card: int = 0


def permission(
    site: CallSite, tool: str, tier: Tier, args: Mapping[str, JSONValue], asker: str = ""
) -> Verdict:
    """Apply the run's approval policy to a `tier` action; when it says ask, show a
    permission card through the run's question port (`asker`: who asks, e.g. a worker).
    The one gate for the model's own calls and for its vibe workers' prompts."""
    decision = decide(site.policy, tier)
    if decision is Approval.ALLOW:
        return Verdict(True, how="allowed by the run's approval policy")
    if decision is Approval.DENY:
        return Verdict(False, "policy", f"{tier.value}-tier actions are denied on this run")
    port = site.question_port
    if port is None:
        return Verdict(False, "no_port", "no approver is connected (no question port)")
    try:
        human = bool(port.human_connected())
    except Exception:  # noqa: BLE001 - a broken port counts as "nobody there"
        human = False
    if not human:
        return Verdict(False, "no_human", "no human is connected to approve it")
    who = f"{asker} " if asker else ""
    card = site.new_card(
        kind=CardKind.PERMISSION,
        header="Permission",
        question=f"May {who}run {tool}?" if asker else f"May I run {tool}?",
        context=f"{tier.value}-tier tool; arguments: {_short_args(args)}",
        options=(Option(ALLOW, "run it this time"), Option(DENY, "refuse it")),
        tool=tool,
        arguments=dict(args),
    )
    answer = site.ask_card(card, site.approval_timeout)
    if answer.status is AnswerStatus.ANSWERED and ALLOW in answer.choices:
        return Verdict(True, how=f"allowed by the user (card #{card.number})", card=card.number)
    how = {
        AnswerStatus.ANSWERED: "the user denied it",
        AnswerStatus.SKIPPED: "the user skipped the permission card",
        AnswerStatus.TIMED_OUT: "nobody answered the permission card in time",
        AnswerStatus.WITHDRAWN: "the permission card was withdrawn (the call was cancelled)",
    }[answer.status]
    if answer.text and answer.status is not AnswerStatus.ANSWERED:
        how += f" ({answer.text})"
    return Verdict(False, "not_approved", how, card.number)


def _wrap(
    name: str,
    wrapper: Wrapper,
    ctx: ToolContext,
    args: JSONObject,
    inner: Callable[[], ToolResult],
) -> Callable[[], ToolResult]:
    """One wrapper layer. A wrapper that fails after the inner call succeeded does not turn
    a done write into an error: the inner result is returned with a note."""

    def layer() -> ToolResult:
        box: list[ToolResult] = []

        def call_inner() -> ToolResult:
            if not box:
                box.append(inner())
            return box[0]

        try:
            return _checked(name, wrapper(ctx, args, call_inner))
        except (GuardrailError, ResourceError):
            if box:
                return _note(box[0], "a wrapper around this tool failed afterwards")
            raise
        except Exception as e:  # noqa: BLE001
            if box:
                return _note(
                    box[0], f"a wrapper around {name} failed afterwards: {type(e).__name__}: {e}"
                )
            raise

    return layer


def _note(result: ToolResult, note: str) -> ToolResult:
    return ToolResult(
        text=f"{result.text}\n({note})",
        is_error=result.is_error,
        data=result.data,
        images=result.images,
    )


def _checked(name: str, result: object) -> ToolResult:  # (a handler's, checked)
    if isinstance(result, ToolResult):
        return result
    return ToolResult.error(
        f"{name} returned {type(result).__name__} instead of a ToolResult (a bug in the tool)."
    )


def _short_args(args: Mapping[str, JSONValue], limit: int = 300) -> str:
    import json

    try:
        text = json.dumps(args, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(args)
    return text if len(text) <= limit else text[: limit - 3] + "..."
