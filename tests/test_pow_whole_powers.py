"""The derivative of a ** k for a whole k >= 1 given as one float64 number (the squares of
an L2 term) skips the checks for 0 ** 0 and fractional powers of negative bases, which
cannot arise there: it must give the general path's bits exactly, edges included, and
PyTorch's float64 numbers."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gradcalc.autodiff.namespaces import ARRAY_MATH
from gradcalc.autodiff.ops.arithmetic import _pow_dbase

EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e308, -1e-320, math.inf, -math.inf, math.nan]
values = st.one_of(st.sampled_from(EDGES), st.floats(allow_nan=True, allow_infinity=True, width=64))


@settings(max_examples=400, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 6), elements=values), hnp.arrays(np.float64, st.integers(1, 6), elements=values),
       st.sampled_from([1.0, 2.0, 3.0, 4.0, 7.0, 1e6]))
def test_a_whole_power_gives_the_general_paths_bits(a, g, k):
    n = min(len(a), len(g))
    a, g = a[:n], g[:n]
    with np.errstate(all="ignore"):
        ans = a**k
        fast = _pow_dbase(ARRAY_MATH, g, ans, a, np.array(k))  # one number: the whole-power path
        general = _pow_dbase(ARRAY_MATH, g, ans, a, np.array([k]))  # an array of one: every check
    np.testing.assert_array_equal(fast, general)


@pytest.mark.parametrize("k", [1.0, 2.0, 3.0])
def test_a_whole_power_agrees_with_pytorch(k):
    torch = pytest.importorskip("torch")
    a = np.array([-3.0, -0.5, 0.0, 0.25, 2.0, 1e150])
    g = np.array([1.0, -2.0, 0.0, 3.0, 0.5, 1.0])
    t = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    (expected,) = torch.autograd.grad(t**k, t, torch.tensor(g))
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(_pow_dbase(ARRAY_MATH, g, a**k, a, np.array(k)), expected.numpy(), rtol=1e-15)
