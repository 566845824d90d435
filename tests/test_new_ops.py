"""The ops of issue 12 against independent oracles.

- PyTorch float64: values, first derivatives and second derivatives (a Hessian-vector
  product) at the inputs each op's own Check draws, for every new op and parameter.
- mpmath at 40 digits: every new elementwise function, value and derivative, on a grid
  over its domain, to 1e-14 relative error.
- Edge cases stated in the issue: logsigmoid and binary_cross_entropy_with_logits at
  +-1000, norm's gradient at 0, slogdet's two outputs.

TORCH and MPMATH are tables keyed by op name, ready to join the shared oracle tables.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from gradcalc.autodiff import REGISTRY, Tensor, grad

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")
F = torch.nn.functional


# ---- PyTorch equivalents: torch_fn(*input tensors, **the op's params) ------------------------


def _dims(axis):
    return None if axis is None else axis


def _flat_scan(fn):
    """NumPy scans flatten when axis is None; torch needs a dim."""
    return lambda x, axis=None: fn(x.flatten(), 0) if axis is None else fn(x, axis)


def _norm(x, ord=2, axis=None, keepdims=False):
    order = 2 if ord == "fro" else ord
    return torch.linalg.vector_norm(x, ord=order, dim=_dims(axis), keepdim=keepdims)


def _pad(x, widths, value=0.0):
    from gradcalc.autodiff.ops.layout import pad_widths

    # torch.nn.functional.pad lists (before, after) from the last axis backwards.
    pairs = pad_widths(widths, x.ndim)
    return F.pad(x, [w for pair in reversed(pairs) for w in pair], value=value)


def _classes(t):
    return t.long()


TORCH = {
    "log2": torch.log2, "log10": torch.log10, "exp2": torch.exp2, "expm1": torch.expm1,
    "sinh": torch.sinh, "cosh": torch.cosh, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "atan2": torch.atan2, "hypot": torch.hypot,
    "erf": torch.erf, "erfc": torch.erfc, "square": torch.square, "reciprocal": torch.reciprocal,
    "cbrt": lambda x: torch.sign(x) * torch.abs(x) ** (1.0 / 3.0),
    "gelu": lambda x, approximate="none": F.gelu(x, approximate=approximate),
    "silu": F.silu, "softsign": F.softsign, "logsigmoid": F.logsigmoid,
    "leaky_relu": lambda x, slope=0.01: F.leaky_relu(x, slope), "elu": lambda x, alpha=1.0: F.elu(x, alpha),
    "var": lambda x, axis=None, keepdims=False, ddof=0: torch.var(x, dim=_dims(axis), keepdim=keepdims, correction=ddof),
    "std": lambda x, axis=None, keepdims=False, ddof=0: torch.std(x, dim=_dims(axis), keepdim=keepdims, correction=ddof),
    "norm": _norm,
    "cumsum": _flat_scan(torch.cumsum), "cumprod": _flat_scan(torch.cumprod), "logcumsumexp": _flat_scan(torch.logcumsumexp),
    "dot": torch.dot, "outer": torch.outer, "inner": torch.inner, "kron": torch.kron,
    "einsum": lambda *xs, subscripts: torch.einsum(subscripts, *xs),
    "trace": torch.trace, "diag": lambda x, k=0: torch.diag(x, k),
    "triu": lambda x, k=0: torch.triu(x, k), "tril": lambda x, k=0: torch.tril(x, k),
    "det": torch.linalg.det, "slogdet": lambda a: tuple(torch.linalg.slogdet(a)), "inv": torch.linalg.inv,
    "solve": torch.linalg.solve,
    "squeeze": lambda x, axis=None: torch.squeeze(x) if axis is None else torch.squeeze(x, axis),
    "unsqueeze": lambda x, axis: torch.unsqueeze(x, axis),
    "flip": lambda x, axis=None: torch.flip(x, tuple(range(x.ndim)) if axis is None else (axis,)),
    "roll": lambda x, shift, axis=None: torch.roll(x, shift, axis),
    "tile": lambda x, reps: torch.tile(x, reps),
    "repeat": lambda x, repeats, axis=None: torch.repeat_interleave(x, repeats, axis),
    "sort": lambda x, axis=-1, descending=False: torch.sort(x, dim=axis, descending=descending, stable=True).values,
    "pad": _pad,
    "binary_cross_entropy": lambda p, t, reduction="mean": F.binary_cross_entropy(p, t, reduction=reduction),
    "binary_cross_entropy_with_logits": lambda z, t, reduction="mean": F.binary_cross_entropy_with_logits(z, t, reduction=reduction),
    "nll_loss": lambda logp, t, reduction="mean": F.nll_loss(logp, _classes(t), reduction=reduction),
    "l1_loss": lambda p, t, reduction="mean": F.l1_loss(p, t, reduction=reduction),
    "huber": lambda p, t, delta=1.0, reduction="mean": F.huber_loss(p, t, reduction=reduction, delta=delta),
    "mse": lambda p, t, reduction="mean": F.mse_loss(*torch.broadcast_tensors(p, t), reduction=reduction),
    "cross_entropy": lambda x, t, label_smoothing=0.0, reduction="mean": F.cross_entropy(
        x, _classes(t), label_smoothing=label_smoothing, reduction=reduction
    ),
}


def draw(op, seed):
    """Inputs and params as the every-op gradcheck draws them (from the op's Check)."""
    spec, rng = op.check, np.random.default_rng(seed)
    if spec.make is not None:
        inputs, params = spec.make(rng)
    else:
        shapes = spec.shapes[seed % len(spec.shapes)]
        inputs, params = [rng.uniform(spec.low, spec.high, s) for s in shapes], dict(spec.params)
    if op.kink is not None and op.kink(*inputs, tol=spec.kink_gap, **params):
        return draw(op, seed + 1000)
    diff = list(spec.diff) if spec.diff is not None else list(range(len(inputs)))
    return inputs, params, diff


def outputs(result):
    return list(result) if isinstance(result, tuple) else [result]


def ours(op, inputs, params, diff):
    """Value, gradient of a weighted sum, and the gradient of <gradient, u> (second order)."""
    xs = [Tensor(x, requires_grad=i in diff) for i, x in enumerate(inputs)]
    outs = outputs(op(*xs, **params))
    rng = np.random.default_rng(1)
    weights = [rng.uniform(0.5, 1.5, o.shape) for o in outs]
    total = sum(((o * w).sum() for o, w in zip(outs, weights)), Tensor(0.0))
    firsts = grad(total, [xs[i] for i in diff], create_graph=True)
    us = [rng.uniform(0.5, 1.5, xs[i].shape) for i in diff]
    directional = sum(((g * u).sum() for g, u in zip(firsts, us)), Tensor(0.0))
    seconds = grad(directional, [xs[i] for i in diff]) if directional.requires_grad else [np.zeros(xs[i].shape) for i in diff]
    return [o.data for o in outs], [g.data for g in firsts], [np.asarray(getattr(s, "data", s)) for s in seconds], weights, us


def theirs(fn, inputs, params, diff, weights, us):
    ts = [torch.tensor(x, dtype=torch.float64, requires_grad=i in diff) for i, x in enumerate(inputs)]
    outs = outputs(fn(*ts, **params))
    total = sum((o * torch.tensor(w) for o, w in zip(outs, weights)), torch.tensor(0.0, dtype=torch.float64)).sum()
    targets = [ts[i] for i in diff]
    firsts = torch.autograd.grad(total, targets, create_graph=True, allow_unused=True)
    firsts = [torch.zeros_like(t) if g is None else g for g, t in zip(firsts, targets)]
    directional = sum((g * torch.tensor(u)).sum() for g, u in zip(firsts, us))
    if directional.requires_grad:
        seconds = torch.autograd.grad(directional, targets, allow_unused=True)
        seconds = [torch.zeros_like(t) if s is None else s for s, t in zip(seconds, targets)]
    else:
        seconds = [torch.zeros_like(t) for t in targets]
    as_numpy = lambda ts: [t.detach().numpy(force=True) for t in ts]  # noqa: E731
    return as_numpy(outs), as_numpy(firsts), as_numpy(seconds)


NEW_OPS = sorted(TORCH)
# PyTorch's double backward of binary_cross_entropy adds 1e-12 to p and to 1 - p, which
# moves its second derivative by about 1e-12 / p(1 - p) relative; ours is the exact
# t / p**2 + (1 - t) / (1 - p)**2 (test_binary_cross_entropy_second_derivative_is_exact).
SECOND_ORDER_RTOL = {"binary_cross_entropy": 1e-9}


@pytest.mark.parametrize("name", NEW_OPS)
@pytest.mark.parametrize("seed", range(4))
def test_value_and_two_derivatives_match_torch_float64(name, seed):
    op = REGISTRY[name]
    inputs, params, diff = draw(op, seed)
    values, firsts, seconds, weights, us = ours(op, inputs, params, diff)
    t_values, t_firsts, t_seconds = theirs(TORCH[name], inputs, params, diff, weights, us)
    for what, a, b, rtol in (
        ("value", values, t_values, 1e-12),
        ("first derivative", firsts, t_firsts, 1e-12),
        ("second derivative", seconds, t_seconds, SECOND_ORDER_RTOL.get(name, 1e-12)),
    ):
        for got, expected in zip(a, b, strict=True):
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-12, err_msg=f"{name} {what} {params}")


