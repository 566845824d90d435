"""Forward mode: every differentiable op's JVP rule, first and second order.

Each rule is checked three ways on the op's Check inputs: against its VJP (u . (J v) is
(J^T u) . v), against complex step (J v is Im f(x + i h v) / h, exact to rounding) or
central differences where the op is not complex-safe, and at second order: forward over
forward against reverse over forward and against differences of the JVP itself, and
forward over reverse (the Hessian-vector product) against reverse over reverse and
differences of the gradient. torch.func.jvp is the oracle in
tests/test_torch_differential.py, at first order and at second (forward over forward,
and forward over reverse against torch.func.jvp of torch.func.grad).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.autodiff import REGISTRY, Tensor, grad
from gradcalc.autodiff.forward import Structural, jacobian_forward, tangent_of
from gradcalc.autodiff.transforms import jvp

from .test_every_op import KINKS_FILTERED, draw_case, outputs_of

DIFFERENTIABLE = [op for op in REGISTRY.values() if op.has_gradient]


def ids(op):
    return op.name


@pytest.mark.parametrize("op", DIFFERENTIABLE, ids=ids)
def test_every_differentiable_op_has_a_jvp_rule(op):
    assert op.jvp is not None, f"op {op.name} has a VJP but no JVP: give its defop jvp="
    assert not isinstance(op.jvp, Structural), "defop binds a structural rule to its op"


def directions(inputs, diff, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, np.shape(inputs[i])) for i in diff]


def forward_tangent(f, inputs, diff, vs, create_graph=False, dtype=float):
    xs = [Tensor(np.asarray(x, dtype=dtype), requires_grad=i in diff) for i, x in enumerate(inputs)]
    y = f(*xs)
    return xs, y, tangent_of(y, [xs[i] for i in diff], vs, create_graph=create_graph)


def shifted(inputs, diff, vs, step):
    out = [np.asarray(x) for x in inputs]
    for i, v in zip(diff, vs):
        out[i] = out[i] + step * v
    return out


@pytest.mark.parametrize("op", DIFFERENTIABLE, ids=ids)
@settings(max_examples=8, suppress_health_check=KINKS_FILTERED, deadline=None)
@given(data=st.data())
def test_jvp_agrees_with_the_vjp_and_with_complex_step(op, data):
    inputs, params, diff = draw_case(op, data)
    vs = directions(inputs, diff, 1)
    for f in outputs_of(op, params):
        xs, y, t = forward_tangent(f, inputs, diff, vs)
        assert t.shape == y.shape
        u = np.random.default_rng(2).uniform(-1.0, 1.0, y.shape)
        gs = grad((y * u).sum(), [xs[i] for i in diff])
        reverse = sum(float(np.sum(g.data * v)) for g, v in zip(gs, vs))
        assert float(np.sum(u * t.data)) == pytest.approx(reverse, rel=1e-10, abs=1e-12), f"{op.name}: u.(Jv) != (J^T u).v"
        if op.complex_safe:
            h = 1e-20
            numeric = np.imag(f(*[Tensor(x) for x in shifted(inputs, diff, vs, 1j * h)]).data) / h
            np.testing.assert_allclose(t.data, numeric, rtol=1e-10, atol=1e-12, err_msg=f"{op.name} (complex step)")
        else:
            h = 1e-6
            hi = f(*[Tensor(x) for x in shifted(inputs, diff, vs, h)]).data
            lo = f(*[Tensor(x) for x in shifted(inputs, diff, vs, -h)]).data
            np.testing.assert_allclose(t.data, (hi - lo) / (2 * h), rtol=1e-5, atol=1e-6, err_msg=f"{op.name} (central)")


@pytest.mark.parametrize("op", [op for op in DIFFERENTIABLE if op.check and op.check.second_order], ids=ids)
@settings(max_examples=4, suppress_health_check=KINKS_FILTERED, deadline=None)
@given(data=st.data())
def test_second_order_forward_over_forward_and_reverse_over_forward_agree(op, data):
    """d/dw (J(x) v): the JVP's own graph differentiated forward, in reverse, and by differences."""
    inputs, params, diff = draw_case(op, data)
    vs, ws = directions(inputs, diff, 3), directions(inputs, diff, 4)
    for f in outputs_of(op, params):
        xs, y, t = forward_tangent(f, inputs, diff, vs, create_graph=True)
        if not t.requires_grad:
            continue  # a linear op: J does not depend on x
        targets = [xs[i] for i in diff]
        forward_forward = tangent_of(t, targets, ws).data
        u = np.random.default_rng(5).uniform(-1.0, 1.0, t.shape)
        gs = grad((t * u).sum(), targets)
        reverse = sum(float(np.sum(g.data * w)) for g, w in zip(gs, ws))
        assert float(np.sum(u * forward_forward)) == pytest.approx(reverse, rel=1e-8, abs=1e-10), op.name
        h = 1e-5
        hi = forward_tangent(f, shifted(inputs, diff, ws, h), diff, vs)[2].data
        lo = forward_tangent(f, shifted(inputs, diff, ws, -h), diff, vs)[2].data
        np.testing.assert_allclose(forward_forward, (hi - lo) / (2 * h), rtol=1e-4, atol=1e-5, err_msg=op.name)


