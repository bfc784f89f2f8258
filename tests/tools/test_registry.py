"""Registry: family loading, the visibility matrix, call-time refusal, the pipeline's order."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from tether.run import KIND_NEEDS, Run
from tether.tools.families import FAMILY_MODULES, FamilyLoadError, load_families, load_family
from tether.tools.registry import Registry
from tether.tools.results import ToolResult
from tether.tools.spec import Needs, Surface, Tier, ToolSpec

from .conftest import KindsRuntime, ScriptedPort

OBJ: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
CALLED: list[str] = []


def _handler(name: str):
    def handle(ctx, args) -> ToolResult:  # noqa: ANN001
        CALLED.append(name)
        return ToolResult.ok(f"{name} ran")

    return handle


def _spec(name: str, tier: Tier, needs: set[Needs]) -> ToolSpec:
    return ToolSpec(name, tier, f"{name} for tests", OBJ, _handler(name), frozenset(needs))


# Stand-ins for the SPEC.md tools whose families are not in this tree yet: the real specs
# that exist are tested too (REAL below); these cover every tier x needs combination.
SYNTHETIC = [
    _spec("t_lsp", Tier.READ, {Needs.LANGUAGE_SERVERS, Needs.WORKDIR}),
    _spec("t_lsp_rename", Tier.WRITE, {Needs.LANGUAGE_SERVERS, Needs.WORKDIR}),
    _spec("t_ast_grep", Tier.READ, {Needs.PARSER, Needs.WORKDIR}),
    _spec("t_ast_edit", Tier.WRITE, {Needs.PARSER, Needs.WORKDIR}),
    _spec("t_debug", Tier.EXEC, {Needs.DEBUG_SESSIONS, Needs.WORKDIR, Needs.CONVERSATION}),
    _spec("t_eval", Tier.EXEC, {Needs.KERNELS, Needs.CONVERSATION}),
    _spec("t_vibe_list", Tier.READ, {Needs.VIBE}),
    _spec("t_ask", Tier.READ, {Needs.QUESTION_PORT, Needs.TARGET_SPACE}),
    _spec("t_free_exec", Tier.EXEC, set()),
]
REAL = Registry.default().specs()
ALL = REAL + SYNTHETIC


def _expected_visible(spec: ToolSpec, surface: Surface, connected: frozenset[Needs]) -> bool:
    tier_ok = surface is Surface.DEFAULT or spec.tier is Tier.READ
    return tier_ok and spec.needs <= connected


def _run_with(tmp: Path, connected: frozenset[Needs], surface: Surface, registry: Registry) -> Run:
    kinds = {k for k, need in KIND_NEEDS.items() if need in connected}
    port = None
    if Needs.QUESTION_PORT in connected:
        port = ScriptedPort(target_space=Needs.TARGET_SPACE in connected)
    return Run(
        runtime=KindsRuntime(kinds),
        run_id="conv" if Needs.CONVERSATION in connected else "",
        workdir=tmp if Needs.WORKDIR in connected else None,
        surface=surface,
        question_port=port,
        vibe=Needs.VIBE in connected,
        registry=registry,
    )


CONNECTIONS = [frozenset(Needs)] + [frozenset(Needs) - {n} for n in Needs] + [frozenset()]


@pytest.mark.parametrize("surface", list(Surface), ids=lambda s: s.value)
@pytest.mark.parametrize(
    "connected", CONNECTIONS, ids=["all"] + [f"no-{n.value}" for n in Needs] + ["none"]
)
def test_visibility_matrix(tmp_path: Path, surface: Surface, connected: frozenset[Needs]) -> None:
    if Needs.QUESTION_PORT not in connected:
        connected = connected - {Needs.TARGET_SPACE}
    registry = Registry(ALL)
    run = _run_with(tmp_path, connected, surface, registry)
    assert run.connected() == connected
    seen = {t.name for t in run.tools()}
    for spec in ALL:
        assert (spec.name in seen) == _expected_visible(spec, surface, connected), spec.name
    schemas = {s["name"] for s in run.tool_schemas("anthropic")}
    assert schemas == seen
    absent = {t.name: t.reason for t in run.tools(include_absent=True) if not t.visible}
    assert set(absent) == {s.name for s in ALL} - seen
    assert all(absent.values())


@pytest.mark.parametrize("spec", [s for s in ALL if s.tier is not Tier.READ], ids=lambda s: s.name)
@pytest.mark.parametrize("surface", [Surface.PLAN, Surface.READONLY], ids=lambda s: s.value)
def test_read_only_surfaces_refuse_write_and_exec(
    tmp_path: Path, spec: ToolSpec, surface: Surface
) -> None:
    CALLED.clear()
    run = _run_with(tmp_path, frozenset(Needs), surface, Registry(ALL))
    res = run.call(spec.name, {})
    assert res.is_error and res.data == {"refused": "tier"}
    article = "an" if spec.tier is Tier.EXEC else "a"
    assert (
        f"refused: {spec.name} is {article} {spec.tier.value}-tier tool and this run's surface is "
        f"{surface.value}, which may only call read tools" in res.text
    )
    assert CALLED == []


@pytest.mark.parametrize("surface", [Surface.PLAN, Surface.READONLY], ids=lambda s: s.value)
def test_eval_bridge_is_refused_too(tmp_path: Path, surface: Surface) -> None:
    """A read tool's handler that re-enters call_tool cannot reach a write tool."""
    CALLED.clear()

    def bridge(ctx, args) -> ToolResult:  # noqa: ANN001
        return ctx.call_tool("t_lsp_rename", {})

    specs = [*SYNTHETIC, ToolSpec("t_bridge", Tier.READ, "bridge", OBJ, bridge)]
    run = _run_with(tmp_path, frozenset(Needs), surface, Registry(specs))
    res = run.call("t_bridge", {})
    assert res.is_error and "refused: t_lsp_rename is a write-tier tool" in res.text
    assert CALLED == []


