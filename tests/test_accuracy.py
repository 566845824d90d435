"""Every one-input elementwise op, value and derivative, against 50-digit mpmath over its
whole domain: relative error at most 1e-14 (a few units in the last place).

Driven by the registry: an elementwise op added later fails here until it has an entry
in REFERENCE (its mpmath function, its derivative, and the grid of its domain). The
derivative may be None: mpmath then differentiates the function numerically (fine unless
the derivative is tiny next to the value, as 1 - tanh(x)**2 is, so give a closed form).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from gradcalc.autodiff import REGISTRY, Tensor, grad

mpmath = pytest.importorskip("mpmath")
mp = mpmath.mp

TOLERANCE = 1e-14
TINY = np.finfo(float).tiny  # below this, results are subnormal: compared absolutely


def spread(low: float, high: float, n: int = 121) -> np.ndarray:
    """n points from low to high, denser near 0 when the range crosses it (both signs)."""
    linear = np.linspace(low, high, n)
    small = np.array([s * 10.0**k for k in range(-20, 1, 2) for s in (-1, 1)])
    return np.unique(np.concatenate([linear, small[(small > low) & (small < high)]]))


def magnitudes(low_exp: int, high_exp: int, n: int = 121) -> np.ndarray:
    return np.geomspace(10.0**low_exp, 10.0**high_exp, n)


@dataclass(frozen=True)
class Reference:
    f: Callable[[Any], Any]
    df: Callable[[Any], Any] | None
    grid: np.ndarray


def _sigmoid(x: Any) -> Any:
    return 1 / (1 + mp.exp(-x))


def _step(x: Any) -> Any:
    return mp.mpf(1) if x > 0 else mp.mpf(0)


# One entry per one-input elementwise op: the true function, its derivative, the domain.
REFERENCE: dict[str, Reference] = {
    "exp": Reference(mp.exp, mp.exp, spread(-700, 700)),
    "log": Reference(mp.log, lambda x: 1 / x, np.concatenate([magnitudes(-300, 300), 1 + spread(-1e-3, 1e-3, 21)])),
    "log1p": Reference(
        mp.log1p, lambda x: 1 / (1 + x),
        np.concatenate([-1 + magnitudes(-15, -1, 29), spread(-0.99, 10), magnitudes(-20, 300)]),
    ),
    "sqrt": Reference(mp.sqrt, lambda x: 1 / (2 * mp.sqrt(x)), magnitudes(-300, 300)),
    "sin": Reference(mp.sin, mp.cos, spread(-1e4, 1e4)),
    "cos": Reference(mp.cos, lambda x: -mp.sin(x), spread(-1e4, 1e4)),
    "tan": Reference(mp.tan, lambda x: 1 / mp.cos(x) ** 2, spread(-1.57, 1.57)),
    "tanh": Reference(mp.tanh, lambda x: 1 / mp.cosh(x) ** 2, spread(-300, 300)),
    "sigmoid": Reference(_sigmoid, lambda x: _sigmoid(x) * _sigmoid(-x), spread(-700, 700)),
    "softplus": Reference(lambda x: mp.log1p(mp.exp(x)), _sigmoid, spread(-700, 700)),
    "relu": Reference(lambda x: max(x, 0), _step, spread(-1e300, 1e300)),
    "abs": Reference(abs, lambda x: mp.sign(x), spread(-1e300, 1e300)),
}

def _logistic(x: Any) -> Any:
    return 1 / (1 + mp.exp(-x))


def both_signs(low_exp: int, high_exp: int, n: int = 61) -> np.ndarray:
    m = magnitudes(low_exp, high_exp, n)
    return np.concatenate([-m[::-1], m])


_UNIT_INTERVAL = np.concatenate([spread(-0.999, 0.999), 1 - magnitudes(-15, -1, 15), -1 + magnitudes(-15, -1, 15)])

# The logarithms and exponentials in other bases, the hyperbolic, inverse and error functions.
REFERENCE.update({
    "log2": Reference(lambda x: mp.log(x, 2), lambda x: 1 / (x * mp.log(2)), magnitudes(-300, 300)),
    "log10": Reference(mp.log10, lambda x: 1 / (x * mp.log(10)), magnitudes(-300, 300)),
    "exp2": Reference(lambda x: mp.power(2, x), lambda x: mp.power(2, x) * mp.log(2), spread(-1000, 1000)),
    "expm1": Reference(mp.expm1, mp.exp, spread(-700, 700)),
    "sinh": Reference(mp.sinh, mp.cosh, spread(-700, 700)),
    "cosh": Reference(mp.cosh, mp.sinh, spread(-700, 700)),
    "asinh": Reference(mp.asinh, lambda x: 1 / mp.sqrt(x * x + 1), spread(-1e300, 1e300)),
    "acosh": Reference(
        mp.acosh, lambda x: 1 / mp.sqrt(x * x - 1), np.concatenate([1 + magnitudes(-15, 0, 31), magnitudes(0.5, 300)]),
    ),
    "atanh": Reference(mp.atanh, lambda x: 1 / (1 - x * x), _UNIT_INTERVAL),
    "asin": Reference(mp.asin, lambda x: 1 / mp.sqrt(1 - x * x), _UNIT_INTERVAL),
    "acos": Reference(mp.acos, lambda x: -1 / mp.sqrt(1 - x * x), _UNIT_INTERVAL),
    "atan": Reference(mp.atan, lambda x: 1 / (1 + x * x), spread(-1e300, 1e300)),
    "erf": Reference(mp.erf, lambda x: 2 / mp.sqrt(mp.pi) * mp.exp(-x * x), spread(-30, 30)),
    "erfc": Reference(mp.erfc, lambda x: -2 / mp.sqrt(mp.pi) * mp.exp(-x * x), spread(-30, 30)),
    "square": Reference(lambda x: x * x, lambda x: 2 * x, spread(-1e150, 1e150)),
    "cbrt": Reference(lambda x: mp.sign(x) * mp.cbrt(abs(x)), lambda x: 1 / (3 * mp.cbrt(x * x)), both_signs(-300, 300)),
    "reciprocal": Reference(lambda x: 1 / x, lambda x: -1 / (x * x), both_signs(-300, 300)),
    "gelu": Reference(lambda x: x * mp.ncdf(x), lambda x: mp.ncdf(x) + x * mp.npdf(x), spread(-40, 1e300)),
    "silu": Reference(lambda x: x * _logistic(x), lambda x: _logistic(x) * (1 + x * _logistic(-x)), spread(-700, 1e300)),
    "softsign": Reference(lambda x: x / (1 + abs(x)), lambda x: 1 / (1 + abs(x)) ** 2, spread(-1e300, 1e300)),
    "logsigmoid": Reference(lambda x: -mp.log1p(mp.exp(-x)), lambda x: _logistic(-x), spread(-1e300, 700)),
    "leaky_relu": Reference(
        lambda x: x if x > 0 else mp.mpf(0.01) * x, lambda x: mp.mpf(1) if x > 0 else mp.mpf(0.01), spread(-1e300, 1e300),
    ),
    "elu": Reference(lambda x: x if x > 0 else mp.expm1(x), lambda x: mp.mpf(1) if x > 0 else mp.exp(x), spread(-700, 1e300)),
})

ELEMENTWISE = [op for op in REGISTRY.values() if op.category == "elementwise" and op.n_in == 1 and op.has_gradient]


def test_every_one_input_elementwise_op_has_a_reference():
    missing = [op.name for op in ELEMENTWISE if op.name not in REFERENCE]
    assert not missing, f"add these ops to REFERENCE in tests/test_accuracy.py: {missing}"


def relative_errors(ours: np.ndarray, exact: list[Any]) -> np.ndarray:
    """|ours - exact| / |exact| elementwise; subnormal and overflowing exact values must
    match to within the smallest normal number or be the right infinity."""
    errors = []
    for got, want in zip(ours, exact):
        want_f = float(want)
        if abs(want) > np.finfo(float).max:
            errors.append(0.0 if got == want_f else np.inf)
        elif abs(want) < TINY:
            errors.append(0.0 if abs(got - want_f) <= TINY else np.inf)
        else:
            errors.append(float(abs((mp.mpf(got) - want) / want)))
    return np.array(errors)


def exact_values(ref: Reference, grid: np.ndarray) -> tuple[list[Any], list[Any]]:
    with mp.workdps(50):
        xs = [mp.mpf(float(x)) for x in grid]
        values = [ref.f(x) for x in xs]
        derivatives = [ref.df(x) if ref.df is not None else mp.diff(ref.f, x) for x in xs]
    return values, derivatives


@pytest.mark.parametrize("op", ELEMENTWISE, ids=lambda op: op.name)
def test_value_and_derivative_are_within_1e_14_of_mpmath(op):
    ref = REFERENCE[op.name]
    values, derivatives = exact_values(ref, ref.grid)
    x = Tensor(ref.grid, requires_grad=True)
    y = op(x)
    dy = grad(y.sum(), x).data
    value_error = relative_errors(y.data, values)
    grad_error = relative_errors(dy, derivatives)
    worst_v, worst_d = int(np.argmax(value_error)), int(np.argmax(grad_error))
    assert value_error[worst_v] <= TOLERANCE, f"{op.name}({ref.grid[worst_v]!r}) = {y.data[worst_v]!r}, exact {values[worst_v]}"
    assert grad_error[worst_d] <= TOLERANCE, f"{op.name}'({ref.grid[worst_d]!r}) = {dy[worst_d]!r}, exact {derivatives[worst_d]}"


@pytest.mark.parametrize("op", [op for op in ELEMENTWISE if op.complex_safe], ids=lambda op: op.name)
def test_complex_safe_forwards_are_analytic(op):
    """Complex step Im f(x + ih) / h gives the derivative to 1e-13 where gradcheck uses it
    (|x| <= 30): the forward extends analytically to complex inputs (branches are chosen
    on the real part). Beyond that NumPy's complex functions lose the tiny imaginary part."""
    ref = REFERENCE[op.name]
    grid = ref.grid[(np.abs(ref.grid) <= 30) & (np.abs(ref.grid) >= 1e-100)]
    _, derivatives = exact_values(ref, grid)
    h = 1e-30 * np.abs(grid)  # far below the distance to any singularity (log1p near -1)
    with np.errstate(all="ignore"):
        stepped = np.imag(op.forward(grid + 1j * h)) / h
    assert np.max(relative_errors(stepped, derivatives)) <= 1e-13, op.name
