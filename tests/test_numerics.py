"""The engine's numerics: each reported case, value and every gradient, from closed
forms or PyTorch's published behaviour (float64), reproduced through the command where
the report used it."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.autodiff import Tensor, Value, grad, hessian, ops
from gradcalc.autodiff.errors import ArgumentError

from .test_cli import gradcalc

nan, inf = math.nan, math.inf


def leaf(x):
    return Tensor(x, requires_grad=True)


def grads_of(y, *xs):
    return [g.data.tolist() for g in grad(y.sum(), list(xs))]


# ---- clip: tensor bounds get gradients, as torch.clamp ---------------------------------------


def test_clip_gives_tensor_bounds_their_gradient():
    x, lo, hi = leaf([-1.0, 0.5, 2.0]), leaf([-0.5, 0.0, 0.0]), leaf([1.0, 1.0, 1.0])
    y = ops.clip(x, lo, hi)
    assert y.data.tolist() == [-0.5, 0.5, 1.0]
    assert grads_of(y, x, lo, hi) == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]


def test_clip_takes_2d_bounds_that_broadcast():
    x = leaf([[-2.0, 0.0, 2.0], [0.3, -0.3, 5.0]])
    lo = leaf([[-1.0], [0.0]])
    hi = leaf([1.0, 1.0, 4.0])
    y = ops.clip(x, lo, hi)
    assert y.data.tolist() == [[-1.0, 0.0, 2.0], [0.3, 0.0, 4.0]]
    gx, glo, ghi = grads_of(y, x, lo, hi)
    assert gx == [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]  # x at a bound keeps its gradient (torch)
    assert glo == [[1.0], [1.0]]
    assert ghi == [0.0, 0.0, 1.0]


def test_clip_keyword_bounds_are_constants_and_a_tensor_keyword_is_refused():
    assert ops.clip(Tensor([-2.0, 2.0]), low=-1, high=1).data.tolist() == [-1.0, 1.0]
    with pytest.raises(ArgumentError, match="positionally"):
        ops.clip(Tensor([1.0]), low=leaf(0.0))
    with pytest.raises(ArgumentError, match="needs a bound"):
        ops.clip(Tensor([1.0]))


def test_clip_with_tensor_bounds_through_the_command():
    result = gradcalc("eval", "--json", "sum(clip(x, lo, hi))", "x=[-1, 0.5, 2]", "lo=[-0.5, 0, 0]", "hi=[[1, 1, 1], [2, 2, 2]]")
    assert result.returncode == 0, result.stderr
    grads = json.loads(result.stdout)["grads"]
    assert grads["lo"] == [2.0, 0.0, 0.0]
    assert grads["hi"] == [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert grads["x"] == [0.0, 2.0, 1.0]


# ---- powers at zero: every derivative order of a polynomial is finite ------------------------


def eval_json(*args):
    done = gradcalc("eval", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_second_derivative_of_a_square_at_zero_through_the_command():
    out = eval_json("grad(grad(x**2, x), x)", "x=0")
    assert out["value"] == 2.0 and out["grads"]["x"] == 0.0


def test_hessian_of_a_sum_of_squares_differentiated_again_through_the_command():
    out = eval_json("sum(hessian(sum(x**2), x))", "x=[0, 0]")
    assert out["value"] == 4.0 and out["grads"]["x"] == [0.0, 0.0]


def test_x_to_the_zero_at_zero_has_gradient_zero():
    x = leaf(0.0)
    y = x**0
    assert y.item() == 1.0 and grad(y, x).item() == 0.0


@pytest.mark.parametrize(
    "a, b, value, grad_a, grad_b",
    [  # PyTorch float64's answers (torch.pow's backward)
        (0.0, 0.0, 1.0, 0.0, 0.0),
        (0.0, -1.0, inf, -inf, -inf),
        (-0.0, -1.0, -inf, -inf, inf),
        (0.0, 1.0, 0.0, 1.0, 0.0),
        (0.0, 2.0, 0.0, 0.0, 0.0),
        (0.0, 0.5, 0.0, inf, 0.0),
        (0.0, -0.5, inf, -inf, -inf),
        (2.0, 0.0, 1.0, 0.0, math.log(2.0)),
        (-1.0, 2.0, 1.0, -2.0, nan),
    ],
)
def test_powers_with_a_zero_base_or_exponent_follow_pytorch(a, b, value, grad_a, grad_b):
    ta, tb = leaf(a), leaf(b)
    y = ta**tb
    ga, gb = grad(y, [ta, tb])
    np.testing.assert_equal([y.item(), ga.item(), gb.item()], [value, grad_a, grad_b])


@pytest.mark.parametrize("point", [0.0, -1.5, 2.0])
def test_every_derivative_of_a_polynomial_is_finite_and_exact(point):
    # p(x) = 3 x**4 - 2 x**3 + x**2 - 5 x + 7 and its derivatives in closed form.
    closed = [
        lambda x: 3 * x**4 - 2 * x**3 + x**2 - 5 * x + 7,
        lambda x: 12 * x**3 - 6 * x**2 + 2 * x - 5,
        lambda x: 36 * x**2 - 12 * x + 2,
        lambda x: 72 * x - 12,
        lambda x: 72.0,
        lambda x: 0.0,
        lambda x: 0.0,
    ]
    x = leaf(point)
    y = 3 * x**4 - 2 * x**3 + x**2 - 5 * x + 7
    for order, expected in enumerate(closed):
        assert y.item() == pytest.approx(expected(point), rel=1e-14, abs=1e-14), f"order {order}"
        y = grad(y, x, create_graph=True)


@settings(max_examples=40)
@given(
    coefficients=st.lists(st.integers(-5, 5), min_size=1, max_size=6),
    point=st.sampled_from([0.0, -0.0, 1.0, -1.0]) | st.floats(-3, 3),
)
def test_any_polynomial_has_finite_exact_derivatives_at_every_order(coefficients, point):
    """sum c_k x**k, differentiated len+1 times, against the closed-form derivatives."""
    x = leaf(point)
    y = sum((c * x**k for k, c in enumerate(coefficients)), Tensor(0.0))
    poly = np.polynomial.Polynomial(coefficients)
    for order in range(len(coefficients) + 1):
        expected = poly.deriv(order)(point) if order else poly(point)
        assert np.isfinite(y.item()), f"order {order}"
        assert y.item() == pytest.approx(expected, rel=1e-12, abs=1e-9), f"order {order}"
        if not y.requires_grad:
            break
        y = grad(y, x, create_graph=True)


# Derivatives of tanh and sigmoid to the fourth order at 0, 0.5 and -3, in closed form
# (t = tanh x, s = sigmoid x): at 0 a derivative rule written with |x| has slope 0 there
# and made the third derivative of tanh 0 instead of -2.
_TANH_ORDERS = [
    lambda t: t, lambda t: 1 - t * t, lambda t: -2 * t * (1 - t * t), lambda t: (1 - t * t) * (6 * t * t - 2),
    lambda t: (1 - t * t) * (16 * t - 24 * t**3),
]
_SIGMOID_ORDERS = [
    lambda s: s, lambda s: s * (1 - s), lambda s: s * (1 - s) * (1 - 2 * s), lambda s: s * (1 - s) * (1 - 6 * s + 6 * s * s),
    lambda s: s * (1 - s) * (1 - 2 * s) * (1 - 12 * s + 12 * s * s),
]


@pytest.mark.parametrize("point", [0.0, -0.0, 0.5, -3.0])
@pytest.mark.parametrize("name, closed, base", [("tanh", _TANH_ORDERS, math.tanh), ("sigmoid", _SIGMOID_ORDERS, lambda v: 1 / (1 + math.exp(-v)))])
def test_tanh_and_sigmoid_derivatives_of_every_order_match_their_closed_forms(name, closed, base, point):
    x = leaf(point)
    y = getattr(ops, name)(x)
    for order, expected in enumerate(closed):
        assert y.item() == pytest.approx(expected(base(point)), rel=1e-12, abs=1e-15), f"{name} order {order}"
        y = grad(y, x, create_graph=True)


def test_tanh_second_derivative_stays_finite_far_out():
    """Past cosh's overflow (|x| > 710) every derivative of tanh is 0, not nan."""
    x = leaf([800.0, -800.0, 711.0])
    first = grad(ops.tanh(x).sum(), x, create_graph=True)
    second = grad(first.sum(), x)
    assert np.array_equal(first.data, [0.0, 0.0, 0.0]) and np.array_equal(second.data, [0.0, 0.0, 0.0])


