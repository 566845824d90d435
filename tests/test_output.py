"""How numbers, tensors and check tables look: one formatter at every size."""
from __future__ import annotations

import ast
import io
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradcalc.cli.formatting import format_array

from .test_cli import ROOT, gradcalc


def test_one_formatter_at_every_size():
    small = format_array(np.arange(3) / 3)
    large = format_array(np.arange(3000) / 3)
    assert small == "[0.0, 0.3333333333333333, 0.6666666666666666]"
    assert large.startswith("[0.0, 0.3333333333333333, 0.6666666666666666, ..., 999.0, 999.3333333333334, 999.6666666666666]")
    assert large.endswith("(6 of 3000 elements shown)")
    assert format_array(np.arange(3000) / 3, digits=3).startswith("[0, 0.333, 0.667, ..., 999, 999, 1e+03]")
    assert format_array(np.arange(3) / 3, digits=3) == "[0, 0.333, 0.667]"


def test_full_prints_every_element_at_full_precision():
    out = gradcalc("eval", "arange(3000) / 3", "--full").stdout
    value = out.splitlines()[0]
    assert value.count(",") == 2999 and "999.6666666666666" in value and "..." not in value
    summary = gradcalc("eval", "arange(3000) / 3").stdout.splitlines()[0]
    assert "(6 of 3000 elements shown)" in summary and "3.333e+01" not in summary


def test_an_empty_tensor_with_a_huge_shape_prints_at_once():
    out = gradcalc("eval", "zeros(10**7, 0)").stdout
    assert len(out) < 1000 and "[[], [], [], ..., [], [], []]" in out


def test_check_table_at_80_columns_keeps_file_and_line_whole():
    from rich.console import Console

    from gradcalc.cli.check_command import _report
    from gradcalc.cli.parallel import run_checks
    from gradcalc.parser.check_statements import CheckDefaults

    path = "examples/elementwise.gc"
    [(_, outcomes)] = run_checks([(path, (ROOT / path).read_text())], CheckDefaults(), [])
    console = Console(file=io.StringIO(), width=80, force_terminal=False)
    _report(outcomes, True, console)
    text = console.file.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    for o in outcomes:
        assert re.search(rf"\b{re.escape(path)}:{o.line}\b", text), o.line
    assert "…" in text  # the long expressions were shortened instead


def test_a_very_long_line_is_cut_in_error_echoes_and_headings(tmp_path):
    long = tmp_path / "long.gc"
    long.write_text(" + ".join(["1"] * 5_000) + " + nosuch\n" + " + ".join(["2"] * 5_000) + "\n")
    done = gradcalc("run", str(long))
    assert len(done.stderr) < 500 and "unknown name 'nosuch'" in done.stderr
    echo, caret = done.stderr.splitlines()[1:3]
    assert echo[caret.index("^"):].startswith("nosuch")


def test_headings_and_check_lines_are_cut(tmp_path):
    script = tmp_path / "long.gc"
    script.write_text("x = 0.5\n" + " + ".join(["x"] * 5000) + "\ncheck " + " + ".join(["tanh(x)"] * 2000) + "\n")
    out = gradcalc("run", str(script)).stdout
    assert all(len(line) < 300 for line in out.splitlines())


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@given(st.lists(finite, min_size=1, max_size=60), st.integers(1, 4))
def test_every_number_reads_back_exactly(values, rows):
    """Full precision means the text reads back as the same floats (Python's repr)."""
    array = np.array(values[: len(values) // rows * rows] or values[:1]).reshape(rows if len(values) >= rows else 1, -1)
    text = format_array(array)
    assert np.array_equal(np.array(ast.literal_eval(text)), array)


@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 3))
def test_a_summary_says_how_many_elements_it_shows(n, m, k):
    array = np.arange(float(n * m * k)).reshape(n, m, k)
    text = format_array(array, threshold=0)
    shown = len(re.findall(r"\d+\.0", text.split("  (")[0]))
    if shown < array.size:
        assert text.endswith(f"({shown} of {array.size} elements shown)")
    else:
        assert np.array_equal(np.array(ast.literal_eval(text)), array)


def test_scalar_engine_notes_use_its_own_labels():
    out = gradcalc("eval", "log(x) + x.sqrt()", "x=0", "--engine", "scalar").stdout
    assert "note: the first inf came from log(0.0)" in out
    assert "note: an inf gradient came from the backward pass of sqrt(0.0)" in out  # sqrt is a primitive there


@pytest.mark.parametrize("folder", ["", "/work/main/examples/", "/a/much/longer/folder/for/examples/", "/x" * 30 + "/"])
def test_check_table_at_80_columns_never_cuts_where_status_or_numbers(folder):
    """D8: a long path used to squeeze `file:line` to `arithmetic.gc:…`, PASS to `PA…` and
    5.55e-17 to `5.55e-…`; only the expression may be shortened."""
    from rich.console import Console

    from gradcalc.cli.check_command import _report, check_line
    from gradcalc.cli.parallel import run_checks
    from gradcalc.parser.check_statements import CheckDefaults

    origin = folder + "arithmetic.gc"
    [(_, outcomes)] = run_checks([(origin, (ROOT / "examples/arithmetic.gc").read_text())], CheckDefaults(), [])
    console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    _report(outcomes, True, console)
    text = console.file.getvalue()
    rows = [line for line in text.splitlines() if re.search(r"arithmetic\.gc:\d+\b", line)]
    for o in outcomes:
        row = next(r for r in rows if re.search(rf"{re.escape(origin)}:{o.line}\b", r))
        assert re.search(rf"\b{o.status.upper()}\b", row), row
        if "│" not in row:  # a path too long for a table: the whole plain line
            assert row == check_line(o)
        elif o.status != "error":
            assert f"{o.max_abs_error:.2e}" in row and f"{o.max_rel_error:.2e}" in row, row
    if len(origin) < 40:
        assert all(len(line) <= 80 for line in text.splitlines())


def test_a_tuple_result_s_json_holds_its_numbers():
    # (a helper's note: the numbers of a tuple were one line of text under the key "help")
    import json as _json

    from .test_cli import gradcalc as _gradcalc

    doc = _json.loads(_gradcalc("eval", "value_and_grad(lambda v: sum(v ** 2))([1, 2])", "--json").stdout)
    assert doc == {"values": [5.0, [2.0, 4.0]], "shown": "(5.0, [2.0, 4.0])"}
    assert _json.loads(_gradcalc("eval", "sin", "--json").stdout) == {"function": "<built-in function sin>"}
    assert list(_json.loads(_gradcalc("eval", "help(sin)", "--json").stdout)) == ["help"]