def test_every_new_differentiable_op_has_a_torch_equivalent():
    """The table covers the ops this file is about: everything outside the original set."""
    original = {
        "add", "sub", "mul", "div", "neg", "pow", "matmul", "exp", "log", "log1p", "sqrt", "sin", "cos", "tan", "tanh",
        "sigmoid", "softplus", "relu", "abs", "maximum", "minimum", "clip", "where", "sum", "mean", "prod", "max", "min",
        "reshape", "flatten", "transpose", "broadcast_to", "getitem", "unindex", "concatenate", "stack", "split",
        "logsumexp", "softmax", "log_softmax",
    }
    new = {op.name for op in REGISTRY.values() if op.has_gradient and op.name not in original}
    assert new - set(TORCH) == set()


# ---- mpmath: every new elementwise function to 1e-14 ------------------------------------------
mp = mpmath.mp
TINY = np.finfo(float).tiny  # below this, results are subnormal: compared absolutely


def spread(low, high, n=121):
    """n points from low to high, and +-1e-20 ... +-1 when the range crosses 0."""
    small = np.array([s * 10.0**k for k in range(-20, 1, 2) for s in (-1, 1)])
    return np.unique(np.concatenate([np.linspace(low, high, n), small[(small > low) & (small < high)]]))


def magnitudes(low_exp, high_exp, n=121):
    return np.geomspace(10.0**low_exp, 10.0**high_exp, n)