def test_not_connected_is_refused_with_reason(tmp_path: Path) -> None:
    CALLED.clear()
    run = _run_with(tmp_path, frozenset({Needs.WORKDIR}), Surface.DEFAULT, Registry(ALL))
    res = run.call("t_lsp", {})
    assert res.is_error and res.data == {"refused": "not_connected"}
    assert res.text == (
        "t_lsp is not available on this run: the runtime has no language-server supervisor."
    )
    assert CALLED == []


def test_absent_reasons_for_operators(tmp_path: Path) -> None:
    run = _run_with(tmp_path, frozenset({Needs.WORKDIR}), Surface.PLAN, Registry(ALL))
    reasons = {t.name: t.reason for t in run.tools(include_absent=True)}
    assert reasons["t_lsp_rename"] == (
        "tier write is hidden on the plan surface, which sees only read tools"
    )
    assert reasons["t_vibe_list"] == "vibe mode is off (open the run with vibe=True)"
    assert reasons["t_ask"] == (
        "the run has no question port (open it with question_port=...); "
        "the question port has no target space to show cards in"
    )
    assert reasons["t_ast_grep"] == "the runtime has no tree-sitter parser pool"


def test_ask_user_needs_target_space(tmp_path: Path) -> None:
    with Run(workdir=tmp_path, question_port=ScriptedPort(target_space=False)) as run:
        names = [t.name for t in run.tools()]
        assert "ask_user" not in names
    with Run(workdir=tmp_path, question_port=ScriptedPort()) as run:
        assert "ask_user" in [t.name for t in run.tools()]


def test_unknown_tool_suggests(run: Run) -> None:
    res = run.call("raed", {"path": "x"})
    assert res.is_error and res.text.startswith("unknown tool 'raed'. Did you mean 'read'?")


@pytest.mark.parametrize("bad", [None, 3, ["read"]])
def test_bad_tool_names(run: Run, bad: Any) -> None:
    assert run.call(bad, {}).is_error


@pytest.mark.parametrize("args", [[1, 2], "path=x", 5])
def test_arguments_must_be_an_object(run: Run, args: Any) -> None:
    res = run.call("read", args)
    assert res.is_error and "expected a JSON object of named arguments" in res.text
    assert 'A correct call looks like: read {"path": "src/app.py"}' in res.text


# ---- pipeline order and wrappers ----------------------------------------------------------


