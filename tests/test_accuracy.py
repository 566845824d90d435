"""Every one-input elementwise op, value and first two derivatives, against 50-digit
mpmath over the whole float range: relative error at most 1e-14 (a few units in the last
place) wherever the true value is a normal float (a subnormal one within the smallest
normal number, an overflowing one the right infinity).

Driven by the registry: each op's defop gives its exact values as mpmath text
(`reference=Reference(value, slope, grid, second=...)`, autodiff/registry.py), and an
elementwise op added without them fails here, naming the recipe's step. The slope may be
None: mpmath then differentiates the function numerically (fine unless the derivative is
tiny next to the value, as 1 - tanh(x)**2 is, so give a closed form). Every op is also tried on WHOLE_RANGE,
the grid of every sign and magnitude, not only on its documented domain; points outside
the domain (where the true value is not real) are tests/test_op_numerics.py's.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from gradcalc.autodiff import REGISTRY, Tensor, grad
from gradcalc.autodiff.registry import REFERENCE_HELPERS, Reference, missing_steps

mpmath = pytest.importorskip("mpmath")
mp = mpmath.mp

TOLERANCE = 1e-14
TINY = np.finfo(float).tiny  # below this, results are subnormal: compared absolutely
EPS = np.finfo(float).eps / 2  # the rounding unit


def spread(low: float, high: float, n: int = 121) -> np.ndarray:
    """n points from low to high, denser near 0 when the range crosses it (both signs)."""
    linear = np.linspace(low, high, n)
    small = np.array([s * 10.0**k for k in range(-20, 1, 2) for s in (-1, 1)])
    return np.unique(np.concatenate([linear, small[(small > low) & (small < high)]]))


def magnitudes(low_exp: int, high_exp: int, n: int = 121) -> np.ndarray:
    return np.geomspace(10.0**low_exp, 10.0**high_exp, n)


def both_signs(low_exp: int, high_exp: int, n: int = 61) -> np.ndarray:
    m = magnitudes(low_exp, high_exp, n)
    return np.concatenate([-m[::-1], m])


# What a Reference's text may name: mpmath's functions and its helpers; NumPy and the grid
# makers above for its grid.
MPMATH_NAMES: dict[str, Any] = {name: getattr(mpmath, name) for name in dir(mpmath) if not name.startswith("_")}
for _name, _text in REFERENCE_HELPERS.items():
    MPMATH_NAMES[_name] = eval(f"lambda x: {_text}", MPMATH_NAMES)  # (test data from the registry, not user input)
GRID_NAMES = {"np": np, "spread": spread, "magnitudes": magnitudes, "both_signs": both_signs}


@dataclass(frozen=True)
class Exact:
    """An op's Reference, its text made functions of an mpf: value, slope (None: mpmath
    differentiates), second derivative, and its grid."""

    f: Callable[[Any], Any]
    df: Callable[[Any], Any] | None
    second: Callable[[Any], Any] | None
    grid: np.ndarray


def exact_of(ref: Reference) -> Exact:
    def function(text: str | None) -> Callable[[Any], Any] | None:
        return None if text is None else eval(f"lambda x: {text}", MPMATH_NAMES)

    f = function(ref.value)
    assert f is not None
    return Exact(f, function(ref.slope), function(ref.second), np.asarray(eval(ref.grid, GRID_NAMES), dtype=float))


REFERENCE: dict[str, Exact] = {op.name: exact_of(op.reference) for op in REGISTRY.values() if op.reference is not None}

# Every sign and magnitude: powers of ten across the range, the exponential functions'
# working range, the region near 0 and +-1, and irregular points (a regular grid's
# squares are exact, which hides the rounding of x**2).
_RNG = np.random.default_rng(20261202)
WHOLE_RANGE = np.unique(np.concatenate([
    both_signs(-307, 308, 200), spread(-750, 750, 301), spread(-40, 40, 161), _RNG.uniform(-760, 760, 400),
    _RNG.uniform(-45, 45, 200), 1 - magnitudes(-16, -1, 16), -1 + magnitudes(-16, -1, 16), 1 + magnitudes(-16, -1, 16),
]))

ELEMENTWISE = [op for op in REGISTRY.values() if op.category == "elementwise" and op.n_in == 1 and op.has_gradient]


def test_every_one_input_elementwise_op_has_a_reference():
    """The steps "mpmath reference" and "second derivative" of CONTRIBUTING.md's recipe."""
    missing = {op.name: step for op in ELEMENTWISE for step in missing_steps(op) if step.startswith(("mpmath reference", "second derivative"))}
    assert not missing, f"ops without their mpmath values (give them in the op's defop): {missing}"