# ---- nan and infinity -------------------------------------------------------------------------


def test_relu_abs_and_sign_of_nan_are_nan():
    x = leaf([nan, -1.0, 0.0, 2.0])
    for f in (ops.relu, ops.abs):
        y = f(x)
        assert np.isnan(y.data[0])
        g = grad(y.sum(), x).data
        assert np.isnan(g[0]), f.name  # nan in, nan out
    np.testing.assert_equal(grad(ops.relu(x).sum(), x).data[1:], [0.0, 0.0, 1.0])
    np.testing.assert_equal(grad(ops.abs(x).sum(), x).data[1:], [-1.0, 0.0, 1.0])
    assert np.isnan(ops.sign(Tensor(nan)).item())


def test_maximum_and_minimum_with_nan_give_nan_and_torch_gradients():
    a, b = leaf([nan, 1.0, 2.0, nan]), leaf([1.0, nan, 2.0, nan])
    for f in (ops.maximum, ops.minimum):
        y = f(a, b)
        np.testing.assert_equal(y.data, [nan, nan, 2.0, nan])
        ga, gb = grad(y.sum(), [a, b])  # PyTorch: 1 for both sides at nan, 1/2 at a tie
        assert ga.data.tolist() == [1.0, 1.0, 0.5, 1.0] and gb.data.tolist() == [1.0, 1.0, 0.5, 1.0]


