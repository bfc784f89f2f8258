"""A cell's output as a notebook shows it: recorded message shapes through CellOutput, the
caps and what they say, then real kernels (ipykernel, Deno) rendering real cells."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.kernels import recorded
from tests.kernels.kernel_cells import render
from tether.kernels import CellOutput, Image, OutputCaps, RenderedCell
from tether.kernels.clipping import clip_middle
from tether.kernels.mimebundles import html_to_text
from tether.kernels.tracebacks import clean_traceback

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40).decode()
OTHER_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x01" * 40).decode()


def cell(*messages: tuple[str, dict[str, Any]], caps: OutputCaps | None = None) -> RenderedCell:
    output = CellOutput(caps)
    for kind, content in messages:
        output.add(kind, content)
    return output.render()


def out(text: str, name: str = "stdout") -> tuple[str, dict[str, Any]]:
    return ("stream", {"name": name, "text": text})


def shown(
    data: dict[str, Any], kind: str = "display_data", display_id: str | None = None
) -> tuple[str, dict[str, Any]]:
    transient = {"display_id": display_id} if display_id else {}
    return (kind, {"data": data, "metadata": {}, "transient": transient})


# ---- notebook semantics -------------------------------------------------------------------


def test_the_last_expression_is_echoed() -> None:
    assert cell(shown({"text/plain": "2"}, "execute_result")).text == "2"
    assert cell(("execute_result", recorded.DENO_ECHO)).text == "42"  # ANSI colours gone


def test_streams_interleave_in_arrival_order_and_merge_their_chunks() -> None:
    rendered = cell(out("a"), out("b\n"), out("warn\n", "stderr"), out("c\n"), out("d"))
    assert rendered.text == "ab\nwarn\nc\nd"
    assert rendered.notes == [] and rendered.error is None


def test_displays_stand_on_their_own_lines_between_streams() -> None:
    rendered = cell(out("before"), shown({"text/plain": "{'a': 1}"}), out("after\n"))
    assert rendered.text == "before\n{'a': 1}\nafter"


def test_a_carriage_return_overwrites_its_line_like_a_progress_bar() -> None:
    chunks = [
        out("\r 10%|#    |"),
        out("\r 50%|###  |"),
        out("\r100%|#####|"),
        out("\n"),
        out("done\r\n"),
    ]
    assert cell(*chunks).text == "100%|#####|\ndone"
    assert cell(out("abc\r"), out("\nnext")).text == "abc\nnext"  # \r\n split across chunks


@pytest.mark.parametrize(
    ("data", "text", "image"),
    [
        ({"text/plain": "<Figure>", "image/png": PNG}, "[image 1: <Figure>]", "image/png"),
        ({"image/jpeg": PNG}, "[image 1: image/jpeg]", "image/jpeg"),
        ({"text/plain": "md", "text/markdown": "**md**"}, "**md**", None),
        ({"text/plain": "plain", "text/html": "<b>html</b>"}, "plain", None),
        ({"text/html": "<p>a</p><script>x()</script><p>b &amp; c</p>"}, "a\n\nb & c", None),
        ({"application/json": {"k": [1]}}, '{\n  "k": [\n    1\n  ]\n}', None),
        ({"text/plain": ["multi", "line"]}, "multiline", None),
        ({"application/x-thing": "?"}, "[an output of type application/x-thing, not shown]", None),
    ],
)
def test_a_rich_output_shows_its_best_representation(
    data: dict[str, Any], text: str, image: str | None
) -> None:
    rendered = cell(shown(data))
    assert rendered.text == text
    assert [i.mime for i in rendered.images] == ([image] if image else [])


def test_an_svg_falls_back_to_text_and_says_why() -> None:
    rendered = cell(shown({"image/svg+xml": "<svg/>", "text/plain": "<Drawing>"}))
    assert rendered.text == "<Drawing>" and rendered.images == []
    assert rendered.notes == [
        "an image/svg+xml output is shown as text: SVG images are not rendered"
    ]


def test_an_html_table_becomes_a_markdown_table() -> None:
    html = "<table><tr><th>a</th><th>b|c</th></tr><tr><td>1</td><td> 2\n</td></tr></table>"
    assert html_to_text(html) == "| a | b\\|c |\n|---|---|\n| 1 | 2 |"


def test_a_figure_echoed_and_flushed_is_one_image() -> None:
    figure = {"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": PNG}
    rendered = cell(shown(figure, "execute_result"), shown(figure))
    assert rendered.images == [Image("image/png", PNG)]
    assert rendered.text == "[image 1: <Figure size 640x480 with 1 Axes>]"
    two = cell(shown(figure), shown({**figure, "image/png": OTHER_PNG}))
    assert len(two.images) == 2 and two.text.splitlines()[1].startswith("[image 2:")


def test_update_display_data_replaces_the_output_with_that_id() -> None:
    rendered = cell(
        shown({"text/plain": "0%"}, display_id="bar"),
        out("working\n"),
        (
            "update_display_data",
            {"data": {"text/plain": "100%"}, "transient": {"display_id": "bar"}},
        ),
    )
    assert rendered.text == "100%\nworking"
    orphan = cell(
        ("update_display_data", {"data": {"text/plain": "late"}, "transient": {"display_id": "x"}})
    )
    assert orphan.text == "late"


def test_clear_output_clears_now_or_on_the_next_output_and_says_so() -> None:
    rendered = cell(out("old\n"), ("clear_output", {"wait": False}), out("new\n"))
    assert rendered.text == "new"
    assert rendered.notes == ["clear_output cleared earlier output once; shown is what came after"]
    waiting = [out("0\n"), ("clear_output", recorded.CLEAR_WAIT)]
    assert cell(*waiting).text == "0"  # nothing new yet: the old output stays
    assert cell(*waiting, out("1\n"), ("clear_output", recorded.CLEAR_WAIT), out("2\n")).text == "2"
    assert cell(("clear_output", {"wait": False})).notes == []  # nothing was there to clear


# ---- errors -------------------------------------------------------------------------------


def test_an_ipython_traceback_loses_colours_and_tethers_own_frames() -> None:
    error = cell(("error", recorded.IPYTHON_ERROR_IN_PRELUDE)).error
    assert error == (
        "Traceback (most recent call last):\n"
        "Cell In[2], line 1\n"
        "----> 1 _tether_pip('install \"unterminated')\n"
        "\n"
        "ValueError: No closing quotation"
    )


def test_a_traceback_quotes_the_users_line_not_its_rewrite() -> None:
    output = CellOutput(source='%pip install "unterminated')
    output.add("execute_input", {"code": "_tether_pip(...)", "execution_count": 2})
    output.add("error", recorded.IPYTHON_ERROR_IN_PRELUDE)
    assert '----> 1 %pip install "unterminated\n' in (output.render().error or "")
    other_cell = CellOutput(source="%pip install x")
    other_cell.add("execute_input", {"execution_count": 9})  # the frame is of cell 2, not this one
    other_cell.add("error", recorded.IPYTHON_ERROR_IN_PRELUDE)
    assert "----> 1 _tether_pip(" in (other_cell.render().error or "")


def test_ipythons_own_frames_go_and_the_users_stay() -> None:
    error = clean_traceback(recorded.IPYTHON_ERROR_IN_FORMATTER)
    assert "formatters.py" not in error and "\x1b" not in error
    assert "Cell In[3], line 3, in Bad._repr_markdown_(self)" in error
    assert error.endswith("RuntimeError: no repr")
    nested = clean_traceback(recorded.IPYTHON_ERROR_NESTED)
    assert [line for line in nested.splitlines() if line.startswith("Cell In")] == [
        "Cell In[4], line 5",
        "Cell In[4], line 2, in f()",
        "Cell In[4], line 4, in g()",
    ]


def test_deno_tracebacks_lose_the_prelude_and_internal_frames() -> None:
    assert clean_traceback(recorded.DENO_ERROR_IN_PRELUDE) == (
        "Error: inner\n    at g (<anonymous>:2:3)\n    at <anonymous>:4:1"
    )
    assert cell(("error", recorded.DENO_THROWN_STRING)).error == "Error: str"


def test_an_error_only_in_the_reply_is_still_an_error() -> None:
    rendered = cell(out("partial\n"), ("execute_reply", recorded.DENO_SYNTAX_ERROR_REPLY))
    assert rendered.text == "partial" and rendered.error == "Error: Execution failed"
    assert (
        cell(("execute_reply", {"status": "aborted"})).error
        == "Aborted: the kernel did not run this cell"
    )
    assert cell(("execute_reply", {"status": "ok"})).error is None
    # the iopub error wins over the reply's copy of it
    both = cell(
        ("error", recorded.IPYTHON_ERROR_NESTED),
        ("execute_reply", {"status": "error", "ename": "X", "evalue": "y"}),
    )
    assert both.error is not None and both.error.endswith("KeyError: 'k'")


def test_other_messages_are_ignored() -> None:
    rendered = cell(
        ("status", {"execution_state": "busy"}),
        ("execute_input", {"code": "1"}),
        ("comm_msg", {}),
        out("x"),
    )
    assert rendered.text == "x"


# ---- caps, and what they say ----------------------------------------------------------------


def test_a_long_stream_keeps_its_head_and_tail_and_says_how_much_went() -> None:
    caps = OutputCaps(stream_chars=1_000)
    rendered = cell(*(out(f"line {i}\n") for i in range(10_000)), caps=caps)
    lines = rendered.text.splitlines()
    assert lines[0] == "line 0" and lines[-1] == "line 9999"
    marker = next(line for line in lines if line.startswith("[…"))
    assert marker.endswith("chars of stdout cut …]")
    assert len(rendered.text) < 1_100
    assert rendered.notes == [
        f"stdout: {int(marker.split()[1].replace(',', '')):,} chars cut from the middle (cap 1,000 per stream)"
    ]
    assert all(
        line.startswith("line ") or line.startswith("[…") for line in lines
    )  # cut at line breaks


def test_each_stream_has_its_own_budget() -> None:
    caps = OutputCaps(stream_chars=500)
    noise = [out("warning: noisy\n", "stderr") for _ in range(1_000)]
    rendered = cell(out("result: 42\n"), *noise, out("final\n"), caps=caps)
    assert rendered.text.startswith("result: 42\n") and rendered.text.endswith("final")
    assert [n.split(":")[0] for n in rendered.notes] == ["stderr"]


def test_output_held_while_a_cell_runs_stays_bounded() -> None:
    output = CellOutput(OutputCaps(stream_chars=2_000, displays=10))
    for i in range(50_000):
        output.add("stream", {"name": "stdout" if i % 3 else "stderr", "text": f"{i}\n"})
        if i % 100 == 0:
            output.add("display_data", {"data": {"text/plain": f"d{i}"}})
    held = output._sequence.items
    assert len(held) < 2_000
    assert sum(len(getattr(i, "text", "")) for i in held) < 2 * 2_000 + 10 * 10
    rendered = output.render()
    assert "d0" in rendered.text and "d49900" in rendered.text and "d25000" not in rendered.text


def test_rich_outputs_are_capped_in_number_and_in_size() -> None:
    caps = OutputCaps(displays=4, display_chars=300)
    rendered = cell(*(shown({"text/plain": f"out {i}"}) for i in range(10)), caps=caps)
    assert rendered.text.splitlines() == [
        "out 0",
        "out 1",
        "[… 6 rich outputs cut …]",
        "out 8",
        "out 9",
    ]
    assert rendered.notes == ["6 rich outputs cut from the middle (cap 4 per cell)"]
    big = cell(shown({"text/plain": "\n".join(str(i) for i in range(1_000))}), caps=caps)
    assert len(big.text) <= 300 and big.text.startswith("0\n1\n") and big.text.endswith("998\n999")
    assert (
        big.notes[0].startswith("a rich output was cut by ")
        and "(cap 300 per output)" in big.notes[0]
    )


def test_images_are_capped_in_number_and_bytes() -> None:
    caps = OutputCaps(images=2, image_bytes=100)
    pngs = [base64.b64encode(bytes([i]) * 30).decode() for i in range(4)]
    rendered = cell(
        *(shown({"image/png": p, "text/plain": f"fig {i}"}) for i, p in enumerate(pngs)), caps=caps
    )
    assert [i.data for i in rendered.images] == pngs[:2]
    assert rendered.text.splitlines()[2:] == [
        "[image not shown: fig 2]",
        "[image not shown: fig 3]",
    ]
    assert rendered.notes == ["2 images not shown (cap 2 per cell; the first ones are kept)"]
    huge = cell(
        shown({"image/png": base64.b64encode(b"x" * 300).decode(), "text/plain": "big"}), caps=caps
    )
    assert huge.images == [] and huge.text == "big"
    assert huge.notes == ["an image/png image of 300 bytes is not shown: over the 100-byte cap"]


def test_the_whole_text_and_the_traceback_are_capped_too() -> None:
    caps = OutputCaps(text_chars=1_000, stream_chars=5_000, error_chars=300)
    streams = [out(f"{i}\n", "stdout" if i % 2 else "stderr") for i in range(2_000)]
    long_error = {
        "ename": "E",
        "evalue": "v",
        "traceback": [f"line {i}" for i in range(500)] + ["E: v"],
    }
    rendered = cell(*streams, ("error", long_error), caps=caps)
    assert len(rendered.text) <= 1_000
    assert rendered.notes[-1].endswith("chars cut from the middle of the output (cap 1,000 in all)")
    assert (
        rendered.error is not None
        and len(rendered.error) <= 300
        and rendered.error.endswith("E: v")
    )


def test_render_can_narrow_the_caps_output_was_held_with() -> None:
    output = CellOutput()
    for i in range(1_000):
        output.add("stream", {"name": "stdout", "text": f"{i}\n"})
    assert output.render().notes == []
    narrow = output.render(OutputCaps(stream_chars=200))
    assert narrow.text.startswith("0\n1\n") and narrow.text.endswith("998\n999")
    assert narrow.notes[0].startswith("stdout: ") and "(cap 200 per stream)" in narrow.notes[0]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("images", 0, "OutputCaps.images must be a positive whole number, got 0"),
     ("stream_chars", "10", "OutputCaps.stream_chars must be a positive whole number, got '10'"),
     ("text_chars", 50, "OutputCaps.text_chars must leave room for output and cut markers (at least 200), got 50")],
)  # fmt: skip
def test_bad_caps_are_refused_naming_the_value(field: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        OutputCaps(**{field: value})
    assert str(refused.value) == message


def test_clip_middle_is_stable_and_honest_about_its_count() -> None:
    text = "x" * 1_000
    clipped, cut = clip_middle(text, 100)
    assert len(clipped) <= 100 and f"[… {cut:,} chars cut …]" in clipped
    assert len(clipped) - len(f"\n[… {cut:,} chars cut …]\n") + cut == len(text)
    assert clip_middle(clipped, 100) == (clipped, 0)


# ---- the DataFrame table, in this process ----------------------------------------------------


def _table(frame: Any, **caps: int) -> str:
    from tether.kernels.python_prelude import _tether_markdown_table

    return _tether_markdown_table(frame, **caps)


def test_a_small_frame_is_a_whole_table_with_its_shape() -> None:
    pd = pytest.importorskip("pandas", reason="not installed: pandas")
    frame = pd.DataFrame({"name": ["a|b", "line\nbreak"], "x": [1.23456789, float("nan")]})
    assert _table(frame) == (
        "|  | name | x |\n|---|---|---|\n| 0 | a\\|b | 1.23457 |\n| 1 | line break | NaN |\n\n[2 rows × 2 columns]"
    )


def test_a_big_frame_shows_its_corners_and_says_so() -> None:
    pd = pytest.importorskip("pandas", reason="not installed: pandas")
    frame = pd.DataFrame({f"c{j}": range(j, j + 100) for j in range(30)})
    lines = _table(frame, rows=4, columns=4, cell_chars=10).splitlines()
    assert lines[0] == "|  | c0 | c1 | … | c28 | c29 |"
    assert [line.split(" | ")[0] for line in lines[2:7]] == ["| 0", "| 1", "| …", "| 98", "| 99"]
    assert (
        lines[-1]
        == "[100 rows × 30 columns; showing the first 2 and last 2 rows and the first 2 and last 2 columns]"
    )


def test_a_series_and_wide_cells_and_multi_level_columns() -> None:
    pd = pytest.importorskip("pandas", reason="not installed: pandas")
    series = pd.Series(["x" * 100], name="long")
    assert "| 0 | xxxxxxxxx… |" in _table(series, cell_chars=10)
    frame = pd.DataFrame([[1, 2]], columns=pd.MultiIndex.from_tuples([("a", "x"), ("a", "y")]))
    assert _table(frame).splitlines()[0] == "|  | a / x | a / y |"


# ---- real kernels ---------------------------------------------------------------------------


def test_python_echo_streams_and_display(python_kernel: Any) -> None:
    assert render(python_kernel, "40 + 2").text == "42"
    interleaved = (
        "import sys\nprint('a')\nprint('b', file=sys.stderr)\nprint('c')\nsys.stderr.write('d\\n')"
    )
    assert render(python_kernel, interleaved).text == "a\nb\nc\nd\n2"
    shown_ = render(
        python_kernel,
        "from IPython.display import Markdown, display\ndisplay(Markdown('**hi**'))\ndisplay({'k': 1})",
    )
    assert shown_.text == "**hi**\n{'k': 1}"
    assert render(python_kernel, "x_silent = 1;").text == ""


def test_python_dataframe_is_a_capped_markdown_table(python_kernel: Any) -> None:
    pytest.importorskip("pandas", reason="not installed: pandas")
    rendered = render(
        python_kernel, "import pandas as pd\npd.DataFrame({'n': range(1000), 's': ['v'] * 1000})"
    )
    lines = rendered.text.splitlines()
    assert lines[:3] == ["|  | n | s |", "|---|---|---|", "| 0 | 0 | v |"]
    assert "| … | … | … |" in lines and "| 999 | 999 | v |" in lines
    assert lines[-1] == "[1000 rows × 2 columns; showing the first 10 and last 10 rows]"
    assert rendered.images == [] and "<table" not in rendered.text


def test_python_matplotlib_figures_are_pngs_without_duplicates(python_kernel: Any) -> None:
    pytest.importorskip("matplotlib", reason="not installed: matplotlib")
    echoed = render(
        python_kernel,
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\nfig",
    )
    assert [i.mime for i in echoed.images] == ["image/png"]
    assert base64.b64decode(echoed.images[0].data).startswith(b"\x89PNG")
    assert echoed.text == "[image 1: <Figure size 640x480 with 1 Axes>]"
    shown_ = render(python_kernel, "plt.plot([3, 1])\nplt.show()")
    assert len(shown_.images) == 1
    implicit = render(python_kernel, "plt.figure()\nplt.plot([1])\nplt.figure()\nplt.plot([2]);")
    assert len(implicit.images) == 2 and echoed.images[0] not in implicit.images


def test_python_errors_are_clean_tracebacks(python_kernel: Any) -> None:
    rendered = render(python_kernel, "print('before')\ndef f():\n    raise ValueError('bad')\nf()")
    assert rendered.text == "before"
    assert rendered.error is not None and "\x1b" not in rendered.error
    assert rendered.error.splitlines()[0] == "Traceback (most recent call last):"
    assert "----> 4 f()" in rendered.error and rendered.error.endswith("ValueError: bad")
    helper = render(python_kernel, '%pip install "x')
    assert helper.error is not None and "tether-prelude" not in helper.error
    assert "shlex" not in helper.error and helper.error.endswith("ValueError: No closing quotation")


def test_python_clear_output_and_progress(python_kernel: Any) -> None:
    code = (
        "from IPython.display import clear_output\nimport sys\n"
        "for i in range(5):\n    clear_output(wait=True)\n    print(f'step {i}')\n"
        "for p in range(0, 101, 25):\n    sys.stdout.write(f'\\r{p:3d}%')\nprint()"
    )
    rendered = render(python_kernel, code)
    assert rendered.text == "step 4\n100%"
    assert rendered.notes == [
        "clear_output cleared earlier output 4 times; shown is what came after"
    ]


def test_deno_echo_streams_display_and_errors(deno_kernel: Any) -> None:
    assert render(deno_kernel, "40 + 2").text == "42"
    assert (
        render(deno_kernel, "console.log('a'); console.error('b'); console.log('c'); 'end'").text
        == 'a\nb\nc\n"end"'
    )
    markdown = render(deno_kernel, "Deno.jupyter.md`**hi**`")
    assert markdown.text == "**hi**"
    image = render(
        deno_kernel, f"await Deno.jupyter.display({{'image/png': '{PNG}'}}, {{raw: true}}); 1"
    )
    assert image.images == [Image("image/png", PNG)] and image.text == "[image 1: image/png]\n1"
    failed = render(deno_kernel, "function f() { throw new Error('bad') }\nf()")
    assert failed.error is not None and failed.error.startswith("Error: bad\n    at f (")
    assert render(deno_kernel, "const broken = (").error == "Error: Execution failed"


def test_deno_clear_output(deno_kernel: Any) -> None:
    code = "console.log('old')\nawait Deno.jupyter.broadcast('clear_output', {wait: false})\nconsole.log('new')"
    rendered = render(deno_kernel, code)
    assert rendered.text == "new"
