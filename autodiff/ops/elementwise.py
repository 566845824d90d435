"""Elementwise functions, one line each: forward beside its VJP."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..registry import BINARY_SHAPES, Check, defop

ELEM = "elementwise"


def unary(
    name: str, forward: Any, vjp: Any, doc: str, *, complex_safe: bool = True,
    low: float = -2.0, high: float = 2.0, kink: Any = None, kink_gap: float = 0.0,
) -> Any:
    """Register a one-input elementwise op that is also a method (`x.exp()`)."""
    return defop(
        name, forward, (vjp,), doc=doc, category=ELEM, complex_safe=complex_safe, method=True,
        kink=kink, check=Check(low=low, high=high, kink_gap=kink_gap),
    )


def _at_zero(x: Any, tol: float = 0.0) -> bool:
    return bool(np.any(np.abs(x) <= tol))


def _sigmoid(x: Any) -> Any:
    # The tanh form never overflows and stays complex-analytic (complex step works).
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _softplus(x: Any) -> Any:
    return np.logaddexp(0.0, x)


def _relu(x: Any) -> Any:
    return np.where(x > 0, x, 0.0)


exp = unary("exp", lambda x: np.exp(x), lambda m, g, ans, x: g * ans, "e ** x")
log = unary("log", lambda x: np.log(x), lambda m, g, ans, x: g / x, "natural logarithm", low=0.2, high=3.0)
log1p = unary("log1p", lambda x: np.log1p(x), lambda m, g, ans, x: g / (1 + x), "log(1 + x), accurate for small x", low=-0.5)
sqrt = unary("sqrt", lambda x: np.sqrt(x), lambda m, g, ans, x: g / (2 * ans), "square root", low=0.2, high=3.0)
sin = unary("sin", lambda x: np.sin(x), lambda m, g, ans, x: g * m.cos(x), "sine")
cos = unary("cos", lambda x: np.cos(x), lambda m, g, ans, x: -g * m.sin(x), "cosine")
tan = unary("tan", lambda x: np.tan(x), lambda m, g, ans, x: g * (1 + ans * ans), "tangent", low=-1.2, high=1.2)
tanh = unary("tanh", lambda x: np.tanh(x), lambda m, g, ans, x: g * (1 - ans * ans), "hyperbolic tangent")
sigmoid = unary("sigmoid", _sigmoid, lambda m, g, ans, x: g * ans * (1 - ans), "logistic 1 / (1 + e ** -x)")
softplus = unary(
    "softplus", _softplus, lambda m, g, ans, x: g * m.sigmoid(x), "log(1 + e ** x), without overflow",
    complex_safe=False,
)
relu = unary(
    "relu", _relu, lambda m, g, ans, x: g * (m.raw(x) > 0), "max(x, 0); gradient 0 at 0",
    complex_safe=False, kink=_at_zero, kink_gap=1e-3,
)
abs_ = unary(
    "abs", lambda x: np.abs(x), lambda m, g, ans, x: g * np.sign(m.raw(x)), "absolute value; gradient 0 at 0",
    complex_safe=False, kink=_at_zero, kink_gap=1e-3,
)


def _maximum(a: Any, b: Any) -> Any:
    return np.maximum(a, b)


def _minimum(a: Any, b: Any) -> Any:
    return np.minimum(a, b)


def _share(winner: Any, tie: Any) -> Any:
    """Where the inputs tie the gradient is split evenly between them (as torch does)."""
    return winner + 0.5 * tie


def _tied(a: Any, b: Any, tol: float = 0.0) -> bool:
    return bool(np.any(np.abs(a - b) <= tol))


maximum = defop(
    "maximum", _maximum,
    (lambda m, g, ans, a, b: g * _share(m.raw(a) > m.raw(b), m.raw(a) == m.raw(b)),
     lambda m, g, ans, a, b: g * _share(m.raw(b) > m.raw(a), m.raw(a) == m.raw(b))),
    doc="elementwise larger of a and b", category=ELEM, n_in=2, kink=_tied,
    check=Check(shapes=BINARY_SHAPES, kink_gap=1e-3),
)
minimum = defop(
    "minimum", _minimum,
    (lambda m, g, ans, a, b: g * _share(m.raw(a) < m.raw(b), m.raw(a) == m.raw(b)),
     lambda m, g, ans, a, b: g * _share(m.raw(b) < m.raw(a), m.raw(a) == m.raw(b))),
    doc="elementwise smaller of a and b", category=ELEM, n_in=2, kink=_tied,
    check=Check(shapes=BINARY_SHAPES, kink_gap=1e-3),
)


def _clip(x: Any, low: float | None = None, high: float | None = None) -> Any:
    return np.clip(x, low, high)


def _inside(x: Any, low: Any, high: Any) -> Any:
    """Where x lies within the bounds (which may be arrays that broadcast against x)."""
    inside = np.full(np.shape(x), True)
    if low is not None:
        inside = inside & (x >= low)
    if high is not None:
        inside = inside & (x <= high)
    return inside


def _clip_kink(x: Any, low: float | None = None, high: float | None = None, tol: float = 0.0) -> bool:
    return any(bound is not None and bool(np.any(np.abs(x - bound) <= tol)) for bound in (low, high))


clip = defop(
    "clip", _clip, (lambda m, g, ans, x, low=None, high=None: g * _inside(m.raw(x), low, high),),
    doc="x limited to [low, high]; gradient 1 inside, 0 outside", category=ELEM, method=True,
    kink=_clip_kink, check=Check(params={"low": -0.5, "high": 0.5}, kink_gap=1e-3),
)


def _where(cond: Any, a: Any, b: Any) -> Any:
    return np.where(cond != 0, a, b)


where = defop(
    "where", _where,
    (None,
     lambda m, g, ans, c, a, b: g * (m.raw(c) != 0),
     lambda m, g, ans, c, a, b: g * (m.raw(c) == 0)),
    doc="a where cond is non-zero, else b (no gradient flows to cond)", category=ELEM, n_in=3,
    check=Check(
        make=lambda rng: ([rng.integers(0, 2, (3, 4)).astype(float), rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (4,))], {}),
        diff=(1, 2),
    ),
)