def test_softmax_of_an_infinite_logit_is_its_limit():
    x = leaf([inf, 1.0])
    s = ops.softmax(x)
    assert s.data.tolist() == [1.0, 0.0]
    assert grad(s[0], x).data.tolist() == [0.0, 0.0]
    assert ops.softmax(Tensor([inf, inf, 1.0])).data.tolist() == [0.5, 0.5, 0.0]
    assert ops.log_softmax(Tensor([inf, 1.0])).data.tolist() == [0.0, -inf]
    assert ops.logsumexp(Tensor([inf, 1.0])).item() == inf


def test_logsumexp_and_log_softmax_with_minus_infinity():
    x = leaf([-inf, 1.0, 2.0])
    lse = ops.logsumexp(x)
    assert lse.item() == pytest.approx(2.0 + math.log1p(math.exp(-1.0)), rel=1e-15)
    p1 = 1 / (1 + math.e)
    np.testing.assert_allclose(grad(lse, x).data, [0.0, p1, 1 - p1], rtol=1e-15)
    lsm = ops.log_softmax(x)
    assert lsm.data[0] == -inf and lsm.data[1] == pytest.approx(-1.3132616875182228, rel=1e-15)


def test_cross_entropy_with_minus_infinity_and_huge_logits_is_finite():
    logits = leaf([[-inf, 1.0, 2.0]])
    loss = ops.cross_entropy(logits, Tensor([1.0]))
    assert loss.item() == pytest.approx(1.3132616875182228, rel=1e-15)  # log(1 + e)
    p1 = 1 / (1 + math.e)
    np.testing.assert_allclose(grad(loss, logits).data, [[0.0, p1 - 1, 1 - p1]], rtol=1e-15)
    huge = leaf([[1e308, -1e308]])
    loss = ops.cross_entropy(huge, Tensor([0.0]))
    assert loss.item() == 0.0 and grad(loss, huge).data.tolist() == [[0.0, 0.0]]


def test_cross_entropy_through_the_command():
    out = eval_json("cross_entropy(z, [1])", "z=[[-inf, 1, 2]]")
    assert out["value"] == pytest.approx(1.3132616875182228, rel=1e-15)
    assert out["grads"]["z"][0][0] == 0.0


