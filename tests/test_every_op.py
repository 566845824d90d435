"""Every op in the registry passes a gradient check, first and second order.

The test walks the registry: an op added without a Check fails here (the recipe's
step Check, CONTRIBUTING.md; tests/test_op_recipe.py names every missing step). Forward
mode's rules (each op's JVP, first and second order) are checked in
tests/test_forward_mode.py on the same draws.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gradcalc.autodiff import REGISTRY, Tensor, grad
from gradcalc.autodiff.binding import describe_signature
from gradcalc.autodiff.gradcheck import gradcheck
from tests.strategies import sampled

DIFFERENTIABLE = [op for op in REGISTRY.values() if op.has_gradient]
NO_GRADIENT = [op for op in REGISTRY.values() if not op.has_gradient]


def ids(op):
    return op.name


@pytest.mark.parametrize("op", DIFFERENTIABLE, ids=ids)
def test_every_differentiable_op_has_a_check_spec(op):
    assert op.check is not None, f"op {op.name} has a VJP but no Check: the step Check of CONTRIBUTING.md's recipe (check=Check(...) in its defop)"


def draw_case(op, data):
    """Inputs, params and differentiated positions for one example of `op`."""
    spec = op.check
    if spec.make is not None:
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        inputs, params = spec.make(np.random.default_rng(seed))
    else:
        shapes = data.draw(sampled(spec.shapes), label="shapes")
        elements = st.floats(spec.low, spec.high, allow_nan=False, allow_infinity=False)
        # Each element drawn on its own (no fill value): arrays of repeated values are ties
        # for sort and max and the origin for atan2, kinks that assume() then rejects, and
        # too many rejections fail Hypothesis's health check.
        inputs = [
            data.draw(arrays(np.float64, shape, elements=elements, fill=st.nothing()), label=f"x{i}") for i, shape in enumerate(shapes)
        ]
        params = dict(spec.params)
    if op.kink is not None:
        assume(not op.kink(*inputs, tol=spec.kink_gap, **params))
    diff = list(spec.diff) if spec.diff is not None else list(range(len(inputs)))
    return inputs, params, diff


def outputs_of(op, params):
    """One function per output of the op (several for multi-output ops)."""
    if op.n_ret == 1:
        return [lambda *ts: op(*ts, **params)]
    count = op.n_ret if op.n_ret is not None else len(op.forward(*[np.ones((4, 3))], **params))
    return [lambda *ts, k=k: op(*ts, **params)[k] for k in range(count)]


# Draws near an op's kink are rejected by assume(): for atan2 (the negative x axis, 0.2
# wide, in any of a dozen pairs) about half of them, which tripped Hypothesis's
# filtering health check on one seed in sixty.
KINKS_FILTERED = [HealthCheck.filter_too_much]


@pytest.mark.parametrize("op", DIFFERENTIABLE, ids=ids)
@settings(max_examples=12, suppress_health_check=KINKS_FILTERED)
@given(data=st.data())
def test_first_derivatives_match_numerical_ones(op, data):
    inputs, params, diff = draw_case(op, data)
    for f in outputs_of(op, params):
        methods = ["central", "complex"] if op.complex_safe else ["central"]
        for method in methods:
            result = gradcheck(f, inputs, wrt=diff, method=method)
            assert result.passed, f"{op.name} ({method}): {result.worst}"


@pytest.mark.parametrize("op", [op for op in DIFFERENTIABLE if op.check and op.check.second_order], ids=ids)
@settings(max_examples=6, suppress_health_check=KINKS_FILTERED)
@given(data=st.data())
def test_second_derivatives_match_numerical_ones(op, data):
    """grad of grad: the VJPs are differentiable, checked by differencing the gradient."""
    inputs, params, diff = draw_case(op, data)
    rng = np.random.default_rng(0)
    for f in outputs_of(op, params):
        probe = f(*[Tensor(x) for x in inputs])
        w = rng.uniform(0.5, 1.5, probe.shape)
        us = [rng.uniform(0.5, 1.5, np.shape(inputs[i])) for i in diff]

        def directional_gradient(*ts, f=f, w=w, us=us):
            gs = grad((f(*ts) * w).sum(), [ts[i] for i in diff], create_graph=True)
            return sum((g * u).sum() for g, u in zip(gs, us))

        result = gradcheck(directional_gradient, inputs, wrt=diff, method="central", atol=1e-4, rtol=1e-3)
        assert result.passed, f"{op.name}: {result.worst}"


@pytest.mark.parametrize("op", NO_GRADIENT, ids=ids)
def test_ops_without_gradient_never_require_grad(op):
    x = Tensor(np.array([[0.5, 1.0], [2.0, 3.0]]), requires_grad=True)
    args = {0: (), 1: (x,), 2: (x, x)}[op.n_in] if op.name != "item" else (x[1:, 1:],)  # item needs one element
    if op.category == "constructor":
        args = {"full": (2, 3.0), "linspace": (0, 1, 5)}.get(op.name, (2,))
    out = op(*args)
    assert not out.requires_grad
    assert out.parents == ()


def _every_kind(a, b=2, /, c=None, *rest, d, e="e", **more):
    pass


class _CallableObject:
    def __call__(self, x, k=1):
        pass


@pytest.mark.parametrize("name, param_names, signature", [
    ("sum", ("axis", "keepdims"), "sum(x, axis=None, keepdims=False)"),
    ("reshape", ("shape",), "reshape(x, *shape)"),
    ("einsum", ("subscripts",), "einsum(subscripts, *operands)"),
    ("concatenate", ("axis",), "concatenate(*xs, axis=0)"),
    ("add", (), "add(a, b)"),
])
def test_an_op_s_signature_is_read_from_its_forward(name, param_names, signature):
    op = REGISTRY[name]
    assert (op.param_names, op.signature) == (param_names, signature)


@pytest.mark.parametrize("forward, n_in, variadic, expected", [
    (_every_kind, 1, None, (("b", "c", "d", "e", "more"), "f(a, b=2, c=None, *rest, d, e='e', more)")),
    (_every_kind, None, "c", (("d", "e"), "f(a, b=2, *c, *rest, d, e='e', more)")),
    (lambda x, *, axis=0: x, 1, None, (("axis",), "f(x, axis=0)")),
    (lambda *xs: xs, None, None, ((), "f(*xs)")),
    (_CallableObject(), 1, None, (("k",), "f(x, k=1)")),
    (functools.partial(_every_kind, 1), 0, None, (("b", "c", "d", "e", "more"), "f(b=2, c=None, *rest, d, e='e', more)")),
])
def test_signature_description_on_every_kind_of_parameter(forward, n_in, variadic, expected):
    assert describe_signature("f", forward, n_in, variadic) == expected