def both_signs(low_exp, high_exp, n=61):
    m = magnitudes(low_exp, high_exp, n)
    return np.concatenate([-m[::-1], m])


def _logistic(x):
    return 1 / (1 + mp.exp(-x))


UNIT_INTERVAL = np.concatenate([spread(-0.999, 0.999), 1 - magnitudes(-15, -1, 15), -1 + magnitudes(-15, -1, 15)])

# name: (function, derivative, grid over the whole domain); both at 50 digits.
MPMATH = {
    "log2": (lambda x: mp.log(x, 2), lambda x: 1 / (x * mp.log(2)), magnitudes(-300, 300)),
    "log10": (mp.log10, lambda x: 1 / (x * mp.log(10)), magnitudes(-300, 300)),
    "exp2": (lambda x: mp.power(2, x), lambda x: mp.power(2, x) * mp.log(2), spread(-1000, 1000)),
    "expm1": (mp.expm1, mp.exp, spread(-700, 700)),
    "sinh": (mp.sinh, mp.cosh, spread(-700, 700)),
    "cosh": (mp.cosh, mp.sinh, spread(-700, 700)),
    "asinh": (mp.asinh, lambda x: 1 / mp.sqrt(x * x + 1), spread(-1e300, 1e300)),
    "acosh": (mp.acosh, lambda x: 1 / mp.sqrt(x * x - 1), np.concatenate([1 + magnitudes(-15, 0, 31), magnitudes(0.5, 300)])),
    "atanh": (mp.atanh, lambda x: 1 / (1 - x * x), UNIT_INTERVAL),
    "asin": (mp.asin, lambda x: 1 / mp.sqrt(1 - x * x), UNIT_INTERVAL),
    "acos": (mp.acos, lambda x: -1 / mp.sqrt(1 - x * x), UNIT_INTERVAL),
    "atan": (mp.atan, lambda x: 1 / (1 + x * x), spread(-1e300, 1e300)),
    "erf": (mp.erf, lambda x: 2 / mp.sqrt(mp.pi) * mp.exp(-x * x), spread(-30, 30)),
    "erfc": (mp.erfc, lambda x: -2 / mp.sqrt(mp.pi) * mp.exp(-x * x), spread(-30, 30)),
    "square": (lambda x: x * x, lambda x: 2 * x, spread(-1e150, 1e150)),
    "cbrt": (lambda x: mp.sign(x) * mp.cbrt(abs(x)), lambda x: 1 / (3 * mp.cbrt(x * x)), both_signs(-300, 300)),
    "reciprocal": (lambda x: 1 / x, lambda x: -1 / (x * x), both_signs(-300, 300)),
    "gelu": (lambda x: x * mp.ncdf(x), lambda x: mp.ncdf(x) + x * mp.npdf(x), spread(-40, 1e300)),
    "silu": (lambda x: x * _logistic(x), lambda x: _logistic(x) * (1 + x * _logistic(-x)), spread(-700, 1e300)),
    "softsign": (lambda x: x / (1 + abs(x)), lambda x: 1 / (1 + abs(x)) ** 2, spread(-1e300, 1e300)),
    "logsigmoid": (lambda x: -mp.log1p(mp.exp(-x)), lambda x: _logistic(-x), spread(-1e300, 700)),
    "leaky_relu": (
        lambda x: x if x > 0 else mp.mpf(0.01) * x, lambda x: mp.mpf(1) if x > 0 else mp.mpf(0.01), spread(-1e300, 1e300),
    ),
    "elu": (lambda x: x if x > 0 else mp.expm1(x), lambda x: mp.mpf(1) if x > 0 else mp.exp(x), spread(-700, 1e300)),
}


