"""How numbers, tensors and check tables look: one formatter at every size."""
from __future__ import annotations

import io
import re

import numpy as np

from gradcalc.autodiff.graph import format_array

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

    from gradcalc.cli.checking import _report, run_check_file
    from gradcalc.parser.checks import CheckDefaults

    path = "examples/elementwise.gc"
    outcomes = run_check_file(path, (ROOT / path).read_text(), CheckDefaults())
    console = Console(file=io.StringIO(), width=80, force_terminal=False)
    _report(outcomes, True, console)
    text = console.file.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    for o in outcomes:
        assert re.search(rf"\b{re.escape(path)}:{o.line}\b", text), o.line
    assert "…" in text  # the long expressions were shortened instead
