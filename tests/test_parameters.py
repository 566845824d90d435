"""An op's parameters as the language passes them: a value (full's, arange's and linspace's
bounds, clip's and pad's) stays the float64 the language computed, while what counts
things (a shape, an axis, a seed) is a whole number, with a clear error when it is too
large. NumPy's own functions, given the same float64 numbers, are the oracle."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.parser import Session

from .test_cli import gradcalc

# (how the language writes a number, the float64 it stands for)
NUMBERS = [
    ("7", 7.0), ("0", 0.0), ("-0.0", -0.0), ("0.5", 0.5), ("1e19", 1e19), ("-1e19", -1e19), ("1e30", 1e30),
    ("1e300", 1e300), ("-1e300", -1e300), ("inf", math.inf), ("-inf", -math.inf), ("nan", math.nan),
    ("2**53 + 1", float(2**53) + 1), ("9007199254740993", float(9007199254740993)), ("2**63", 2.0**63),
]


def _json(values: np.ndarray) -> list | float | str:
    """NumPy's result as --json writes it: inf and nan as strings."""
    items = [v if math.isfinite(v) else str(v) for v in np.ravel(values).tolist()]
    return items if np.ndim(values) else items[0]


def evaluated(expression: str) -> dict:
    done = gradcalc("eval", expression, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("text, number", NUMBERS, ids=[t for t, _ in NUMBERS])
def test_full_holds_the_value_numpy_full_holds(text, number):
    doc = evaluated(f"full(2, {text})")
    assert doc["value"] == _json(np.full(2, number)) and doc.get("dtype", "float64") == "float64"


@pytest.mark.parametrize("call, oracle", [
    ("arange(5)", np.arange(5.0)),
    ("arange(0, 1e300, 1e299)", np.arange(0, 1e300, 1e299)),
    ("arange(-1e300, 1e300, 1e299)", np.arange(-1e300, 1e300, 1e299)),
    ("arange(1e19, 1e19 + 4096 * 3, 4096)", np.arange(1e19, 1e19 + 4096 * 3, 4096.0)),
    ("arange(2**53, 2**53 + 8, 2)", np.arange(2.0**53, 2.0**53 + 8, 2.0)),
    ("linspace(-1e300, 1e300, 3)", np.linspace(-1e300, 1e300, 3)),
    ("linspace(0, 1e19, 3)", np.linspace(0, 1e19, 3)),
    ("clip([1, 2e19], low=1e30)", np.clip([1, 2e19], 1e30, None)),
    ("clip([1, 2e19], high=1e19)", np.clip([1, 2e19], None, 1e19)),
    ("pad([1, 2], 1, 1e30)", np.pad([1.0, 2.0], 1, constant_values=1e30)),
    ("getitem([1, 2, 3], 1)", np.array([1.0, 2.0, 3.0])[1]),
])
def test_value_parameters_are_numpys_floats(call, oracle):
    assert evaluated(call)["value"] == _json(oracle)


@pytest.mark.parametrize("start, stop, num", [(-1e308, 1e308, 3), (-1.7e308, 1.7e308, 7), (-1e308, 1.5e308, 5)])
def test_linspace_over_a_span_that_overflows_is_evenly_spaced(start, stop, num):
    """stop - start is inf here, where np.linspace's points are nan and inf; the oracle is
    mpmath at 2,000 bits, rounded once: the ends exact, the rest to an ulp or two."""
    mpmath = pytest.importorskip("mpmath")
    got = evaluated(f"linspace({start!r}, {stop!r}, {num})")["value"]
    with mpmath.workprec(2000):
        exact = [float(mpmath.mpf(start) + (mpmath.mpf(stop) - mpmath.mpf(start)) * k / (num - 1)) for k in range(num)]
    assert got[0] == start and got[-1] == stop
    assert got == pytest.approx(exact, rel=1e-15, abs=1e293)


def test_a_constant_prints_alike_however_it_is_made():
    """full(2, 7) is a tensor of the numbers 7.0, as [7, 7] is; full(2, 0) is zeros(2)."""
    def lines(expression):
        return gradcalc("eval", expression).stdout.splitlines()
    assert lines("full(2, 7)") == lines("[7, 7]")
    assert lines("full(2, 0)") == lines("zeros(2)")
    assert lines("full(2, 7)")[0] == "value: [7.0, 7.0]  (shape 2)"


@pytest.mark.parametrize("call, words", [
    ("zeros(1e30)", "shape is too large: [1e+30]"),
    ("ones([1e30, 2])", "shape is too large: [1e+30, 2]"),
    ("zeros(1e300)", "shape is too large"),
    ("rand(2, seed=1e30)", "seed is too large: 1e+30"),
    ("sum([1, 2], axis=1e30)", "axis is too large: 1e+30"),
    ("linspace(0, 1, 1e30)", "num is too large: 1e+30"),
    ("eye(1e20)", "n is too large: 1e+20"),
    ("zeros(2**40, 2**40)", "would have 1.209e+24 elements, over the cap"),
    ("arange(-1e300, 1e300)", "would have 2.000e+300 elements, over the cap"),
    ("arange(0, 1e300, 1e-300)", "would have 1.000e+600 elements, over the cap"),
    ("arange(-1e308, 1e308)", "would have 2.000e+308 elements, over the cap"),
    ("zeros(inf)", "shape must be a whole number or a list of whole numbers, got [inf]"),
    ("sum([1, 2], axis=nan)", "axis must be a whole number or a list of whole numbers, got nan"),
    ("arange(0, inf)", "stop must be a finite number, got inf"),
])
def test_a_whole_number_too_large_is_said_so(call, words):
    done = gradcalc("eval", call)
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert len(done.stderr.splitlines()[0]) < 200  # no number hundreds of digits long


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True), st.integers(0, 4))
def test_full_is_numpys_full_for_any_float(number, n):
    out = Session().run_source(f"full({n}, {number!r})")[-1].value.data
    expected = np.full(n, number)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)
    assert math.isnan(number) or np.array_equal(np.signbit(out), np.signbit(expected))  # (repr writes -nan as nan)


finite = st.floats(-1e6, 1e6, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(finite, finite, finite.filter(lambda s: abs(s) > 1e-3))
def test_arange_is_numpys_arange_for_any_floats(start, stop, step):
    expected = np.arange(start, stop, step)
    if expected.size > 10_000:
        return
    out = Session().run_source(f"arange({start!r}, {stop!r}, {step!r})")[-1].value.data
    np.testing.assert_array_equal(out, expected)