def relative_errors(ours: np.ndarray, exact: list[Any]) -> np.ndarray:
    """|ours - exact| / |exact| elementwise; subnormal and overflowing exact values must
    match to within the smallest normal number or be the right infinity (nan: inf)."""
    errors = []
    for got, want in zip(ours, exact):
        want_f = float(want)
        if np.isnan(got):
            errors.append(np.inf)
        elif abs(want) > np.finfo(float).max:
            errors.append(0.0 if got == want_f else np.inf)
        elif abs(want) < TINY:
            errors.append(0.0 if abs(got - want_f) <= TINY else np.inf)
        else:
            errors.append(float(abs((mp.mpf(got) - want) / want)))
    return np.array(errors)


def _real(value: Any) -> Any:
    """value as an mpf, or None where it is not a real number (outside the domain)."""
    if isinstance(value, mp.mpc):
        return None if value.imag != 0 else value.real
    return value


def exact_values(ref: Exact, grid: np.ndarray, second: Callable[[Any], Any] | None = None) -> tuple[np.ndarray, list[list[Any]]]:
    """The points of grid inside the function's domain, and there the exact values, first
    derivatives (and second, if given)."""
    kept: list[float] = []
    columns: list[list[Any]] = [[], [], []] if second is not None else [[], []]
    functions = [ref.f, ref.df if ref.df is not None else (lambda x: mp.diff(ref.f, x)), second]
    with mp.workdps(50):
        for x in grid:
            point = mp.mpf(float(x))
            try:
                exact = [_real(fn(point)) for fn in functions[: len(columns)]]
            except (ValueError, ZeroDivisionError):  # (log'(0): the edge table's, not a number)
                continue
            if any(value is None for value in exact):
                continue
            kept.append(float(x))
            for column, value in zip(columns, exact):
                column.append(value)
    return np.array(kept), columns


def conditioning(grid: np.ndarray, exact: list[Any], slope: list[Any]) -> np.ndarray:
    """|x g'(x) / g(x)|, the condition number of g at x: no computation of g from x's
    float does better than it times the rounding unit, and it is large only next to a root
    of g (gelu' has one at -0.75: there 1e-14 would ask more than the digits hold)."""
    return np.array([float(abs(x * d / v)) if v != 0 else 0.0 for x, v, d in zip(grid, exact, slope)])


def worst(op: Any, what: str, grid: np.ndarray, ours: np.ndarray, exact: list[Any], slope: list[Any] | None = None) -> str:
    allowed = TOLERANCE + (0.0 if slope is None else 4 * EPS * conditioning(grid, exact, slope))
    errors = relative_errors(ours, exact) / allowed
    i = int(np.argmax(errors))
    return "" if errors[i] <= 1 else f"{op.name}{what}({grid[i]!r}) = {ours[i]!r}, exact {mp.nstr(exact[i], 17)}"


@pytest.mark.parametrize("op", ELEMENTWISE, ids=lambda op: op.name)
def test_value_and_two_derivatives_are_within_1e_14_of_mpmath_over_the_whole_range(op):
    ref = REFERENCE[op.name]
    grid, (values, firsts, seconds) = exact_values(ref, np.union1d(ref.grid, WHOLE_RANGE), ref.second)
    x = Tensor(grid, requires_grad=True)
    y = op(x)
    first = grad(y.sum(), x, create_graph=True)
    second = grad(first.sum(), x)
    failures = [worst(op, "", grid, y.data, values, firsts), worst(op, "'", grid, first.data, firsts, seconds),
                worst(op, "''", grid, second.data, seconds, third_derivatives(ref, grid, second.data, seconds))]
    assert not any(failures), "; ".join(f for f in failures if f)


def third_derivatives(ref: Exact, grid: np.ndarray, ours: np.ndarray, exact: list[Any]) -> list[Any]:
    """The slope of the second derivative, for its condition number, where the second
    derivative is off by more than the plain tolerance (0 elsewhere: mpmath's numerical
    derivative costs). Next to a root of f'' (sech'' at +-0.88, where 2 tanh**2 - 1 cancels)
    1e-14 asks more than the digits hold; how much more depends on the host's libm, whose
    tanh is correctly rounded on one machine and off by an ulp on another."""
    slopes: list[Any] = [0] * len(grid)
    off = np.flatnonzero(relative_errors(ours, exact) > TOLERANCE)
    with mp.workdps(50):
        for i in off:
            slopes[i] = mp.diff(ref.second, mp.mpf(float(grid[i])))
    return slopes