def test_nan_in_means_nan_out():
    x = leaf([nan, 1.0])
    for f in (ops.softmax, ops.log_softmax, ops.exp, ops.sigmoid, ops.softplus, ops.tanh):
        y = f(x)
        assert np.isnan(y.data[0]), f.name
    assert np.isnan(ops.logsumexp(x).item()) and np.isnan(ops.cross_entropy(Tensor([[nan, 1.0]]), Tensor([0.0])).item())
    assert np.isnan(ops.max(x).item()) and np.isnan(ops.prod(x).item()) and np.isnan(ops.sum(x).item())


# ---- accuracy cases from the report (the full grid is tests/test_accuracy.py) -----------------


def test_sigmoid_tails_keep_their_digits():
    x = leaf(-40.0)
    assert ops.sigmoid(x).item() == pytest.approx(4.248354255291589e-18, rel=1e-15)
    y = ops.log(ops.sigmoid(x))
    assert y.item() == pytest.approx(-40.0 - math.log1p(math.exp(-40.0)), rel=1e-15)
    assert grad(y, x).item() == pytest.approx(1.0, rel=1e-15)  # 1 - sigmoid(-40)


def test_tanh_derivative_in_the_tails():
    x = leaf([10.0, 20.0, -30.0])
    exact = [1 / math.cosh(v) ** 2 for v in (10.0, 20.0, -30.0)]
    np.testing.assert_allclose(grad(ops.tanh(x).sum(), x).data, exact, rtol=1e-14)


def test_softplus_gradient_at_minus_forty():
    x = leaf(-40.0)
    assert grad(ops.softplus(x), x).item() == pytest.approx(4.248354255291589e-18, rel=1e-15)


# ---- prod with zeros ----------------------------------------------------------------------------


