"""ask_user: the only way a run asks the operator anything (SPEC.md "ask_user").

The question becomes a numbered card through the run's question port (tether.questions).
Three endings, each telling the model what to do next:
- answered: the choices and/or the typed text;
- skipped: success — go on under a stated assumption and do not ask again;
- timed out: an error carrying the same instruction.
With no human connected the call fails at once instead of blocking (fail closed, as the
approval guardrail does).
"""

from __future__ import annotations

from tether.json_types import JSONObject
from tether.questions import Answer, AnswerStatus, Card, CardKind, Option
from tether.tools.results import ToolResult
from tether.tools.spec import Needs, Tier, ToolContext, ToolSpec

FAMILY = "ask_user"

PROCEED = (
    "Proceed under a stated assumption: say in one sentence which assumption you make, "
    "then continue. Do not ask this question again."
)


def _ask_user(ctx: ToolContext, args: JSONObject) -> ToolResult:
    ask = getattr(ctx, "ask_question", None)
    human = getattr(ctx, "human_connected", None)
    if ask is None or human is None:
        return ToolResult.error("ask_user is not supported by this host's tool context. " + PROCEED)
    if not human():
        return ToolResult.error(
            "nobody is connected to answer, so the question was not shown. " + PROCEED,
            data={"status": "no_human"},
        )
    given = args.get("options", [])  # (validated: a list of objects with a label)
    options = tuple(
        Option(str(o["label"]), str(o.get("description", "")))
        for o in (given if isinstance(given, list) else [])
        if isinstance(o, dict)
    )
    labels = [o.label for o in options]
    if len(set(labels)) != len(labels):
        return ToolResult.error(
            "ask_user: two options have the same label; give every option a distinct label."
        )
    allow_free_text = bool(args.get("allow_free_text", not options))
    multi_select = bool(args.get("multi_select", False))
    if multi_select and not options:
        return ToolResult.error(
            "ask_user: multi_select needs options to pick from; add options or drop multi_select."
        )
    card, answer = ask(
        question=args["question"],
        context=args.get("context", ""),
        header=args.get("header", ""),
        options=options,
        allow_free_text=allow_free_text,
        multi_select=multi_select,
    )
    return render(card, answer)


def render(card: Card, answer: Answer) -> ToolResult:
    """The model-facing result of one answered, skipped or timed-out question card."""
    n = card.number
    if answer.status is AnswerStatus.SKIPPED:
        return ToolResult.ok(
            f"The user skipped question #{n}. " + PROCEED,
            data={"card": n, "status": "skipped"},
        )
    if answer.status is AnswerStatus.WITHDRAWN:
        return ToolResult.error(
            f"Question #{n} was withdrawn: the call that asked it was cancelled"
            + (f" ({answer.text})" if answer.text else "")
            + ". Nothing was answered; ask again if it still matters.",
            data={"card": n, "status": "withdrawn"},
        )
    if answer.status is AnswerStatus.TIMED_OUT:
        why = f" ({answer.text})" if answer.text else ""
        return ToolResult.error(
            f"Question #{n} got no answer in time{why}. " + PROCEED,
            data={"card": n, "status": "timed_out"},
        )
    labels = {o.label for o in card.options}
    choices = [c for c in answer.choices if c in labels]
    unknown = [c for c in answer.choices if c not in labels]
    if not card.multi_select and len(choices) > 1:
        choices = choices[:1]
    parts = []
    if choices:
        parts.append("chose " + ", ".join(repr(c) for c in choices))
    text = answer.text
    if unknown:  # a host that passes typed text as a choice
        text = "; ".join([*unknown, text] if text else unknown)
    if text:
        parts.append(f"wrote: {text}")
    if not parts:
        return ToolResult.ok(
            f"The user answered question #{n} without choosing anything. " + PROCEED,
            data={"card": n, "status": "answered", "choices": [], "text": ""},
        )
    return ToolResult.ok(
        f"The user answered question #{n}: " + "; ".join(parts),
        data={"card": n, "status": "answered", "choices": choices, "text": text},
    )


def specs() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="ask_user",
            tier=Tier.READ,
            description=(
                "Ask the human a question and wait for the answer. This is the only way to "
                "ask the user anything: never write a question as a chat message instead "
                "(that ends your turn). Offer options when the choices are known. If the user "
                "skips or does not answer, proceed under a stated assumption and do not ask "
                'again. Example: ask_user {"question": "Which database should the service use?", '
                '"options": [{"label": "Postgres"}, {"label": "SQLite", "description": '
                '"single file, no server"}]}'
            ),
            schema={
                "type": "object",
                "properties": {
                    "question": {"type": "string", "minLength": 1, "description": "what to ask"},
                    "context": {
                        "type": "string",
                        "description": "why you ask and what depends on the answer",
                    },
                    "header": {
                        "type": "string",
                        "maxLength": 12,
                        "description": "a very short label for the card, e.g. 'Database'",
                    },
                    "options": {
                        "type": "array",
                        "maxItems": 20,
                        "description": "choices the user can pick",
                        "items": {
                            "type": "object",
                            "properties": {
                                "label": {"type": "string", "minLength": 1},
                                "description": {"type": "string"},
                            },
                            "required": ["label"],
                            "additionalProperties": False,
                        },
                    },
                    "allow_free_text": {
                        "type": "boolean",
                        "description": "accept a typed answer (default: true without options)",
                    },
                    "multi_select": {
                        "type": "boolean",
                        "description": "several options may be picked (default false)",
                    },
                },
                "required": ["question"],
                "additionalProperties": False,
            },
            handler=_ask_user,
            needs=frozenset({Needs.QUESTION_PORT, Needs.TARGET_SPACE}),
        )
    ]


__all__ = ["specs", "render", "CardKind"]