def _rel_error(got, exact, floor=0.0):
    """|got - exact| / |exact|; a subnormal exact value must be matched to within the
    smallest normal number, an overflowing one exactly."""
    if abs(exact) > np.finfo(float).max:
        return 0.0 if got == float(exact) else np.inf
    if abs(exact) < TINY:
        return 0.0 if abs(got - float(exact)) <= TINY else np.inf
    return float(abs((mp.mpf(got) - exact) / max(abs(exact), floor)))


@pytest.mark.parametrize("name", sorted(MPMATH))
def test_elementwise_values_and_derivatives_within_1e_14_of_mpmath(name):
    f, df, xs = MPMATH[name]
    x = Tensor(xs, requires_grad=True)
    values = REGISTRY[name](x)
    slopes = grad(values.sum(), x).data
    worst = []
    with mp.workdps(50):
        for xi, value, slope in zip(xs, values.data, slopes):
            point = mp.mpf(float(xi))
            worst.append((max(_rel_error(value, f(point)), _rel_error(slope, df(point))), xi))
    error, where = max(worst)
    assert error <= 1e-14, f"{name}: relative error {error:.3g} at x = {where!r}"


@pytest.mark.parametrize("name", sorted(n for n in MPMATH if REGISTRY[n].complex_safe))
def test_complex_safe_forwards_are_analytic(name):
    """Complex step Im f(x + ih) / h gives the derivative to 1e-13 for |x| <= 30."""
    _, df, xs = MPMATH[name]
    xs = xs[(np.abs(xs) <= 30) & (np.abs(xs) >= 1e-100)]
    h = 1e-30 * np.abs(xs)
    stepped = np.imag(REGISTRY[name].forward(xs + 1j * h)) / h
    with mp.workdps(50):
        errors = [_rel_error(s, df(mp.mpf(float(x)))) for s, x in zip(stepped, xs)]
    assert max(errors) <= 1e-13, name


MPMATH_BINARY = {"atan2": mpmath.atan2, "hypot": mpmath.hypot}


@pytest.mark.parametrize("name", sorted(MPMATH_BINARY))
def test_two_input_functions_and_partial_derivatives_within_1e_14_of_mpmath(name):
    reference = MPMATH_BINARY[name]
    side = np.concatenate([-np.geomspace(1e-3, 1e3, 9), np.geomspace(1e-3, 1e3, 9)])
    a, b = (v.ravel() for v in np.meshgrid(side, side))
    ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    values = REGISTRY[name](ta, tb)
    da, db = (g.data for g in grad(values.sum(), [ta, tb]))
    with mp.workdps(40):
        for i in range(len(a)):
            point = (mpmath.mpf(a[i]), mpmath.mpf(b[i]))
            assert _rel_error(values.data[i], reference(*point), 0.0) <= 1e-14, (name, a[i], b[i])
            assert _rel_error(da[i], mpmath.diff(reference, point, (1, 0)), 0.0) <= 1e-14, (name, a[i], b[i])
            assert _rel_error(db[i], mpmath.diff(reference, point, (0, 1)), 0.0) <= 1e-14, (name, a[i], b[i])


