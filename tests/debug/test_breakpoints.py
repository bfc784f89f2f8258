"""Our breakpoint syntax (tether.debug.breakpoints), per-adapter translation and anchors,
without an adapter: one case per line."""

from __future__ import annotations

import pytest

from tether.debug import adapters
from tether.debug.breakpoints import (
    Breakpoint,
    BreakpointError,
    Hit,
    exception_kinds,
    function_specs,
    line_specs,
    parse_hit,
    relocate,
    translate_hit,
)


@pytest.mark.parametrize(
    "given, hit",
    [
        ("900", Hit("==", 900)),
        (900, Hit("==", 900)),
        ("== 7", Hit("==", 7)),
        (">=5", Hit(">=", 5)),
        (" % 3 ", Hit("%", 3)),
        ("", None),
        (None, None),
    ],
)
def test_hit_conditions_of_ours_parse(given, hit) -> None:
    assert parse_hit(given) == hit


@pytest.mark.parametrize(
    "given, says",
    [
        ("0", "counted from 1"),
        ("> 5", "is not ours"),
        ("five", "is not ours"),
        ("-1", "is not ours"),
        (True, "string or a number"),
        (2.5, "string or a number"),
    ],
)
def test_a_bad_hit_condition_says_what_to_write(given, says) -> None:
    with pytest.raises(BreakpointError) as e:
        parse_hit(given)
    assert says in str(e.value) and "'>= N'" in str(e.value) and '"900"' in str(e.value)


@pytest.mark.parametrize(
    "adapter, hit, sent",
    [
        ("debugpy", "900", "==900"),
        ("debugpy", ">= 5", ">=5"),
        ("debugpy", "% 3", "%3"),
        ("delve", "900", "== 900"),
        ("delve", ">= 5", ">= 5"),
        ("delve", "% 3", "% 3"),
        ("lldb", "900", "900"),  # an ignore count of 899; the session removes it at its stop
        ("lldb", ">= 5", "5"),
    ],
)
def test_hit_conditions_in_each_adapters_own_spelling(adapter, hit, sent) -> None:
    row = adapters.BY_NAME[adapter]
    parsed = parse_hit(hit)
    assert parsed is not None and translate_hit(parsed, row.hit_formats, adapter) == sent


def test_lldb_refuses_every_nth_hit_and_says_what_it_takes() -> None:
    feats = adapters.features(adapters.BY_NAME["lldb"])
    with pytest.raises(BreakpointError) as e:
        feats.dap_breakpoint(Breakpoint(3, hit_condition="% 3"))
    assert "lldb cannot count hits as '% 3'; it takes '5' or '>= 5'" in str(e.value)


def test_an_adapter_with_no_hit_conditions_says_so() -> None:
    with pytest.raises(BreakpointError, match="dart takes no hit condition; use a condition"):
        adapters.features(adapters.BY_NAME["dart"]).dap_breakpoint(Breakpoint(3, hit_condition="9"))


def test_a_full_source_breakpoint_in_dap_terms() -> None:
    feats = adapters.features(adapters.BY_NAME["debugpy"])
    bp = Breakpoint(4, condition="i > 3", hit_condition=">= 2", log_message="i={i}")
    assert feats.dap_breakpoint(bp) == {
        "line": 4,
        "condition": "i > 3",
        "hitCondition": ">=2",
        "logMessage": "i={i}",
    }


def test_capabilities_beat_the_table_and_unadvertised_filters_are_not_used() -> None:
    row = adapters.BY_NAME["lldb"]
    caps = {"supportsLogPoints": False, "exceptionBreakpointFilters": [{"filter": "cpp_catch"}]}
    feats = adapters.features(row, caps)
    assert not feats.log_message and feats.source == "capabilities"
    assert feats.exception_filters(["raised"])[0] == []  # cpp_throw not advertised here


@pytest.mark.parametrize(
    "adapter, kinds, filters, note",
    [
        ("debugpy", ["raised", "uncaught"], ["raised", "uncaught"], ""),
        ("lldb", ["raised"], ["cpp_throw"], ""),
        ("lldb", ["uncaught"], [], "uncaught: lldb cannot stop there (lldb-dap's filters are"),
        ("delve", ["uncaught"], [], "uncaught: delve always stops there (built in)"),
        ("delve", ["raised"], [], "raised: delve cannot stop there (delve always stops on"),
    ],
)
def test_exceptions_map_to_each_adapters_filters(adapter, kinds, filters, note) -> None:
    got, notes = adapters.features(adapters.BY_NAME[adapter]).exception_filters(kinds)
    assert got == filters and (notes[0].startswith(note) if note else notes == [])


@pytest.mark.parametrize(
    "items, says",
    [
        (["12"], "a line number or an object"),
        ([{"line": 0}], "needs line, a number >= 1"),
        ([{"line": 3, "when": "x"}], "not when"),
        ([{"line": 3, "condition": 5}], "condition must be a string"),
        ([{"line": 3, "hit_condition": "x"}], "hit_condition 'x' is not ours"),
    ],
)
def test_bad_line_breakpoints_say_what_was_wrong(items, says) -> None:
    with pytest.raises(BreakpointError) as e:
        line_specs(items)
    assert says in str(e.value)


def test_specs_are_normalised_and_one_per_line() -> None:
    got = line_specs([5, {"line": 5, "hit_condition": 900}, {"line": 7, "log_message": " x={x} "}])
    assert [(s["line"], s["hit_condition"], s["log_message"]) for s in got] == [
        (5, "900", ""),
        (7, "", "x={x}"),
    ]
    assert function_specs(["add", {"name": "main.step", "hit_condition": ">=2"}])[1] == {
        "name": "main.step",
        "condition": "",
        "hit_condition": ">= 2",
    }
    with pytest.raises(BreakpointError, match="log_message"):
        function_specs([{"name": "f", "log_message": "x"}])
    with pytest.raises(BreakpointError, match="raised and/or uncaught"):
        exception_kinds(["all"])


BEFORE = ["a = 1", "x += 1", "b = 2", "x += 1", "c = 3"]


@pytest.mark.parametrize(
    "line, text, now, before, where",
    [
        (2, "x += 1", BEFORE, None, 2),  # unchanged
        (3, "b = 2", ["# new", *BEFORE], None, 4),  # a line inserted above
        (4, "x += 1", ["# new", *BEFORE], BEFORE, 5),  # repeated text: the diff says which
        (5, "c = 3", ["c = 3", "a = 1"], None, 1),  # moved far: the only one with its text
        (3, "b = 2", ["a = 1", "x += 1", "c = 3"], None, None),  # deleted: lost
        (3, "b = 9", ["x = 9", "b = 9", "y", "b = 9"], None, None),  # two as near: lost
        (40, "", BEFORE, None, 40),  # past the end when set: left to the adapter
    ],
)
def test_a_breakpoint_follows_its_text_or_loses_its_anchor(line, text, now, before, where) -> None:
    got, why = relocate(line, text, now, before)
    assert got == where and bool(why) == (where is None)