def test_pipeline_order(tmp_path: Path) -> None:
    log: list[str] = []

    def handler(ctx, args) -> ToolResult:  # noqa: ANN001
        log.append("handler")
        return ToolResult.ok("done", data={"written": ["x"]})

    def outer(ctx, args, call_next):  # noqa: ANN001
        log.append("outer-before")
        res = call_next()
        log.append("outer-after")
        return ToolResult.ok(res.text + " +outer", data=res.data)

    def inner(ctx, args, call_next):  # noqa: ANN001
        log.append("inner-before")
        return call_next()

    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    spec = ToolSpec("w", Tier.WRITE, "w", schema, handler, path_args=("path",))
    registry = Registry([spec], {"w": [outer, inner]})

    class Port(ScriptedPort):
        def ask(self, card, timeout):  # noqa: ANN001
            log.append("approval")
            return super().ask(card, timeout)

    from tether.questions import ALLOW, Answer

    port = Port(answer=Answer.answered([ALLOW]))
    with Run(
        workdir=tmp_path, registry=registry, approval={"write": "ask"}, question_port=port
    ) as r:
        assert r.call("w", {}).data == {"refused": "arguments"}  # validation before anything
        assert r.call("w", {"path": "/etc/x"}).text.startswith("refused: `path`")  # guardrail
        assert log == []
        res = r.call("w", {"path": "ok.txt"})
    assert res.text == "done +outer"
    assert log == ["approval", "outer-before", "inner-before", "handler", "outer-after"]


def test_wrapper_failure_after_write_keeps_result(tmp_path: Path) -> None:
    def handler(ctx, args) -> ToolResult:  # noqa: ANN001
        return ToolResult.ok("wrote", data={"written": ["a"]})

    def broken(ctx, args, call_next):  # noqa: ANN001
        call_next()
        raise RuntimeError("language server gone")

    registry = Registry([ToolSpec("w", Tier.WRITE, "w", OBJ, handler)], {"w": [broken]})
    with Run(workdir=tmp_path, registry=registry) as r:
        res = r.call("w", {})
    assert not res.is_error
    assert (
        res.text
        == "wrote\n(a wrapper around w failed afterwards: RuntimeError: language server gone)"
    )


def test_handler_exception_becomes_error(tmp_path: Path) -> None:
    def handler(ctx, args) -> ToolResult:  # noqa: ANN001
        raise KeyError("boom")

    with Run(
        workdir=tmp_path, registry=Registry([ToolSpec("h", Tier.READ, "h", OBJ, handler)])
    ) as r:
        res = r.call("h", {})
    assert res.is_error and res.text.startswith("h failed inside tether: KeyError: 'boom'.")


def test_handler_returning_garbage(tmp_path: Path) -> None:
    spec = ToolSpec("h", Tier.READ, "h", OBJ, lambda ctx, args: "text")  # type: ignore[arg-type,return-value]
    with Run(workdir=tmp_path, registry=Registry([spec])) as r:
        res = r.call("h", {})
    assert res.is_error and "returned str instead of a ToolResult" in res.text


def test_resource_error_becomes_error(tmp_path: Path) -> None:
    spec = ToolSpec(
        "h",
        Tier.READ,
        "h",
        OBJ,
        lambda ctx, args: ctx.call_resource("parser", "0", "x", {}, 1.0),  # type: ignore[arg-type,return-value]
    )
    with Run(workdir=tmp_path, registry=Registry([spec])) as r:
        res = r.call("h", {})
    assert res.is_error and res.data == {"code": "unavailable"}
    assert "no runtime is connected to this run" in res.text


