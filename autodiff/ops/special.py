"""More elementwise functions: base-2 and base-10 logarithms, hyperbolic and inverse
trigonometric functions, atan2, hypot, the error function, and small algebraic ones.

Each derivative is written in the form that keeps full precision near the edges of the
domain: (1 - x)(1 + x) instead of 1 - x**2 (asin, atanh), hypot(x, 1) instead of
sqrt(x**2 + 1) (asinh, which would overflow).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..forward import DIAGONAL
from ..registry import BINARY_SHAPES, Check, Edge, Reference, Torch, defop
from .arithmetic import ELEM, elementwise, masked, near_zero, scaled

LN2 = math.log(2.0)
LN10 = math.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# ---- the error function ---------------------------------------------------------------
# NumPy has no erf. The C library's erf and erfc (through Python's math module) are
# accurate to about one ulp; np.frompyfunc applies them elementwise (about 10^7 elements
# a second, which is plenty for a calculator). Real inputs only: erf of a complex number
# is refused, so erf is not complex-safe.
_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _real_only(fn: Any, x: Any) -> Any:
    if np.iscomplexobj(x):
        raise TypeError("erf and erfc take real numbers only")
    return np.asarray(fn(x), dtype=np.float64)


def _halves(x: Any) -> tuple[Any, Any]:
    """x as high + low, each with at most 26 significant bits (Veltkamp's split)."""
    big = x * 134217729.0  # 2**27 + 1
    high = big - (big - x)
    return high, x - high


def product_rounding_error(a: Any, b: Any) -> Any:
    """a*b - fl(a*b), exactly (Dekker's product), for |a|, |b| well inside the range."""
    a_high, a_low = _halves(a)
    b_high, b_low = _halves(b)
    return ((a_high * b_high - a * b) + a_high * b_low + a_low * b_high) + a_low * b_low


def square_rounding_error(x: Any) -> Any:
    """x*x - fl(x*x), exactly."""
    return product_rounding_error(x, x)


_GAUSSIAN_EDGE = 40.0  # exp(-40**2 / 2) is 0 in float64


def exp_of_minus_square(m: Any, x: Any, scale: float = 1.0) -> Any:
    """exp(-scale * x**2). For |x| near 26, rounding x**2 alone would cost 60 ulps in exp;
    the rounding error of the square (a constant as far as derivatives go) puts them
    back. Only where exp(-x**2) is a number at all: past that the error of a square of
    1e140 is itself 1e264, and exp(-error) would be inf next to exp(-x**2) = 0."""
    raw = m.raw(x)
    near = np.abs(raw) < _GAUSSIAN_EDGE
    error = np.where(near, square_rounding_error(np.where(near, raw, 0.0)), 0.0)
    if near.all():
        return m.exp(-scale * (x * x)) * np.exp(-scale * error)
    # Far out, exp(-x**2) and all its derivatives are 0: selected as the constant, so that
    # no mode multiplies exp's 0 by the inf of x**2's slope at x = inf (forward over
    # reverse gave erf'' = nan there, reverse over reverse 0).
    inside = m.where(near, x, 0.0)
    return m.where(near, m.exp(-scale * (inside * inside)) * np.exp(-scale * error), 0.0)


def _gaussian(m: Any, x: Any) -> Any:
    """d erf(x) / dx = 2 / sqrt(pi) * exp(-x**2)."""
    return TWO_OVER_SQRT_PI * exp_of_minus_square(m, x)


erf = elementwise(
    "erf", lambda x: _real_only(_erf, x), lambda m, g, ans, x: scaled(m, g, _gaussian(m, x)),
    "error function 2/sqrt(pi) * integral of exp(-t**2) from 0 to x", complex_safe=False,
    rule="g * 2 / sqrt(pi) * exp(-x**2)",
    edges=(Edge("at +-inf", [[math.inf, -math.inf]], [1.0, -1.0], ([0.0, 0.0],), second=([0.0, 0.0],),
                torch="second derivative nan", note="the limits"),),
    torch=Torch("torch.erf", agrees_at=(([[math.inf, -math.inf, 0.0, 30.0]], {}, 1),)),
    reference=Reference("erf(x)", "2 / sqrt(pi) * exp(-x * x)", "spread(-30, 30)", second="-4 * x / sqrt(pi) * exp(-x * x)"),
)
erfc = elementwise(
    "erfc", lambda x: _real_only(_erfc, x), lambda m, g, ans, x: masked(m, g, -g * _gaussian(m, x)),
    "complementary error function 1 - erf(x), accurate where erf(x) is near 1", complex_safe=False,
    rule="-g * 2 / sqrt(pi) * exp(-x**2)",
    edges=(Edge("at +-inf", [[math.inf, -math.inf]], [0.0, 2.0], ([0.0, 0.0],), order=1, note="the limits"),),
    torch=Torch("torch.erfc", agrees_at=(([[math.inf, -math.inf, 30.0, -30.0]], {}, 1),)),
    reference=Reference("erfc_wide(x)", "-2 / sqrt(pi) * exp(-x * x)", "spread(-30, 30)", second="4 * x / sqrt(pi) * exp(-x * x)"),
)

# ---- logarithms and powers ------------------------------------------------------------
log2 = elementwise(
    "log2", lambda x: np.log2(x), lambda m, g, ans, x: masked(m, g, g / (x * LN2)), "base-2 logarithm", low=0.2, high=3.0,
    edges=(Edge("at 0", [0.0], -math.inf, (math.inf,), order=1),),
    torch=Torch("torch.log2", agrees_at=(([[0.0, -1.0, math.inf]], {}),)),
    reference=Reference("log(x, 2)", "1 / (x * log(2))", "magnitudes(-300, 300)", second="-1 / (x * x * log(2))"),
)
log10 = elementwise(
    "log10", lambda x: np.log10(x), lambda m, g, ans, x: masked(m, g, g / (x * LN10)), "base-10 logarithm", low=0.2, high=3.0,
    edges=(Edge("at 0", [0.0], -math.inf, (math.inf,), order=1),),
    torch=Torch("torch.log10"),
    reference=Reference("log10(x)", "1 / (x * log(10))", "magnitudes(-300, 300)", second="-1 / (x * x * log(10))"),
)
# 2 ** x ln 2 as 2 ** (x - 1) (2 ln 2): finite up to x = 1024.47, where 2 ** x itself overflows
# from 1024 on (the gradient was inf there; it is 1.246e308). x - 1 is exact for |x| >= 1,
# and below that its rounding moves the result by less than an ulp.
exp2 = elementwise(
    "exp2", lambda x: np.exp2(x), lambda m, g, ans, x: masked(m, g, g * m.exp2(x - 1.0) * (2.0 * LN2)), "2 ** x",
    rule="g * 2 ** x * ln(2)",
    edges=(Edge("past the largest float", [1024.0], math.inf, (2.0**1023 * (2.0 * LN2),), order=1,
                torch="gradient inf", note="the value overflows; its slope 2 ** x ln 2 is a float"),),
    torch=Torch("torch.exp2"),
    reference=Reference(
        "power(2, x)", "power(2, x) * log(2)", "np.concatenate([spread(-1000, 1000), [1023.0, 1023.7, 1024.0, 1024.2, 1024.46, 1024.5, 1025.0]])",
        second="power(2, x) * log(2) ** 2",
    ),
)
expm1 = elementwise(
    "expm1", lambda x: np.expm1(x), lambda m, g, ans, x: scaled(m, g, m.exp(x)), "e ** x - 1, accurate for small x",
    torch=Torch("torch.expm1", agrees_at=(([[-1000.0, 1000.0, 1e-20]], {}),)),
    reference=Reference("expm1(x)", "exp(x)", "spread(-700, 700)", second="exp(x)"),
)
square = elementwise(
    "square", lambda x: x * x, lambda m, g, ans, x: scaled(m, g, 2.0 * x), "x * x", torch=Torch("torch.square"),
    reference=Reference("x * x", "2 * x", "spread(-1e150, 1e150)", second="mpf(2)"),
)
def away_from_zero(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Check inputs of either sign with 0.2 <= |x| <= 2. (low and high, which tests that
    compose ops squash their inputs into, stay positive.)"""
    shape = [(), (3,), (2, 3)][int(rng.integers(3))]
    return [rng.choice([-1.0, 1.0], shape) * rng.uniform(0.2, 2.0, shape)], {}


cbrt = elementwise(
    "cbrt", lambda x: np.cbrt(x), lambda m, g, ans, x: masked(m, g, g / (3.0 * ans * ans)),
    "real cube root (negative for negative x); infinite slope at 0", complex_safe=False, method=False,
    kink=near_zero, check=Check(make=away_from_zero, low=0.2, high=2.0),
    edges=(Edge("at 0", [0.0], 0.0, (math.inf,), order=1, torch="no cbrt; sign(x) * |x| ** (1/3) has gradient nan",
                note="the limit of the slope"),),
    torch=Torch(lambda t, x: t.sign(x) * t.abs(x) ** (1.0 / 3.0)),
    reference=Reference("sign(x) * cbrt(abs(x))", "1 / (3 * cbrt(x * x))", "both_signs(-300, 300)", second="-2 / (9 * sign(x) * cbrt(abs(x)) ** 5)"),
)
reciprocal = elementwise(
    "reciprocal", lambda x: 1.0 / x, lambda m, g, ans, x: masked(m, g, -g * ans * ans), "1 / x",
    kink=near_zero, check=Check(make=away_from_zero, low=0.2, high=2.0),
    edges=(Edge("at 0 and -0", [[0.0, -0.0]], [math.inf, -math.inf], ([-math.inf, -math.inf],)),),
    torch=Torch("torch.reciprocal", agrees_at=(([[0.0, -0.0]], {}),)),
    reference=Reference("1 / x", "-1 / (x * x)", "both_signs(-300, 300)", second="2 / x**3"),
)

# ---- hyperbolic functions and their inverses --------------------------------------------
sinh = elementwise(
    "sinh", lambda x: np.sinh(x), lambda m, g, ans, x: scaled(m, g, m.cosh(x)), "hyperbolic sine", torch=Torch("torch.sinh"),
    reference=Reference("sinh(x)", "cosh(x)", "spread(-700, 700)", second="sinh(x)"),
)
cosh = elementwise(
    "cosh", lambda x: np.cosh(x), lambda m, g, ans, x: scaled(m, g, m.sinh(x)), "hyperbolic cosine", torch=Torch("torch.cosh"),
    reference=Reference("cosh(x)", "sinh(x)", "spread(-700, 700)", second="cosh(x)"),
)
def _one_minus_square(x: Any) -> Any:
    if np.iscomplexobj(x):  # complex step: the imaginary part -2xh, which (1 - x)(1 + x) cancels near 0
        return 1.0 - x * x
    return (1.0 - x) * (1.0 + x)


# 1 - x**2 as (1 - x)(1 + x), which keeps its digits near |x| = 1, with the derivative -2x
# written out: the product rule's (1 - x) - (1 + x) cancels near 0, and made the second
# derivative of atanh 0 at 1e-300 (it is 2e-300). For asin, acos and atanh.
one_minus_square = defop(
    "one_minus_square", _one_minus_square, (lambda m, g, ans, x: scaled(m, g, -2.0 * x),), doc="(1 - x)(1 + x)",
    category=ELEM, complex_safe=True, public=False, check=Check(), jvp=DIAGONAL,
    reference=Reference("1 - x * x", "-2 * x", "spread(-1e150, 1e150)", second="mpf(-2)"),
)

asinh = elementwise(
    "asinh", lambda x: np.arcsinh(x), lambda m, g, ans, x: masked(m, g, g / m.hypot(x, 1.0)),
    "inverse hyperbolic sine", aliases=("arcsinh",),
    torch=Torch("torch.asinh"),
    reference=Reference("asinh(x)", "1 / sqrt(x * x + 1)", "spread(-1e300, 1e300)", second="-x / power(x * x + 1, 1.5)"),
)
_SQUARE_FAR = 1e100  # past this, differentiating x**2 - 1 again passes through 1 / x**3, near underflow


def _root_of_square_less_one(m: Any, x: Any) -> Any:
    """sqrt(x**2 - 1): near 1 as sqrt(0 - one_minus_square(x)), whose derivative 2x is written
    out; far out as sqrt(x - 1) sqrt(x + 1), which neither overflows nor underflows when
    differentiated again. Not the latter everywhere: differentiated again at x = 1 its
    product rule multiplies sqrt(x - 1) = 0 by the inf from the other factor, and so does
    (x - 1)(x + 1)'s (acosh'' at 1 was nan by reverse over reverse, -inf by forward over
    reverse; it is -inf)."""
    far = np.abs(m.raw(x)) >= _SQUARE_FAR
    if not far.any():
        return m.sqrt(0.0 - m.one_minus_square(x))  # (0 - 0 is +0: 1 / sqrt(+0) is +inf)
    near = m.where(far, 2.0, x)
    return m.where(far, m.sqrt(x - 1.0) * m.sqrt(x + 1.0), m.sqrt(0.0 - m.one_minus_square(near)))


# The grid of the functions defined on [-1, 1], closest to its ends (tests/test_accuracy.py).
_UNIT_INTERVAL = "np.concatenate([spread(-0.999, 0.999), 1 - magnitudes(-15, -1, 15), -1 + magnitudes(-15, -1, 15)])"

acosh = elementwise(
    "acosh", lambda x: np.arccosh(x), lambda m, g, ans, x: masked(m, g, g / _root_of_square_less_one(m, x)),
    "inverse hyperbolic cosine (x >= 1)", aliases=("arccosh",), low=1.2, high=3.0, rule="g / sqrt(x**2 - 1)",
    edges=(Edge("at 1", [1.0], 0.0, (math.inf,), order=1),),
    torch=Torch("torch.acosh"),
    reference=Reference(
        "acosh(x)", "1 / sqrt(x * x - 1)", "np.concatenate([1 + magnitudes(-15, 0, 31), magnitudes(0.5, 300)])", second="-x / power(x * x - 1, 1.5)",
    ),
)
atanh = elementwise(
    "atanh", lambda x: np.arctanh(x), lambda m, g, ans, x: masked(m, g, g / m.one_minus_square(x)),
    "inverse hyperbolic tangent (-1 < x < 1)", aliases=("arctanh",), low=-0.9, high=0.9, rule="g / (1 - x**2)",
    edges=(Edge("at +-1", [[1.0, -1.0]], [math.inf, -math.inf], ([math.inf, math.inf],), order=1),),
    torch=Torch("torch.atanh", agrees_at=(([[1.0, -1.0]], {}, 1),)),
    reference=Reference("atanh(x)", "1 / (1 - x * x)", _UNIT_INTERVAL, second="2 * x / (1 - x * x) ** 2"),
)

# ---- inverse trigonometric functions -----------------------------------------------------
asin = elementwise(
    "asin", lambda x: np.arcsin(x), lambda m, g, ans, x: masked(m, g, g / m.sqrt(m.one_minus_square(x))),
    "inverse sine (-1 <= x <= 1)", aliases=("arcsin",), low=-0.9, high=0.9, rule="g / sqrt(1 - x**2)",
    edges=(Edge("at +-1", [[1.0, -1.0]], [math.pi / 2, -math.pi / 2], ([math.inf, math.inf],), order=1),),
    torch=Torch("torch.asin", agrees_at=(([[1.0, -1.0]], {}, 1),)),
    reference=Reference("asin(x)", "1 / sqrt(1 - x * x)", _UNIT_INTERVAL, second="x / power(1 - x * x, 1.5)"),
)
acos = elementwise(
    "acos", lambda x: np.arccos(x), lambda m, g, ans, x: masked(m, g, -g / m.sqrt(m.one_minus_square(x))),
    "inverse cosine (-1 <= x <= 1)", aliases=("arccos",), low=-0.9, high=0.9, rule="-g / sqrt(1 - x**2)",
    edges=(Edge("at +-1", [[1.0, -1.0]], [0.0, math.pi], ([-math.inf, -math.inf],), order=1),),
    torch=Torch("torch.acos"),
    reference=Reference("acos(x)", "-1 / sqrt(1 - x * x)", _UNIT_INTERVAL, second="-x / power(1 - x * x, 1.5)"),
)
_ATAN_FAR = 1e50


def _atan_vjp(m: Any, g: Any, ans: Any, x: Any) -> Any:
    # 1 / (1 + x**2); far out as r * r with r = 1 / hypot(x, 1): differentiated again,
    # (1 + x**2)**2 overflowed from 1e77 on, where the second derivative is 1e-231. (Not
    # everywhere: r * r rounds twice, 0.7999999999999999 for 1 / (1 + 0.5**2).)
    far = np.abs(m.raw(x)) >= _ATAN_FAR
    if not far.any():
        return masked(m, g, g / (1.0 + x * x))
    r = 1.0 / m.hypot(x, 1.0)
    near = m.where(far, 0.0, x)
    return scaled(m, g, m.where(far, r * r, 1.0 / (1.0 + near * near)))


atan = elementwise(
    "atan", lambda x: np.arctan(x), _atan_vjp, "inverse tangent", aliases=("arctan",), rule="g / (1 + x**2)",
    torch=Torch("torch.atan"),
    reference=Reference("atan(x)", "1 / (1 + x * x)", "spread(-1e300, 1e300)", second="-2 * x / (1 + x * x) ** 2"),
)


def _on_negative_x_axis(y: Any, x: Any, tol: float = 0.0) -> bool:
    """atan2 jumps by 2 pi across the negative x axis and is undefined at the origin."""
    return bool(np.any((np.abs(y) <= tol) & (x <= tol)))


def _atan2_dy(m: Any, g: Any, ans: Any, y: Any, x: Any) -> Any:
    # x / (x**2 + y**2) as (x / r) / r, r = hypot(y, x): the squares underflow at 1e-300
    # (0 / 0 where the derivative is 5e299) and overflow at 1e200.
    r = m.hypot(y, x)
    return masked(m, g, g * (x / r) / r)


def _atan2_dx(m: Any, g: Any, ans: Any, y: Any, x: Any) -> Any:
    r = m.hypot(y, x)
    return masked(m, g, -g * (y / r) / r)


atan2 = defop(
    "atan2", lambda y, x: np.arctan2(y, x), (_atan2_dy, _atan2_dx), rule="y: g * x / (x**2 + y**2);  x: -g * y / (x**2 + y**2)",
    doc="angle of the point (x, y) in (-pi, pi]: atan2(y, x)", category=ELEM, n_in=2, method=True,
    aliases=("arctan2",), kink=_on_negative_x_axis,
    check=Check(shapes=BINARY_SHAPES, kink_gap=0.2), jvp=DIAGONAL,
    edges=(Edge("on the negative x axis", [[0.0, -0.0], [-1.0, -1.0]], [math.pi, -math.pi], ([-1.0, -1.0], [0.0, 0.0]),
                note="the sign of the zero y picks the side"),
           Edge("at the origin", [[0.0, 0.0], [0.0, -0.0]], [0.0, math.pi], ([math.nan, math.nan], [math.nan, math.nan]), order=1,
                torch="gradient 0", note="no direction: 0 / 0")),
    torch=Torch("torch.atan2", agrees_at=(([[0.0, 0.0, 1.0], [1.0, -1.0, 0.0]], {}),)),
)
hypot = defop(
    "hypot", lambda a, b: np.hypot(a, b),
    (lambda m, g, ans, a, b: masked(m, g, g * a / ans), lambda m, g, ans, a, b: masked(m, g, g * b / ans)),
    doc="sqrt(a**2 + b**2) without overflow", category=ELEM, n_in=2, method=True,
    kink=lambda a, b, tol=0.0: bool(np.any((np.abs(a) <= tol) & (np.abs(b) <= tol))),
    check=Check(shapes=BINARY_SHAPES, kink_gap=0.2), jvp=DIAGONAL,
    edges=(Edge("at the origin", [0.0, 0.0], 0.0, (math.nan, math.nan), order=1, note="no direction: 0 / 0"),),
    torch=Torch("torch.hypot", agrees_at=(([[0.0], [0.0]], {}), ([[3.0, 0.0, 1e300], [4.0, 2.0, 1e300]], {}))),
)