def test_prod_with_zeros_has_the_exact_gradient():
    x = leaf([0.0, 2.0, 3.0])
    assert grad(ops.prod(x), x).data.tolist() == [6.0, 0.0, 0.0]
    two = leaf([0.0, 0.0, 3.0])
    assert grad(ops.prod(two), two).data.tolist() == [0.0, 0.0, 0.0]
    # Second order: d2 prod / dx_i dx_j is the product of the elements other than i and j.
    assert hessian(ops.prod(x), x).data.tolist() == [[0.0, 3.0, 2.0], [3.0, 0.0, 0.0], [2.0, 0.0, 0.0]]
    assert hessian(ops.prod(two), two).data.tolist() == [[0.0, 3.0, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


def test_prod_with_zeros_along_an_axis():
    x = leaf([[0.0, 2.0], [3.0, 0.0], [4.0, 5.0]])
    assert grad(ops.prod(x, axis=0).sum(), x).data.tolist() == [[12.0, 0.0], [0.0, 10.0], [0.0, 0.0]]
    assert grad(ops.prod(x, axis=1).sum(), x).data.tolist() == [[2.0, 0.0], [0.0, 3.0], [5.0, 4.0]]


def test_prod_with_zeros_through_the_command():
    out = eval_json("prod(x)", "x=[0, 2, 3]")
    assert out["value"] == 0.0 and out["grads"]["x"] == [6.0, 0.0, 0.0]


# ---- where does not leak nan from the branch not taken ---------------------------------------


def test_where_with_sqrt_of_a_negative_branch_gives_gradient_zero():
    x = leaf([-1.0, 0.0, 4.0])
    y = ops.where(x > 0, ops.sqrt(x), 0.0)
    g = grad(y.sum(), x, create_graph=True)
    assert g.data.tolist() == [0.0, 0.0, 0.25]
    assert grad(g.sum(), x).data.tolist() == [0.0, 0.0, -1 / 32]


def test_where_through_the_command():
    out = eval_json("where(x > 0, sqrt(x), 0) + where(x > 0, x * log(x), 0)", "x=-1")
    assert out["value"] == 0.0 and out["grads"]["x"] == 0.0


def test_where_masking_keeps_the_chain_rule_exact_where_the_gradient_is_zero():
    # d/dx [sqrt(x) * (x - 1)] at x = 1: the upstream gradient of sqrt is 0 there, yet the
    # second derivative needs sqrt' = 1/2 (masking only replaces nan, so it is kept).
    x = leaf(1.0)
    g = grad(ops.sqrt(x) * (x - 1), x, create_graph=True)
    assert g.item() == 1.0
    assert grad(g, x).item() == 1.0  # 2 sqrt'(1) + (x - 1) sqrt''(1) = 2 * 1/2 + 0


# ---- clear errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["max(x, 0)", "min(x, 0)", "logsumexp(x, -1)", "prod(x, -1)"])
def test_an_axis_of_a_scalar_is_a_clear_error(source):
    done = gradcalc("eval", source, "x=3")
    assert done.returncode == 2 and "internal error" not in done.stderr
    assert "a scalar has no axis" in done.stderr


@pytest.mark.parametrize("name, other", [("max", "maximum"), ("min", "minimum")])
def test_max_with_a_non_integer_axis_names_the_elementwise_op(name, other):
    done = gradcalc("eval", f"{name}(A, 0.5)", "A=[[1, 2], [3, 4]]")
    assert done.returncode == 2 and f"use {other}(a, b)" in done.stderr
    with pytest.raises(ArgumentError, match=other):
        getattr(ops, name)(Tensor([[1.0, 2.0]]), Tensor([1.0, 2.0]))


def test_mean_of_nothing_is_nan_without_a_warning():
    done = gradcalc("eval", "mean(zeros(0))")
    assert done.returncode == 0 and "RuntimeWarning" not in done.stderr and "value: nan" in done.stdout
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(ops.mean(Tensor(np.zeros((0, 3))), axis=0).data).all()


# ---- the scalar engine ----------------------------------------------------------------------------


@pytest.mark.parametrize("source, point, value, gradient", [
    ("x ** -1", "x=2", 0.5, -0.25),  # micrograd and PyTorch: 0.5 and -0.25
    ("x ** (1/2)", "x=4", 2.0, 0.25),
    ("x ** (2 - 2)", "x=0", 1.0, 0.0),
])
def test_scalar_engine_takes_computed_constant_exponents(source, point, value, gradient):
    out = eval_json("--engine", "scalar", source, point)
    assert out["value"] == value and out["grads"]["x"] == gradient


def test_scalar_engine_refuses_a_variable_exponent():
    done = gradcalc("eval", "--engine", "scalar", "x ** y", "x=2", "y=3")
    assert done.returncode == 2 and "constant exponents" in done.stderr


@pytest.mark.parametrize("fn, x", [
    ("sigmoid", -1000.0), ("sigmoid", 1000.0), ("sigmoid", -40.0), ("softplus", 1000.0), ("softplus", -1000.0),
    ("softplus", -40.0), ("tanh", 20.0), ("tanh", -400.0), ("abs", nan), ("relu", nan), ("relu", -inf), ("exp", 1000.0),
    ("log", 0.0), ("sqrt", 0.0), ("sigmoid", nan), ("softplus", inf), ("tanh", nan),
])
def test_scalar_and_tensor_engines_agree_at_edges(fn, x):
    s, t = Value(x), leaf(x)
    sy, ty = getattr(s, fn)(), getattr(ops, fn)(t)
    sy.backward()
    ty.backward()
    np.testing.assert_allclose([sy.data, s.grad], [ty.item(), float(t.grad)], rtol=1e-14, equal_nan=True)


# ---- the reported cases through the command ----------------------------------------------------


# Expected numbers: closed forms; tanh'(20), sigmoid(-40) and softplus(-40) are mpmath's
# correctly rounded sech(20)**2 and e**-40 / (1 + e**-40) = log1p(e**-40) to 17 digits.
@pytest.mark.parametrize("args, value, grads", [
    (("relu(x) + maximum(x, y)", "x=nan", "y=1"), "nan", {"x": "nan", "y": 1.0}),
    (("softmax(z)[0]", "z=[inf, 1]"), 1.0, {"z": [0.0, 0.0]}),
    (("log(sigmoid(x))", "x=-40"), -40.0, {"x": 1.0}),
    (("tanh(x)", "x=20"), 1.0, {"x": 1.6993417021166355e-17}),
    (("softplus(x)", "x=-40"), 4.248354255291589e-18, {"x": 4.248354255291589e-18}),
    (("x ** 0", "x=0"), 1.0, {"x": 0.0}),
    (("x ** y", "x=0", "y=-1"), "inf", {"x": "-inf", "y": "-inf"}),
    (("sigmoid(x)", "--engine", "scalar", "x=-1000"), 0.0, {"x": 0.0}),
    (("softplus(x)", "--engine", "scalar", "x=1000"), 1000.0, {"x": 1.0}),
    (("abs(x) + relu(x)", "--engine", "scalar", "x=nan"), "nan", {"x": "nan"}),
    # a constant passes nothing back, not even through a nan slope (the tensor engine gave nan through abs)
    (("abs(x) ** 0 + relu(y) ** 0", "x=nan", "y=nan"), 2.0, {"x": 0.0, "y": 0.0}),
    (("abs(x) ** 0 + relu(y) ** 0", "--engine", "scalar", "x=nan", "y=nan"), 2.0, {"x": 0.0, "y": 0.0}),
])
def test_reported_cases_through_the_command(args, value, grads):
    out = eval_json(*args)
    assert out["value"] == value
    for name, g in grads.items():
        assert out["grads"][name] == g, name


# ---- the engines at edge inputs (attack report D5), through the command, against torch ---------


def _json_number(v):
    return float(v) if isinstance(v, str) else v


def _torch_value_and_grad(source, x):
    torch = pytest.importorskip("torch")
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = eval(source, {"sqrt": torch.sqrt}, {"x": t})  # the sources below are Python too
    y.backward()
    return y.item(), t.grad.item()


@pytest.mark.parametrize("engine", ["scalar", "tensor"])
@pytest.mark.parametrize("source, x", [
    ("sqrt(x)", -inf), ("x ** (1/2)", -inf), ("x / x", 1e-300), ("x / x", 1e308),
    ("x / x", 0.0), ("x ** 0", nan), ("sqrt(x)", -0.0), ("x ** 0 / x", 0.0), ("1 / x", 1e-300), ("x / 3", 1e-320),
])
def test_engines_match_torch_at_edge_inputs_through_the_command(engine, source, x):
    out = eval_json("--engine", engine, source, f"x={x!r}")
    value, gradient = _json_number(out["value"]), _json_number(out["grads"]["x"])
    want_value, want_grad = _torch_value_and_grad(source, x)
    np.testing.assert_allclose([value, gradient], [want_value, want_grad], rtol=1e-15, equal_nan=True)
    if want_value == 0 or math.isinf(want_grad):  # sqrt(-0.0) is -0.0 with gradient -inf
        assert (math.copysign(1, value), math.copysign(1, gradient)) == (math.copysign(1, want_value), math.copysign(1, want_grad))


@pytest.mark.parametrize("engine", ["scalar", "tensor"])
def test_minus_infinity_to_a_fractional_power_is_nan_in_value_and_gradient(engine):
    # C99's pow (NumPy with array exponents, Python) gives (-inf) ** -0.5 = 0 and torch's
    # gradient there is -0.0; a negative base has no real fractional power.
    for source in ("x ** -0.5", "x ** 1.5", "x ** (1/2)"):
        out = eval_json("--engine", engine, source, "x=-inf")
        assert (out["value"], out["grads"]["x"]) == ("nan", "nan"), source


def test_scalar_division_is_one_node_with_the_tensor_engines_rules():
    # The course's a * b**-1 gave x/x at 1e-300 the gradient -inf (b**-2 overflows); the
    # true derivative is 0, and 1 / b - (a / b) / b gives it.
    x = Value(1e-300)
    y = x / x
    y.backward()
    assert (y.data, x.grad, y._op, len(y._prev)) == (1.0, 0.0, "/", 2)
    z = Value(2.0)
    w = 3.0 / z
    w.backward()
    assert (w.data, z.grad) == (1.5, -0.75)


# ---- attack report D7 ----------------------------------------------------------------------------


def test_cross_entropy_of_a_certain_class_is_plus_zero():
    out = eval_json("cross_entropy(z, [0])", "z=[[1e308, -1e308]]")
    assert out["value"] == 0.0 and math.copysign(1, out["value"]) == 1.0  # torch prints 0.0, not -0.0
    assert out["grads"]["z"] == [[0.0, 0.0]]


@pytest.mark.parametrize("x, value, gradient", [
    # An exact zero wins over an overflow: the true product is 0 (NumPy and torch: nan).
    ("[1e200, 1e200, 0]", 0.0, [0.0, 0.0, "inf"]),
    ("[1e200, 1e200, 0, 5]", 0.0, [0.0, 0.0, "inf", 0.0]),
    ("[1e200, -1e200, 0]", -0.0, [0.0, 0.0, "-inf"]),
    ("[1e200, 1e200, 0, 0]", 0.0, [0.0, 0.0, 0.0, 0.0]),
    # An infinite or nan factor times 0 has no value: nan, as in NumPy and torch.
    ("[inf, 0]", "nan", [0.0, "inf"]),
    ("[nan, 1e200, 1e200, 0]", "nan", [0.0, "nan", "nan", "nan"]),  # d/dx0 = 1e200 * 1e200 * 0 = 0
])
def test_prod_with_a_zero_and_an_overflow_is_zero(x, value, gradient):
    out = eval_json("prod(x)", f"x={x}")
    assert out["value"] == value and math.copysign(1, _json_number(out["value"])) == math.copysign(1, _json_number(value))
    assert out["grads"]["x"] == gradient


def test_prod_with_a_zero_and_an_overflow_differentiates_twice():
    x = leaf([1e200, 1e200, 0.0, 5.0])
    [g] = grad(ops.prod(x), [x], create_graph=True)
    assert g.data.tolist() == [0.0, 0.0, inf, 0.0]
    # d2/dx2 summed against u: row k of the Hessian is the product of all but k and l.
    [h] = grad(g[3], [x])
    assert h.data.tolist() == [0.0, 0.0, inf, 0.0]


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_of_nothing_names_the_op_in_plain_words(name):
    done = gradcalc("eval", f"{name}(x)", "x=zeros(0)")
    assert done.returncode == 2 and "internal error" not in done.stderr
    assert f"{name} of an empty tensor has no value" in done.stderr
    assert "identity" not in done.stderr and "zero-size array" not in done.stderr


def test_outer_keeps_the_sign_of_a_zero_product():
    # IEEE 754: 0 * -0 is -0 (NumPy's multiply, torch.outer); an einsum would add it to +0.
    got = ops.outer(Tensor(np.array([0.0, 2.0])), Tensor(np.array([-0.0, 1.0]))).data
    assert np.array_equal(np.signbit(got), [[True, False], [True, False]])
    assert np.array_equal(got, [[0.0, 0.0], [-0.0, 2.0]])


# ---- issue 38: exp2 past the largest float, huber's delta -------------------------------------


def test_exp2_slope_is_a_float_where_the_value_overflows():
    # d/dx 2**x = 2**x ln 2: at 1024, 2**1023 * 2 ln 2 = 1.2460659279417838e308 (the value is inf)
    done = gradcalc("eval", "--json", "exp2(x)", "x=1024")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["value"] == "inf" and report["grads"]["x"] == 2.0**1023 * (2.0 * math.log(2.0))


@pytest.mark.parametrize("delta", ["-1", "0", "nan", "-inf"])
def test_huber_refuses_a_delta_that_is_not_positive(delta):
    done = gradcalc("eval", "huber(a, b, delta=d)", "a=0", "b=3", f"d={delta}")
    assert done.returncode == 2
    assert "delta must be a positive number" in done.stderr and "Traceback" not in done.stderr


@settings(max_examples=60)
@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6), st.floats(-1e3, 1e3, allow_nan=False))
def test_huber_is_never_negative_and_refuses_every_other_delta(pred, target, delta):
    # 0.5 d**2 within delta, delta (|d| - delta / 2) beyond: both >= 0 for delta > 0
    huber = ops.huber
    if delta > 0:
        loss = float(huber(Tensor(pred), Tensor(target), delta=delta).data)
        size = abs(pred - target)
        assert loss >= 0 and loss == pytest.approx(0.5 * size**2 if size <= delta else delta * (size - 0.5 * delta), rel=1e-12)
    else:
        with pytest.raises(ArgumentError, match="delta must be a positive number"):
            huber(Tensor(pred), Tensor(target), delta=delta)
