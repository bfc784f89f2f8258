"""The `tether` command: list the tools, make one call, watch a runtime, run the demo.

    tether tools [--surface S] [--json [--format anthropic|openai|mcp]] [--all]
    tether call --workdir DIR TOOL 'JSON'     exit 1 when the result is an error
         [--approval TIER=allow|ask|deny]     questions and permission cards are asked on
                                              the terminal (stdin; the card on stderr)
    tether status --port N [--json]           the health tree of a running runtime
    tether top --port N [--interval S]        a live view of its actors, redrawn in place (q quits)
    tether mcp --workdir DIR [--surface S]    one run's tools over MCP stdio
    tether serve --workdir NAME=DIR [--port P] many conversations' tools over MCP streamable
                                              HTTP (bearer token; /healthz /readyz /metrics)
    tether demo [--project DIR]               the tools on the bundled example project
    tether chaos --workdir DIR [--duration S] [--runs N] [--seed N] [--json]
                                              tool calls under injected faults, checked
                                              against the invariants; exit 1 on a violation

`tether call` starts a runtime only when the tool needs one (language servers, parsers,
kernels, debug sessions); the harness tools run without.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether.json_types import JSONObject
from tether.tools.export import SCHEMA_FORMATS, export_schema
from tether.tools.families import FamilyLoadError
from tether.tools.registry import Registry, absence_reason
from tether.tools.spec import Needs, Surface

if TYPE_CHECKING:
    from tether.question_ports import TerminalPort
    from tether.tools.guardrails import Approval
    from tether.tools.results import ToolResult
    from tether.tools.spec import Tier

RUNTIME_NEEDS = frozenset(
    {Needs.LANGUAGE_SERVERS, Needs.PARSER, Needs.DEBUG_SESSIONS, Needs.KERNELS}
)
SURFACES = [s.value for s in Surface]


def _registry() -> Registry:
    try:
        return Registry.default()
    except FamilyLoadError as e:
        raise SystemExit(f"tether: {e}") from None


def _cmd_tools(args: argparse.Namespace) -> int:
    registry = _registry()
    surface = Surface(args.surface)
    connected = set(Needs) - {Needs.QUESTION_PORT, Needs.TARGET_SPACE, Needs.VIBE}
    if args.questions:
        connected |= {Needs.QUESTION_PORT, Needs.TARGET_SPACE}
    if args.vibe:
        connected.add(Needs.VIBE)
    rows = []
    for spec in registry.specs():
        reason = absence_reason(spec, surface, frozenset(connected))
        if reason and not args.all:
            continue
        rows.append((spec, reason))
    if args.json:
        if args.all:
            out: list[JSONObject] = [
                {**export_schema(spec, args.format), "tier": spec.tier.value, "absent": reason}
                for spec, reason in rows
            ]
        else:
            out = [export_schema(spec, args.format) for spec, _ in rows]
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"tools on the {surface.value} surface (a run with a working directory and every "
        f"resource kind connected{', a question port' if args.questions else ''}"
        f"{', vibe mode' if args.vibe else ''}):"
    )
    width = max((len(spec.name) for spec, _ in rows), default=4)
    for spec, reason in rows:
        first = re.split(r"(?<=\.)\s|\n", spec.description.strip(), maxsplit=1)[0].rstrip(".")
        line = f"  {spec.name:<{width}}  {spec.tier.value:<5}  {first}"
        if reason:
            line += f"\n  {'':<{width}}  absent: {reason}"
        print(line)
    if not rows:
        print("  (none)")
    return 0


def _parse_arguments(text: str) -> JSONObject:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise SystemExit(
            f"tether call: the arguments are not valid JSON ({e.msg} at column {e.colno}); "
            'quote them as one shell word, e.g. \'{"path": "README.md"}\''
        ) from None
    if not isinstance(value, dict):
        raise SystemExit(
            'tether call: the arguments must be a JSON object, e.g. \'{"path": "README.md"}\''
        )
    return value


def _print_result(result: ToolResult, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
        return
    stream = sys.stdout
    print(result.text, file=stream)
    if result.images:
        print(f"[{len(result.images)} image(s); use --json to get them]", file=stream)


def _terminal_port(args: argparse.Namespace) -> TerminalPort | None:
    """Cards on stderr, answers from stdin (a terminal or a plain pipe); none with
    --no-human or when stdin is not a file (then ask_user is absent, approval fails closed)."""
    from tether.question_ports import TerminalPort

    if args.no_human:
        return None
    try:
        return TerminalPort(sys.stdin, sys.stderr)
    except (OSError, ValueError, AttributeError):
        return None


def _approval(pairs: list[str]) -> dict[Tier | str, Approval | str] | None:
    policy: dict[Tier | str, Approval | str] = {}
    for pair in pairs:
        tier, sep, decision = pair.partition("=")
        if not sep:
            raise SystemExit(
                f"tether call: --approval takes TIER=DECISION, e.g. write=ask; got {pair!r}"
            )
        policy[tier] = decision
    return policy or None


def _cmd_call(args: argparse.Namespace) -> int:
    from tether.run import Run

    arguments = _parse_arguments(args.arguments)
    port, approval = _terminal_port(args), _approval(args.approval)
    registry = _registry()
    spec = registry.get(args.tool)
    needs_runtime = spec is not None and bool(spec.needs & RUNTIME_NEEDS)
    if not needs_runtime:
        try:
            run = Run(
                runtime=None,
                run_id=args.run_id,
                workdir=args.workdir,
                surface=args.surface,
                registry=registry,
                question_port=port,
                approval=approval,
            )
        except ValueError as e:
            raise SystemExit(f"tether call: {e}") from None
        with run:
            result = run.call(args.tool, arguments)
        _print_result(result, args.json)
        return 1 if result.is_error else 0
    try:
        from tether.runtime import Runtime
    except ImportError as e:
        raise SystemExit(
            f"tether call: {args.tool} needs the tether runtime, which cannot be loaded: {e}"
        ) from None
    with Runtime.start() as rt:
        run = rt.open_run(
            args.run_id,
            workdir=args.workdir,
            surface=Surface(args.surface),
            question_port=port,
            approval=approval,
        )
        try:
            result = run.call(args.tool, arguments)
        finally:
            run.close()
    _print_result(result, args.json)
    return 1 if result.is_error else 0


def _cmd_status(args: argparse.Namespace) -> int:
    try:
        from tether.health_view import status_main
    except ImportError:
        print(
            "tether status: the health view (tether.health_view) is not part of this build yet.",
            file=sys.stderr,
        )
        return 2
    return int(status_main(args.port, as_json=args.json) or 0)


def _cmd_mcp(args: argparse.Namespace) -> int:
    from pathlib import Path

    if not Path(args.workdir).is_dir():
        raise SystemExit(f"tether mcp: --workdir {args.workdir!r} is not a directory")
    from tether.mcp_server import main as mcp_main

    return mcp_main(args.workdir, args.surface)


def _cmd_serve(args: argparse.Namespace) -> int:
    from tether.serve import ConfigError, load

    try:
        config = load(
            args.config,
            args.workdir,
            host=args.host,
            port=args.port,
            max_conversations=args.max_conversations,
            grace=args.grace,
        )
    except ConfigError as e:
        raise SystemExit(f"tether serve: {e}") from None
    if not config.loopback and not args.public:
        raise SystemExit(
            f"tether serve: --host {config.host} is not loopback; the server runs code for its "
            "clients. Put it behind a TLS proxy and pass --public to mean it."
        )
    from tether.serve.app import serve

    return serve(config, state_dir=args.state_dir, admin_port=args.admin_port)


def _cmd_demo(rest: list[str]) -> int:
    try:
        from tether.demo import main as demo_main
    except ImportError as e:
        print(f"tether demo: the demo is not available in this build ({e}).", file=sys.stderr)
        return 2
    return int(demo_main(rest) or 0)


def _cmd_chaos(rest: list[str]) -> int:
    from tether.chaos.command import main as chaos_main

    return chaos_main(rest)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tether", description="Server-bound tools of a coding-agent runtime."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    tools = sub.add_parser("tools", help="list the tools a surface sees")
    tools.add_argument("--surface", choices=SURFACES, default="default")
    tools.add_argument("--json", action="store_true", help="print the tool declarations")
    tools.add_argument("--format", choices=SCHEMA_FORMATS, default="mcp", help="with --json")
    tools.add_argument("--all", action="store_true", help="also list absent tools and why")
    tools.add_argument("--questions", action="store_true", help="as if a question port is on")
    tools.add_argument("--vibe", action="store_true", help="as if vibe mode is on")

    call = sub.add_parser("call", help="make one tool call (exit 1 when it is an error)")
    call.add_argument("--workdir", required=True, help="the working directory of the run")
    call.add_argument("--surface", choices=SURFACES, default="default")
    call.add_argument("--run-id", default="cli", help="conversation id (default: cli)")
    call.add_argument("--json", action="store_true", help="print the whole result as JSON")
    call.add_argument(
        "--approval",
        action="append",
        default=[],
        metavar="TIER=DECISION",
        help="approval policy, e.g. write=ask (a permission card on the terminal)",
    )
    call.add_argument("--no-human", action="store_true", help="no question port: fail closed")
    call.add_argument("tool", help="tool name, e.g. read")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")

    status = sub.add_parser("status", help="the health tree of a running runtime")
    status.add_argument("--port", type=int, required=True, help="the runtime's admin port")
    status.add_argument("--json", action="store_true", help="the health tree as JSON")

    top = sub.add_parser("top", help="a live view of a running runtime's actors")
    top.add_argument("--port", type=int, required=True, help="the runtime's admin port")
    top.add_argument("--interval", type=float, default=1.0, help="seconds between frames")
    top.add_argument("--count", type=int, default=0, help="stop after N frames (0: never)")

    mcp = sub.add_parser("mcp", help="serve one run's tools over MCP stdio")
    mcp.add_argument("--workdir", required=True, help="the working directory of the run")
    mcp.add_argument("--surface", choices=SURFACES, default="default")

    serve = sub.add_parser("serve", help="serve conversations' tools over MCP streamable HTTP")
    serve.add_argument(
        "--workdir",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="a directory clients may open conversations on, by NAME (repeatable)",
    )
    serve.add_argument("--config", help="a JSON config file (workdirs, limits)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8765; 0: a free one)")
    serve.add_argument("--max-conversations", type=int, help="open conversations at most")
    serve.add_argument("--grace", type=float, help="seconds SIGTERM waits for calls in flight")
    serve.add_argument("--state-dir", help="the runtime's state dir (token, port files)")
    serve.add_argument("--admin-port", type=int, help="pin the actor system's admin port")
    serve.add_argument("--public", action="store_true", help="allow a non-loopback --host")

    sub.add_parser("demo", help="run the tools on the bundled example project", add_help=False)
    sub.add_parser(
        "chaos",
        help="tool calls under injected faults, checked against the invariants",
        add_help=False,
    )
    return parser


def interpreter_bin_first_on_path() -> None:
    """The command may run as `.venv/bin/tether` without the virtualenv activated: the
    servers installed beside this interpreter (basedpyright, deno, a node >= 20 and the
    TypeScript server, see scripts/install.sh) are found first, as activation would do."""
    here = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if here and here not in path.split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([here, path]) if path else here


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    interpreter_bin_first_on_path()
    if argv and argv[0] == "demo":
        return _cmd_demo(argv[1:])
    if argv and argv[0] == "chaos":
        return _cmd_chaos(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "tools":
        return _cmd_tools(args)
    if args.command == "call":
        return _cmd_call(args)
    if args.command == "status":
        return _cmd_status(args)
    if args.command == "top":
        from tether.health_view import top_main

        if args.interval <= 0 or args.count < 0:
            raise SystemExit("tether top: --interval must be > 0 and --count >= 0")
        return top_main(args.port, args.interval, args.count)
    if args.command == "mcp":
        return _cmd_mcp(args)
    if args.command == "serve":
        return _cmd_serve(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