@pytest.mark.parametrize("op", [op for op in ELEMENTWISE if op.complex_safe], ids=lambda op: op.name)
def test_complex_safe_forwards_are_analytic(op):
    """Complex step Im f(x + ih) / h gives the derivative to 1e-13 where gradcheck uses it
    (|x| <= 30): the forward extends analytically to complex inputs (branches are chosen
    on the real part). Beyond that NumPy's complex functions lose the tiny imaginary part."""
    ref = REFERENCE[op.name]
    grid, (_, derivatives) = exact_values(ref, ref.grid[(np.abs(ref.grid) <= 30) & (np.abs(ref.grid) >= 1e-100)])
    h = 1e-30 * np.abs(grid)  # far below the distance to any singularity (log1p near -1)
    with np.errstate(all="ignore"):
        stepped = np.imag(op.forward(grid + 1j * h)) / h
    assert np.max(relative_errors(stepped, derivatives)) <= 1e-13, op.name


@pytest.mark.parametrize("scale", [1.0, 1e3, 1e8, 1e16, 1e100, -1e300])
def test_logcumsumexp_derivatives_keep_their_digits_at_any_magnitude(scale):
    """d y_i / d x_j = exp(x_j - y_i) against 50-digit mpmath, reverse and forward mode
    alike: through the rounded y_i the weights lost half their digits at 1e8 and all of
    them at 1e16 (forward and reverse disagreed there)."""
    from gradcalc.autodiff import jacobian, jacobian_forward

    x = scale + np.array([0.0, 0.5, -0.25, 3.0]) * max(1.0, abs(scale) * 2.0**-50)
    t = Tensor(x, requires_grad=True)
    y = t.logcumsumexp(axis=0)
    with mp.workdps(50):
        xs = [mp.mpf(float(v)) for v in x]
        ys = [xs[0] + mp.log(sum(mp.exp(xs[k] - xs[0]) for k in range(i + 1))) for i in range(len(xs))]
        exact = [[mp.exp(xs[j] - ys[i]) if j <= i else mp.mpf(0) for j in range(len(xs))] for i in range(len(xs))]
    for found in (jacobian(y, t).data, jacobian_forward(y, t).data):
        for row, want in zip(found, exact):
            nonzero = [k for k, w in enumerate(want) if w != 0]
            assert max(relative_errors(row[nonzero], [want[k] for k in nonzero])) <= TOLERANCE
            assert all(row[k] == 0 for k in range(len(want)) if k not in nonzero)


def _tanh_gelu_exact(x: float) -> list[Any]:
    """gelu(x, approximate='tanh') = x s(2u), u = c (x + k x**3), c = sqrt(2 / pi), k = 0.044715
    (the decimal), and its first three derivatives, in closed form (s the logistic function)."""
    c, k, x = mp.sqrt(2 / mp.pi), mp.mpf("0.044715"), mp.mpf(x)
    u1, u2, u3 = c * (1 + 3 * k * x**2), 6 * c * k * x, 6 * c * k
    z = 2 * c * (x + k * x**3)
    s, rest = 1 / (1 + mp.exp(-z)), 1 / (1 + mp.exp(z))  # s(z) and 1 - s(z), neither cancelling
    s1 = 2 * s * rest  # ds/du, then d2s/du2 and d3s/du3
    s2 = 2 * s1 * (rest - s)
    s3 = 2 * (s2 * (rest - s) - 2 * s1 * s1)
    dx1, dx2, dx3 = s1 * u1, s2 * u1**2 + s1 * u2, s3 * u1**3 + 3 * s2 * u1 * u2 + s1 * u3
    return [x * s, s + x * dx1, 2 * dx1 + x * dx2, 3 * dx2 + x * dx3]


TANH_GELU_GRID = np.unique(np.concatenate([
    spread(-30, 30, 241), both_signs(-30, -1, 30), [-20.0, 20.0, -19.75, 19.75, -25.0, 1e5, -1e5],
]))