@pytest.mark.parametrize("op", [op for op in DIFFERENTIABLE if op.check and op.check.second_order], ids=ids)
@settings(max_examples=4, suppress_health_check=KINKS_FILTERED, deadline=None)
@given(data=st.data())
def test_second_order_forward_over_reverse_and_reverse_over_reverse_agree(op, data):
    """H w for the scalar u . f (hvp): forward mode over the graph the VJPs recorded, against
    reverse over reverse (the gradient of grad . w) and central differences of the gradient."""
    inputs, params, diff = draw_case(op, data)
    ws = directions(inputs, diff, 6)
    for f in outputs_of(op, params):
        u = np.random.default_rng(7).uniform(0.5, 1.5, f(*[Tensor(x) for x in inputs]).shape)

        def gradient(values, create_graph=False, f=f, u=u):
            xs = [Tensor(np.asarray(x, dtype=float), requires_grad=i in diff) for i, x in enumerate(values)]
            targets = [xs[i] for i in diff]
            return targets, grad((f(*xs) * u).sum(), targets, create_graph=create_graph)

        targets, gs = gradient(inputs, create_graph=True)
        if not any(g.requires_grad for g in gs):
            continue  # a linear op: its gradient does not depend on x
        forward = [tangent_of(g, targets, ws).data for g in gs]
        along_w = sum(((g * w).sum() for g, w in zip(gs, ws)), Tensor(0.0))
        for hv, reverse in zip(forward, grad(along_w, targets)):
            np.testing.assert_allclose(hv, reverse.data, rtol=1e-9, atol=1e-10, err_msg=f"{op.name} (reverse over reverse)")
        h = 1e-5
        hi = gradient(shifted(inputs, diff, ws, h))[1]
        lo = gradient(shifted(inputs, diff, ws, -h))[1]
        for hv, a, b in zip(forward, hi, lo):
            np.testing.assert_allclose(hv, (a.data - b.data) / (2 * h), rtol=1e-4, atol=1e-5, err_msg=f"{op.name} (differences)")


# ---- closed forms ------------------------------------------------------------------------------


def test_jvp_of_a_function_is_its_value_and_directional_derivative():
    y, t = jvp(lambda x: x**3 + 2 * x, [3.0], [1.0])
    assert (float(y.data), float(t.data)) == (33.0, 29.0)  # 3 x^2 + 2 at 3


def test_jvp_of_sin_times_exp_in_a_direction():
    x = np.array([0.5, -1.0])
    v = np.array([2.0, 3.0])
    _, t = jvp(lambda a: (a.sin() * a.exp()).sum(), [x], [v])
    expected = np.sum((np.cos(x) + np.sin(x)) * np.exp(x) * v)
    assert float(t.data) == pytest.approx(expected, rel=1e-15)


def test_hessian_vector_product_forward_over_reverse():
    # f = x0^2 x1 + x1^3: H = [[2 x1, 2 x0], [2 x0, 6 x1]]
    x = Tensor([1.5, -2.0], requires_grad=True)
    f = (x[0] ** 2 * x[1] + x[1] ** 3)
    g = grad(f, x, create_graph=True)
    hv = tangent_of(g, x, np.array([1.0, 0.5]))
    np.testing.assert_allclose(hv.data, [2 * -2.0 * 1.0 + 2 * 1.5 * 0.5, 2 * 1.5 * 1.0 + 6 * -2.0 * 0.5], rtol=1e-15)


def test_jacfwd_is_the_jacobian_of_a_matrix_product():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    x = Tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = Tensor(a) @ x
    np.testing.assert_array_equal(jacobian_forward(y, x).data, a)


def test_third_derivative_by_forward_mode_three_times():
    # d^3/dx^3 of x^5 at 2 is 60 x^2 = 240.
    x = Tensor(2.0, requires_grad=True)
    y = x**5
    t1 = tangent_of(y, x, 1.0, create_graph=True)
    t2 = tangent_of(t1, x, 1.0, create_graph=True)
    t3 = tangent_of(t2, x, 1.0)
    assert (float(t1.data), float(t2.data), float(t3.data)) == (80.0, 160.0, 240.0)


def test_an_input_the_output_does_not_depend_on_has_a_zero_tangent():
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = Tensor([3.0, 4.0]) * 2
    np.testing.assert_array_equal(tangent_of(y, x, np.ones(2)).data, [0.0, 0.0])


def test_the_engine_docs_forward_example():
    x = Tensor(2.0, requires_grad=True)
    assert float(tangent_of(x**5, x, 1.0).data) == 80.0
    assert float(tangent_of(grad(x**5, x, create_graph=True), x, 1.0).data) == 160.0
