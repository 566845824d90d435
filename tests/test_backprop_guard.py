"""The nan guard of the VJPs (`masked`): an input the output does not depend on at a
point gets gradient exactly 0 there, in the one backward pass, where the chain rule
alone would multiply that 0 by an infinite or undefined local derivative and leak nan
(PyTorch and JAX do). The expected values are closed forms."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gradcalc.autodiff import REGISTRY, Tensor, grad
from gradcalc.autodiff.registry import Check, defop, unregister

ZERO_ONE = Tensor(np.array([0.0, 1.0]))


def gradient(f, x, create_graph: bool = False) -> list[float]:
    """d sum(f(x)) / dx at the list x, by a plain pass or by one that records a graph."""
    leaf = Tensor(np.array(x, dtype=float), requires_grad=True)
    with np.errstate(all="ignore"):
        return grad(f(leaf).sum(), leaf, create_graph=create_graph).data.tolist()


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("f, x, expected", [
    # the branch where() does not take passes nothing back: sqrt'(0) and sqrt'(-1) are not asked
    (lambda x: REGISTRY["where"](x > 0, x.sqrt(), 0.0), [0.0, -1.0, 4.0], [0.0, 0.0, 0.25]),
    (lambda x: REGISTRY["where"](x > 0, x.log(), 0.0), [-1.0, 0.0, 2.0], [0.0, 0.0, 0.5]),
    # a product with 0: sqrt'(0) * 0
    (lambda x: x.sqrt() * ZERO_ONE, [0.0, 4.0], [0.0, 0.25]),
    # x ** 0 is the constant 1, also at nan and at 0
    (lambda x: x ** 0.0, [math.nan, 0.0, 2.0], [0.0, 0.0, 0.0]),
    # relu and abs to the power 0: constants, even at nan
    (lambda x: x.relu() ** 0.0, [math.nan, -1.0, 2.0], [0.0, 0.0, 0.0]),
    (lambda x: x.abs() ** 0.0, [math.nan, 0.0, 2.0], [0.0, 0.0, 0.0]),
])
def test_a_point_the_output_does_not_depend_on_gets_gradient_zero(f, x, expected, create_graph):
    assert gradient(f, x, create_graph) == expected


def test_a_guarded_zero_meets_a_vjp_that_sums_by_sign():
    # L = logcumsumexp(x) = [x0, log(e^x0 + e^x1)]; y = sum(sqrt(L) * [0, 1]) + sum(L) at
    # x = 0: sqrt'(L0 = 0) is inf but its weight is 0, so dy/dx = dL1/dx (1 + 1/(2 sqrt(L1))) + dL0/dx
    # with dL1/dx = [1/2, 1/2], dL0/dx = [1, 0], L1 = log 2.
    def f(x):
        L = x.logcumsumexp()
        return (L.sqrt() * ZERO_ONE).sum() + L.sum()

    w = 0.5 * (1 + 1 / (2 * math.sqrt(math.log(2))))
    assert gradient(f, [0.0, 0.0]) == pytest.approx([1 + w, w], rel=1e-15)


def test_an_op_defined_outside_the_engine_receives_the_guarded_gradient():
    # Its VJP clips g from below (np.fmax drops a nan): fed sqrt's guarded 0 at 0, it
    # passes 0 back, not fmax(nan, -1) = -1.
    defop("clip_below", lambda x: x * 1.0, (lambda m, g, ans, x: np.fmax(g, -1.0),), doc="test", category="test",
          check=Check())
    try:
        op = REGISTRY["clip_below"]
        assert gradient(lambda x: op(x).sqrt() * ZERO_ONE, [0.0, 2.0]) == [0.0, 1 / (2 * math.sqrt(2.0))]
    finally:
        unregister("clip_below")


ELEMENTWISE = sorted(name for name, op in REGISTRY.items() if op.category == "elementwise" and op.public and op.vjps is not None)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_every_elementwise_op_passes_nothing_back_from_a_nan_the_output_drops(name):
    """op(...)[1:] does not depend on element 0, which is nan in one input: every input's
    gradient there is exactly 0, by a plain pass, a recorded one and forward mode."""
    from gradcalc.autodiff.forward import jacobian_forward

    op = REGISTRY[name]
    extra = {"low": -1.0, "high": 1.0} if name == "clip" else {}
    for k in range(op.n_in or 1):
        for create_graph in (False, True):
            leaves = [Tensor(np.array([math.nan if j == k else 0.7, 0.5]), requires_grad=True) for j in range(op.n_in or 1)]
            with np.errstate(all="ignore"):
                out = op(*leaves, **extra)[1:].sum()
                grads = grad(out, leaves, create_graph=create_graph)
                forward = [jacobian_forward(out, leaf).data for leaf in leaves]
            for g, f in zip(grads, forward):
                assert g.data[0] == 0.0 and f[0] == 0.0, (name, k, create_graph, g.data, f)


def test_a_dropped_nan_gives_gradient_zero_through_the_command():
    from .test_cli import gradcalc

    done = gradcalc("eval", "--json", "sum(atan(sqrt(x))[1:]) + sum(square(sqrt(x))[1:])", "x=[-1, 0.5]")
    assert done.returncode == 0, done.stderr
    first, second = json.loads(done.stdout)["grads"]["x"]
    assert first == 0.0 and second == pytest.approx(1 / (2 * math.sqrt(0.5)) / 1.5 + 1.0, rel=1e-15)