def test_non_parallel_tool_is_serialized(tmp_path: Path) -> None:
    import threading

    active = []
    peak = []
    gate = threading.Lock()

    def handler(ctx, args) -> ToolResult:  # noqa: ANN001
        with gate:
            active.append(1)
            peak.append(len(active))
        threading.Event().wait(0.02)
        with gate:
            active.pop()
        return ToolResult.ok("ok")

    spec = ToolSpec("s", Tier.EXEC, "s", OBJ, handler, parallel_safe=False)
    with Run(workdir=tmp_path, registry=Registry([spec])) as r:
        threads = [threading.Thread(target=r.call, args=("s", {})) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert max(peak) == 1 and len(peak) == 5


def test_nesting_is_bounded(tmp_path: Path) -> None:
    spec = ToolSpec("loop", Tier.READ, "l", OBJ, lambda ctx, args: ctx.call_tool("loop", {}))
    with Run(workdir=tmp_path, registry=Registry([spec])) as r:
        res = r.call("loop", {})
    assert res.is_error and "nested 8 deep" in res.text


def test_duplicate_names_rejected() -> None:
    with pytest.raises(FamilyLoadError, match="tool 'a' is registered twice"):
        Registry([_spec("a", Tier.READ, set()), _spec("a", Tier.WRITE, set())])


# ---- family loading -----------------------------------------------------------------------


def test_missing_family_is_skipped() -> None:
    assert load_family("tether.tools.does_not_exist_yet") is None


def test_broken_family_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fam_broken.py").write_text("raise RuntimeError('grammar table corrupt')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        FamilyLoadError,
        match="tool family fam_broken cannot be imported: RuntimeError: grammar table corrupt",
    ):
        load_family("fam_broken")


def test_family_whose_dependency_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fam_needs_dep.py").write_text("import not_installed_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(FamilyLoadError, match="No module named 'not_installed_anywhere'"):
        load_family("fam_needs_dep")


def test_family_specs_raising(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fam_raises.py").write_text("def specs():\n    raise ValueError('bad table')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        FamilyLoadError, match=r"specs\(\)/wrappers\(\) raised ValueError: bad table"
    ):
        load_family("fam_raises")


def test_family_wrappers_and_state_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fam_ok.py").write_text(
        "FAMILY = 'okfam'\n"
        "def specs():\n    return []\n"
        "def wrappers():\n    return {'write': lambda ctx, args, nxt: nxt()}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fam = load_family("fam_ok")
    assert fam is not None and fam.name == "okfam" and list(fam.wrappers) == ["write"]
    registry = Registry.from_families([*load_families(FAMILY_MODULES), fam])
    assert len(registry.wrappers_for("write")) >= 1


def test_default_registry_has_harness_and_ask_user() -> None:
    names = Registry.default().names()
    assert names[:5] == ["read", "write", "edit", "apply_patch", "ask_user"]
    assert Registry.default().families["read"] == "harness"


def test_every_real_tool_declares_one_tier_and_an_object_schema() -> None:
    for spec in REAL:
        assert isinstance(spec.tier, Tier) and spec.schema["type"] == "object"
        assert spec.description.strip(), spec.name


def test_combinations_cover_every_need() -> None:
    used = set(itertools.chain.from_iterable(s.needs for s in ALL))
    assert used == set(Needs)


def test_serial_tool_may_reenter_from_its_own_thread(tmp_path: Path) -> None:
    """eval's bridge calls back into the registry from the handler's thread: no deadlock."""

    def handler(ctx, args) -> ToolResult:  # noqa: ANN001
        if args.get("inner"):
            return ToolResult.ok("inner ran")
        return ctx.call_tool("s", {"inner": True})

    schema = {"type": "object", "properties": {"inner": {"type": "boolean"}}}
    spec = ToolSpec("s", Tier.EXEC, "s", schema, handler, parallel_safe=False)
    with Run(workdir=tmp_path, registry=Registry([spec])) as r:
        assert r.call("s", {}).text == "inner ran"


def test_serial_tool_busy_error(tmp_path: Path) -> None:
    import threading

    release, entered = threading.Event(), threading.Event()

    def handler(ctx, args) -> ToolResult:  # noqa: ANN001
        entered.set()
        release.wait(10)
        return ToolResult.ok("done")

    spec = ToolSpec("s", Tier.EXEC, "s", OBJ, handler, parallel_safe=False)
    with Run(workdir=tmp_path, registry=Registry([spec]), serial_timeout=0.2) as r:
        first = threading.Thread(target=r.call, args=("s", {}))
        first.start()
        assert entered.wait(10)
        res = r.call("s", {})
        release.set()
        first.join(10)
    assert (
        res.is_error
        and "another s call on this run has been running for more than 0.2 s" in res.text
    )