def test_gelu_tanh_approximation_within_1e_14_of_mpmath():
    c = mpmath.sqrt(2 / mpmath.pi)
    reference = lambda x: x / 2 * (1 + mpmath.tanh(c * (x + mpmath.mpf("0.044715") * x**3)))  # noqa: E731
    xs = np.linspace(-8, 8, 33)
    x = Tensor(xs, requires_grad=True)
    values = REGISTRY["gelu"](x, approximate="tanh")
    slopes = grad(values.sum(), x).data
    with mp.workdps(40):
        for xi, value, slope in zip(xs, values.data, slopes):
            # relative to max(|exact|, 1) near the zero crossing of the derivative at -0.75
            assert _rel_error(value, reference(mpmath.mpf(xi)), 1.0) <= 1e-14
            assert _rel_error(slope, mpmath.diff(reference, mpmath.mpf(xi)), 1.0) <= 1e-14


def test_tails_keep_full_relative_precision():
    """Where a naive formula cancels to 0: silu(-40), logsigmoid'(40), gelu(-10)."""
    with mp.workdps(40):
        x = Tensor(-40.0, requires_grad=True)
        exact = -40 / (1 + mpmath.exp(40))
        assert _rel_error(REGISTRY["silu"](x).item(), exact, 0.0) <= 1e-14
        x = Tensor(40.0, requires_grad=True)
        exact_slope = 1 / (1 + mpmath.exp(40))
        assert _rel_error(grad(REGISTRY["logsigmoid"](x), x).item(), exact_slope, 0.0) <= 1e-14
        assert _rel_error(REGISTRY["gelu"](Tensor(-10.0)).item(), -10 * mpmath.ncdf(-10), 0.0) <= 1e-14


# ---- edges named in the issue ------------------------------------------------------------------


def test_logsigmoid_is_finite_at_plus_and_minus_1000():
    x = Tensor([-1000.0, 1000.0], requires_grad=True)
    y = REGISTRY["logsigmoid"](x)
    assert y.data.tolist() == [-1000.0, 0.0]
    assert grad(y.sum(), x).data.tolist() == [1.0, 0.0]


def test_binary_cross_entropy_with_logits_is_exact_at_plus_and_minus_1000():
    z = Tensor([1000.0, -1000.0, 1000.0, -1000.0], requires_grad=True)
    t = Tensor([1.0, 0.0, 0.0, 1.0])
    loss = REGISTRY["binary_cross_entropy_with_logits"](z, t, reduction="none")
    assert loss.data.tolist() == [0.0, 0.0, 1000.0, 1000.0]
    assert grad(loss.sum(), z).data.tolist() == [0.0, 0.0, 1.0, -1.0]


@pytest.mark.parametrize("ord", [1, 2, math.inf, "fro"])
def test_norm_gradient_at_zero_is_zero_not_nan(ord):
    x = Tensor(np.zeros(3), requires_grad=True)
    y = REGISTRY["norm"](x, ord=ord)
    assert y.item() == 0.0
    g = grad(y, x, create_graph=True)
    assert g.data.tolist() == [0.0, 0.0, 0.0]


def test_slogdet_gives_sign_and_log_abs_det():
    a = np.array([[0.0, 2.0], [3.0, 1.0]])  # det = -6
    sign, logabsdet = REGISTRY["slogdet"](Tensor(a))
    assert sign.item() == -1.0
    assert logabsdet.item() == pytest.approx(math.log(6.0), rel=1e-15)


def test_binary_cross_entropy_second_derivative_is_exact():
    p, t = np.array([0.2, 0.7, 0.95]), np.array([0.0, 1.0, 0.3])
    x = Tensor(p, requires_grad=True)
    g = grad(REGISTRY["binary_cross_entropy"](x, t, reduction="sum"), x, create_graph=True)
    second = grad(g.sum(), x).data
    np.testing.assert_allclose(second, t / p**2 + (1 - t) / (1 - p) ** 2, rtol=1e-15)


