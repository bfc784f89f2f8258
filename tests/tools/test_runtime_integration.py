"""A Run opened on a real Runtime: tools reach live resource actors through the pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tether.messages.calls import ResourceError
from tether.run import Run
from tether.tools.registry import Registry
from tether.tools.results import ToolResult
from tether.tools.spec import Needs, Surface, Tier, ToolSpec

OBJ: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}}


def _echo(ctx, args) -> ToolResult:  # noqa: ANN001
    payload = ctx.call_resource("echo", "k1", "echo", {"text": args.get("text", "")}, 5.0)
    return ToolResult.ok(f"echo said {payload['echo']['text']}", data=dict(payload))


def _fan_out(ctx, args) -> ToolResult:  # noqa: ANN001
    out = ctx.gather([("echo", f"k{i}", "echo", {"i": i}) for i in range(3)], 5.0)
    return ToolResult.ok(",".join(str(o["echo"]["i"]) for o in out))


def _fail(ctx, args) -> ToolResult:  # noqa: ANN001
    ctx.call_resource("echo", "k1", "fail", {"message": "the resource said no"}, 5.0)
    return ToolResult.ok("unreachable")


def _slow(ctx, args) -> ToolResult:  # noqa: ANN001
    ctx.call_resource("echo", "k1", "sleep", {"seconds": 5}, 0.3)
    return ToolResult.ok("unreachable")


ECHO_TOOLS = Registry(
    [
        *Registry.default().specs(),
        ToolSpec("echo", Tier.READ, "echo", OBJ, _echo),
        ToolSpec("fan_out", Tier.READ, "fan", OBJ, _fan_out),
        ToolSpec("fail", Tier.READ, "fail", OBJ, _fail),
        ToolSpec("slow", Tier.READ, "slow", OBJ, _slow),
        ToolSpec("needs_vibe", Tier.EXEC, "k", OBJ, _echo, frozenset({Needs.VIBE})),
    ]
)


def test_run_on_a_real_runtime(runtime: Any, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    run = runtime.open_run("conv-int", workdir=str(tmp_path), registry=ECHO_TOOLS)
    assert isinstance(run, Run) and run.runtime is runtime
    assert Needs.CONVERSATION in run.connected() and Needs.WORKDIR in run.connected()
    names = [t.name for t in run.tools()]
    assert "read" in names and "echo" in names and "needs_vibe" not in names

    # harness tool through the runtime-backed run
    assert run.call("read", {"path": "a.txt"}).text == "     1\thello"
    # ToolContext.call_resource -> runtime.call -> RunActor -> echo actor
    res = run.call("echo", {"text": "hi"})
    assert not res.is_error and res.text == "echo said hi" and res.data["key"] == "k1"
    # fan-out through runtime.gather
    assert run.call("fan_out", {}).text == "0,1,2"
    # a resource error becomes an error result with its code
    res = run.call("fail", {})
    assert res.is_error and res.data == {"code": "failed"}
    assert "the resource said no" in res.text
    # a resource that does not answer in time: an error, not a hang
    res = run.call("slow", {})
    assert res.is_error and res.data == {"code": "deadline"}
    # unknown kind, through the context directly
    with pytest.raises(ResourceError):
        run.context().call_resource("no_such_kind", "k", "echo", {}, 2.0)
    run.close()
    assert run.call("read", {"path": "a.txt"}).is_error


def test_plan_surface_on_a_real_runtime(runtime: Any, tmp_path: Path) -> None:
    run = runtime.open_run("conv-plan", workdir=str(tmp_path), surface=Surface.PLAN)
    assert {t.tier for t in run.tools()} == {Tier.READ}
    res = run.call("write", {"path": "x.txt", "content": "x"})
    assert res.is_error and res.data == {"refused": "tier"}
    assert not (tmp_path / "x.txt").exists()
    run.close()