def test_tanh_gelu_and_three_derivatives_are_within_1e_14_of_mpmath():
    """Value and first three derivatives against 100-digit mpmath: the rounded 2u cost
    3.9e-14 near +-20 (now a pair of floats), and the third derivative had the wrong sign
    below 1e-20 (now sech and sigmoid, whose derivatives do not cancel near 0)."""
    gelu = REGISTRY["gelu"]
    x = Tensor(TANH_GELU_GRID, requires_grad=True)
    y = gelu(x, approximate="tanh")
    d1 = grad(y.sum(), x, create_graph=True)
    d2 = grad(d1.sum(), x, create_graph=True)
    d3 = grad(d2.sum(), x)
    with mp.workdps(100):
        exact = [_tanh_gelu_exact(float(v)) for v in TANH_GELU_GRID]
    columns = [[e[order] for e in exact] for order in range(4)]
    # (each order against 1e-14 plus what its conditioning allows near a root, as above)
    failures = [worst(gelu, "'" * order, TANH_GELU_GRID, found, columns[order], columns[order + 1] if order < 3 else None)
                for order, found in enumerate([y.data, d1.data, d2.data, d3.data])]
    assert not any(failures), "; ".join(f for f in failures if f)
    tiny = TANH_GELU_GRID[(np.abs(TANH_GELU_GRID) < 1e-20) & (TANH_GELU_GRID != 0)]
    assert len(tiny) and (np.sign(d3.data[np.isin(TANH_GELU_GRID, tiny)]) == -np.sign(tiny)).all()


@pytest.mark.parametrize("x, slope", [(1e200, 1.0), (1e25, 1.0), (-1e200, 0.0), (-1e25, 0.0)])
def test_tanh_gelu_slope_far_out_is_its_limit(x, slope):
    t = Tensor(np.array(x), requires_grad=True)
    y = REGISTRY["gelu"](t, approximate="tanh")
    assert float(y.data) == (x if x > 0 else 0.0) and float(grad(y, t).data) == slope


def test_tanh_gelu_constants_carry_their_rounding():
    from gradcalc.autodiff.ops.activations import GELU_C, GELU_C_LOW, GELU_K, GELU_K_LOW

    with mp.workdps(50):
        assert GELU_C + mp.mpf(GELU_C_LOW) - mp.sqrt(2 / mp.pi) == pytest.approx(0, abs=1e-32)
        assert GELU_K + mp.mpf(GELU_K_LOW) - mp.mpf("0.044715") == pytest.approx(0, abs=1e-33)


@pytest.mark.parametrize("target", [0.0, 1.0, 0.25, 0.9])
def test_bce_with_logits_and_its_gradient_keep_their_digits_in_both_tails(target):
    """softplus(z) - t z and sigmoid(z) - t against 50-digit mpmath at logits from -700 to
    700. Found by a new user: at target 1, softplus(z) - z kept 8 digits at z = 20 and none
    at z = 37 (0.0 for 8.5e-17), and sigmoid(z) - 1 the same; target 0 was exact, by the
    mirror. The value is well conditioned everywhere; so is the gradient at targets 0 and 1
    (elsewhere it crosses zero where sigmoid(z) = t, and is held to 1e-14 of its terms)."""
    z = np.unique(np.concatenate([spread(-40, 40, 161), both_signs(-300, 2.85, 300)]))
    t = np.full_like(z, target)
    zt = Tensor(z, requires_grad=True)
    loss = REGISTRY["binary_cross_entropy_with_logits"](zt, Tensor(t), reduction="none")
    dz = grad(loss.sum(), zt).data
    with mp.workdps(50):
        # (max(z, 0) - t z first: z + exp(-z) - z would need 300 digits at z = 700)
        exact_value = [(max(mp.mpf(v), 0) - mp.mpf(target) * mp.mpf(v)) + mp.log1p(mp.exp(-abs(mp.mpf(v)))) for v in z]
        sigmoid = [1 / (1 + mp.exp(-mp.mpf(v))) for v in z]
        # (sigmoid(z) - t as (1 - t) sigmoid(z) - t sigmoid(-z): 1 - sigmoid(z) would need 300 digits too)
        exact_dz = [(1 - mp.mpf(target)) * s - mp.mpf(target) / (1 + mp.exp(mp.mpf(v))) for s, v in zip(sigmoid, z)]
    assert np.max(relative_errors(loss.data, exact_value)) <= TOLERANCE
    if target in (0.0, 1.0):
        assert np.max(relative_errors(dz, exact_dz)) <= TOLERANCE
    else:
        scale = np.maximum(np.array([float(s) for s in sigmoid]), target)
        assert np.max(np.abs(dz - np.array([float(e) for e in exact_dz])) / scale) <= TOLERANCE