def test_std_with_ddof_1_is_torch_default():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    assert REGISTRY["std"](Tensor(x), ddof=1).item() == pytest.approx(torch.tensor(x).std().item(), rel=1e-15)


# ---- reachable from every front door -------------------------------------------------------------
ALIASES_OF_ISSUE_12 = [
    "arcsinh", "arccosh", "arctanh", "arcsin", "arccos", "arctan", "arctan2", "swish", "expand_dims", "smooth_l1",
]


def test_gradcalc_ops_lists_every_new_function_and_completion_offers_it():
    from gradcalc.cli.repl import Repl

    from .test_cli import gradcalc

    listing = gradcalc("ops").stdout
    words = Repl().words()
    for name in [*NEW_OPS, *ALIASES_OF_ISSUE_12]:
        assert name in words, name
        op = REGISTRY.get(name)
        assert op is None or op.signature in listing, name
    for alias in ALIASES_OF_ISSUE_12:
        assert alias in listing, alias


def test_new_functions_run_through_the_language():
    from gradcalc.parser import Session

    source = """
    A = [[2.0, 1.0], [1.0, 3.0]]
    s, l = slogdet(A)
    x = [0.5, -1.0]
    y = l + x.sinh().sum() + A.var(ddof=1) + norm(x, ord=inf) + einsum(A, x, subscripts='ij,j->i').sum()
    grad(y, x)
    """
    results = Session().run_source("\n".join(line.strip() for line in source.strip().splitlines()))
    # d/dx [sum sinh(x) + max|x| + sum(A @ x)] = cosh(x) + [0, -1] + column sums of A
    expected = np.cosh([0.5, -1.0]) + [0.0, -1.0] + [3.0, 4.0]
    np.testing.assert_allclose(results[-1].value.data, expected, rtol=1e-15)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_probability_targets_and_label_smoothing_matches_torch(reduction):
    rng = np.random.default_rng(3)
    logits = rng.uniform(-3, 3, (4, 5))
    target = rng.dirichlet(np.ones(5), 4)
    params = {"label_smoothing": 0.2, "reduction": reduction}
    values, firsts, seconds, weights, us = ours(REGISTRY["cross_entropy"], [logits, target], params, [0, 1])
    fn = lambda x, t, **p: F.cross_entropy(x, t, **p)  # noqa: E731
    expected = theirs(fn, [logits, target], params, [0, 1], weights, us)
    for got, want in zip([*values, *firsts, *seconds], [v for group in expected for v in group], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("a", [[[1.0, 2.0], [2.0, 4.0]], [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]])
def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix(a):
    """d det / d a_ij = (-1)**(i+j) det(minor ij), which exists for singular matrices too
    (det is a polynomial). PyTorch 2.13 returns 0 for the first case, where
    det([[1 + h, 2], [2, 4]]) = 4h has slope 4."""
    a = np.array(a)
    x = Tensor(a, requires_grad=True)
    n = len(a)
    minor = lambda i, j: np.delete(np.delete(a, i, 0), j, 1)  # noqa: E731
    cofactors = [[(-1) ** (i + j) * (np.linalg.det(minor(i, j)) if n > 1 else 1.0) for j in range(n)] for i in range(n)]
    np.testing.assert_allclose(grad(REGISTRY["det"](x), x).data, cofactors, atol=1e-14)


@pytest.mark.parametrize(
    "call",
    [
        lambda: REGISTRY["repeat"](np.ones(2), 10**9),
        lambda: REGISTRY["outer"](np.ones(1000), np.ones(1000)),
        lambda: REGISTRY["kron"](np.ones(1000), np.ones(1000)),
        lambda: REGISTRY["einsum"](np.ones(1000), np.ones(1000), subscripts="i,j->ij"),
        lambda: REGISTRY["tile"](np.ones(1), 10**8),
        lambda: REGISTRY["pad"](np.ones(1), 10**8),
        lambda: REGISTRY["diag"](np.ones(2000)),
    ],
)
def test_ops_that_outgrow_their_inputs_are_refused_before_allocating(call):
    from gradcalc.autodiff import SizeLimitError, set_max_elements

    previous = set_max_elements(100_000)
    try:
        with pytest.raises(SizeLimitError):
            call()
    finally:
        set_max_elements(previous)
