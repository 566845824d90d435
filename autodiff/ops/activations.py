"""Activation functions of neural networks: gelu, silu, leaky_relu, elu, softsign, logsigmoid.

The logistic function appears in several derivatives. It is computed here as
exp(-softplus(-x)), which keeps full relative precision in both tails (sigmoid(-40) is
4.2e-18, not 0) and, being made of ops with their own VJPs, stays differentiable again.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..registry import ARRAY_MATH, Check, Edge, Reference, Torch
from . import torch_calls
from .arithmetic import elementwise, near_zero, scaled
from .special import TWO_OVER_SQRT_PI, erfc, exp_of_minus_square, product_rounding_error, square_rounding_error

SQRT_HALF = math.sqrt(0.5)
# sqrt(0.5) - SQRT_HALF, from SQRT_HALF**2 = 0.5 - 2 SQRT_HALF SQRT_HALF_LOW (exact products)
SQRT_HALF_LOW = float(((0.5 - SQRT_HALF * SQRT_HALF) - square_rounding_error(SQRT_HALF)) / (2.0 * SQRT_HALF))
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_C = math.sqrt(2.0 / math.pi)  # the tanh approximation of Hendrycks and Gimpel
GELU_K = 0.044715
# What the two constants lose to rounding (sqrt(2 / pi) and the decimal 0.044715 minus their
# floats; tests/test_accuracy.py recomputes both with mpmath).
GELU_C_LOW = -4.98465440455546e-17
GELU_K_LOW = 2.1960211427085595e-18


def logistic(m: Any, x: Any) -> Any:
    """1 / (1 + e ** -x), accurate in both tails."""
    return m.exp(-m.softplus(-x))


# ---- gelu --------------------------------------------------------------------------------
APPROXIMATIONS = ("none", "tanh")


def _gelu_check(approximate: str) -> None:
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")


# Past this |x|, s(2u) is 0 or 1 to the last digit of every derivative, and x**3 might
# not be a float.
_GELU_FAR = 1e20


def _tanh_gelu_argument(x: Any) -> tuple[Any, Any]:
    """2u = 2c (x + k x**3) for |x| < _GELU_FAR as a high part and a low part: the rounded
    2u alone moves s(2u) by 2|u| units in the last place in the left tail (1.1e-14 of the
    value at -20, 6e-14 of a derivative), where the pair is exact to about 1e-30. Built from
    exact products (Dekker's) and sums (Knuth's), c and k with their own rounding."""
    square = x * x
    cube = square * x
    cube_low = product_rounding_error(square, x) + square_rounding_error(x) * x
    term = GELU_K * cube
    term_low = product_rounding_error(GELU_K, cube) + GELU_K * cube_low + GELU_K_LOW * cube
    w = x + term
    added = w - x
    w_low = ((x - (w - added)) + (term - added)) + term_low
    two_c = 2.0 * GELU_C
    t = two_c * w
    return t, product_rounding_error(two_c, w) + two_c * w_low + 2.0 * GELU_C_LOW * w


def _tanh_gelu(x: Any) -> Any:
    # x s(2u), s the logistic function (= (1 + tanh(u)) / 2, without 1 + tanh cancelling in
    # the left tail), with 2u's low part put back to first order: s(t + e) = s + s (1 - s) e.
    far = np.abs(x) >= _GELU_FAR
    inside = np.where(far, 0.0, x)
    t, low = _tanh_gelu_argument(inside)
    s = logistic(ARRAY_MATH, t)
    near = x * (s + s * logistic(ARRAY_MATH, -t) * low)
    if not far.any():
        return near
    return np.where(far, x * logistic(ARRAY_MATH, np.where(far, np.sign(x), 0.0) * np.inf), near)


def _gelu(x: Any, approximate: str = "none") -> Any:
    _gelu_check(approximate)
    if approximate == "tanh":
        return _tanh_gelu(x)
    # x * Phi(x), with Phi through erfc so that the left tail does not cancel. The rounding
    # dz of z = -x / sqrt(2) moves erfc(z) by 2 z dz relatively (1.5e-13 at x = -37): put
    # back to first order, dz from the exact product and sqrt(0.5)'s own rounding.
    z = -SQRT_HALF * x
    near = np.abs(x) < 60.0
    inside = np.where(near, x, 0.0)
    dz = -(product_rounding_error(SQRT_HALF, inside) + SQRT_HALF_LOW * inside)
    return 0.5 * x * (erfc.forward(z) - dz * TWO_OVER_SQRT_PI * np.exp(-np.where(near, z, 0.0) ** 2))


def _tanh_gelu_slope(m: Any, x: Any) -> Any:
    """d/dx [x s(2u)] = s(2u) + x u' sech(u)**2 / 2. Written with sigmoid and sech, whose
    own derivatives (sech**2 / 4 and -sech tanh) do not cancel near 0 (through s (1 - s)
    the third derivative had the wrong sign below 1e-20). 2u's low part enters each factor
    to first order as a constant; past _GELU_FAR the slope is the constant 1 or 0 (it was
    nan at 1e200: 0 * inf)."""
    raw = m.raw(x)
    far = np.abs(raw) >= _GELU_FAR
    inside = m.where(far, 0.0, x) if far.any() else x
    t = (2.0 * GELU_C) * (inside + GELU_K * (inside * inside * inside))
    high, low = _tanh_gelu_argument(np.where(far, 0.0, raw))
    shift = (high - m.raw(t)) + low  # what the rounded t misses, as a constant
    s = m.sigmoid(t)
    half = 0.5 * t
    sech = m.sech(half)
    raw_s = m.raw(s)
    du = GELU_C * (1.0 + (3.0 * GELU_K) * (inside * inside))
    # s(t + e) = s + s (1 - s) e;  sech(u + e/2)**2 = sech(u)**2 (1 - tanh(u) e)
    near = (s + raw_s * (1.0 - raw_s) * shift) + (0.5 * inside) * du * (sech * sech) * (1.0 - np.tanh(m.raw(half)) * shift)
    return m.where(far, (raw > 0) * 1.0, near) if far.any() else near


def _gelu_vjp(m: Any, g: Any, ans: Any, x: Any, approximate: str = "none") -> Any:
    if approximate == "tanh":
        return scaled(m, g, _tanh_gelu_slope(m, x))
    # d/dx [x Phi(x)] = Phi(x) + x phi(x).
    return scaled(m, g, 0.5 * m.erfc(-SQRT_HALF * x) + x * INV_SQRT_2PI * exp_of_minus_square(m, x, 0.5))


def _gelu_case(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-4, 4, (2, 3))], {"approximate": str(rng.choice(APPROXIMATIONS))}


gelu = elementwise(
    "gelu", _gelu, _gelu_vjp,
    "x * Phi(x) (Phi the normal CDF); approximate='tanh' for the tanh formula", complex_safe=False,
    method=False, check=Check(make=_gelu_case),
    rule="g * (Phi(x) + x * phi(x)) (Phi, phi the normal CDF and density; for 'tanh' the derivative of its formula)",
    torch=Torch(
        lambda t, x, approximate="none": t.nn.functional.gelu(x, approximate=approximate),
        agrees_at=(
            ([[-40.0, -10.0, 0.0, 10.0]], {}),
            ([[math.nan, math.inf, -math.inf]], {}),
        ),
    ),
    reference=Reference("x * ncdf_wide(x)", "ncdf_wide(x) + x * npdf(x)", "spread(-40, 1e300)", second="npdf(x) * (2 - x * x)"),
)

# ---- silu, softsign, logsigmoid ------------------------------------------------------------


def _silu(x: Any) -> Any:
    # x / (1 + e ** -x), for x < 0 as (x h) h / (1 + h**2) with h = e ** (x / 2): x e ** x
    # would pass through a subnormal e ** x below -708 (or 0 * inf), where silu(-710) is
    # -3.2e-306, a normal number. Branches on the real part, so complex steps work.
    negative = np.real(x) < 0
    h = np.exp(0.5 * np.where(negative, x, -x))
    return np.where(negative, (x * h) * h, x) / (1.0 + h * h)


def _silu_vjp(m: Any, g: Any, ans: Any, x: Any) -> Any:
    # d/dx [x s(x)] = s (1 + x s(-x)), s = sigmoid (1 - s = s(-x), so no tail cancels). For
    # x < 0, as the forward does, with s = h**2 s(-x) and h = e ** (x / 2), multiplied in
    # an order that keeps each product a normal number where the result is one (through
    # a subnormal s(x) it lost 6e-14 at -714.9).
    negative = m.raw(x) < 0
    h = m.exp(0.5 * m.where(negative, x, 0.0))
    rest = logistic(m, -x)
    left = h * (1.0 + x * rest) * h * rest
    return scaled(m, g, m.where(negative, left, logistic(m, x) * (1.0 + x * rest)))


silu = elementwise(
    "silu", _silu, _silu_vjp, "x * sigmoid(x)", aliases=("swish",), method=False, low=-4.0, high=4.0,
    rule="g * (s + x * s * (1 - s)), s = sigmoid(x)",
    torch=Torch("torch.nn.functional.silu", agrees_at=(([[-1000.0, -40.0, 0.0, 40.0]], {}), ([[math.inf, -math.inf]], {}))),
    reference=Reference(
        "x * logistic(x)", "logistic(x) * (1 + x * logistic(-x))", "spread(-700, 1e300)", second="logistic(x) * logistic(-x) * (2 - x * tanh(x / 2))",
    ),
)


def _softsign(x: Any) -> Any:
    if np.iscomplexobj(x):  # complex step: |x| as x or -x, by the real part's sign
        return x / (1.0 + np.where(np.real(x) < 0, -x, x))
    # +-1 at +-inf, the limits (x / (1 + |x|) is inf / inf there)
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(x), np.sign(x), x / (1.0 + np.abs(x)))


def _softsign_vjp(m: Any, g: Any, ans: Any, x: Any) -> Any:
    # (1 / d) * (1 / d), not 1 / d**2: differentiated again, d**4 overflowed from 1e77 on.
    r = 1.0 / (1.0 + m.abs(x))
    return scaled(m, g, r * r)


softsign = elementwise(
    "softsign", _softsign, _softsign_vjp, "x / (1 + |x|)", method=False,
    # smooth once; the second derivative jumps at 0
    kink=near_zero, kink_gap=1e-3,
    rule="g / (1 + |x|)**2",
    edges=(Edge("at 0", [0.0], 0.0, (1.0,), second=(0.0,), note="the second derivative jumps from 2 to -2 there"),
           Edge("at +-inf", [[math.inf, -math.inf]], [1.0, -1.0], ([0.0, 0.0],), order=1, torch="nan; gradient nan",
                note="the limits")),
    torch=Torch("torch.nn.functional.softsign", agrees_at=(([[-1.0, 0.0, 1.0]], {}),)),
    reference=Reference("x / (1 + abs(x))", "1 / (1 + abs(x)) ** 2", "spread(-1e300, 1e300)", second="-2 * sign(x) / (1 + abs(x)) ** 3"),
)


logsigmoid = elementwise(
    "logsigmoid", lambda x: -np.logaddexp(0.0, -x), lambda m, g, ans, x: scaled(m, g, logistic(m, -x)),
    "log(sigmoid(x)) = -softplus(-x), finite for any x (-1000 at x = -1000)", complex_safe=False, method=False,
    rule="g * sigmoid(-x)",
    edges=(Edge("far in the left tail", [-1000.0], -1000.0, (1.0,), note="exact: -softplus(-x)"),),
    torch=Torch("torch.nn.functional.logsigmoid", agrees_at=(([[-1000.0, -40.0, 0.0, 40.0, 1000.0]], {}), ([[math.inf, -math.inf]], {}))),
    reference=Reference("-log1p(exp(-x))", "logistic(-x)", "spread(-1e300, 700)", second="-logistic(x) * logistic(-x)"),
)

# ---- leaky_relu, elu ------------------------------------------------------------------------


leaky_relu = elementwise(
    "leaky_relu", lambda x, slope=0.01: np.where(np.real(x) > 0, x, slope * x),
    lambda m, g, ans, x, slope=0.01: g * np.where(m.raw(x) > 0, 1.0, slope),
    "x where x > 0, else slope * x; gradient slope at 0",
    method=False, kink=near_zero, kink_gap=1e-3,
    edges=(Edge("at 0", [0.0], 0.0, (0.01,), note="slope, from the left branch"),),
    torch=Torch(
        lambda t, x, slope=0.01: t.nn.functional.leaky_relu(x, slope),
        variants=({"slope": 0.2},),
        make=torch_calls.squashed,
        agrees_at=(
            ([[-1.0, 0.0, 1.0]], {}),
        ),
    ),
    reference=Reference("x if x > 0 else mpf(0.01) * x", "mpf(1) if x > 0 else mpf(0.01)", "spread(-1e300, 1e300)", second="mpf(0)"),
)


def _elu_vjp(m: Any, g: Any, ans: Any, x: Any, alpha: float = 1.0) -> Any:
    positive = m.raw(x) > 0
    # exp of the negative part only, so large positive x cannot overflow into 0 * inf.
    return scaled(m, g, m.where(positive, 1.0, alpha * m.exp(m.where(positive, 0.0, x))))


elu = elementwise(
    "elu", lambda x, alpha=1.0: np.where(np.real(x) > 0, x, alpha * np.expm1(np.where(np.real(x) > 0, 0.0, x))), _elu_vjp,
    "x where x > 0, else alpha * (e ** x - 1); gradient alpha at 0",
    method=False, kink=near_zero, kink_gap=1e-3,
    rule="g * (1 where x > 0, else alpha * exp(x))",
    edges=(Edge("at 0", [0.0], 0.0, (1.0,), second=(1.0,), torch="second derivative 0",
                note="alpha, and second derivative alpha: both from the left branch"),),
    torch=Torch(
        lambda t, x, alpha=1.0: t.nn.functional.elu(x, alpha),
        variants=({"alpha": 1.5},),
        make=torch_calls.squashed,
        agrees_at=(
            ([[-1.0, 0.0, 1.0, 1000.0]], {}, 1),
        ),
    ),
    reference=Reference("x if x > 0 else expm1(x)", "mpf(1) if x > 0 else exp(x)", "spread(-700, 1e300)", second="mpf(0) if x > 0 else exp(x)"),
)
