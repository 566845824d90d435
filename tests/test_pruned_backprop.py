"""grad(y, x) computes only what reaches x: a backward pass for some inputs skips the
branches that lead to none of them (a per-row gradient by x does not compute and drop
one by the weights), and gives the same numbers as a full backward pass."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.autodiff import REGISTRY, Tensor, grad
from gradcalc.autodiff import transforms as T

UNARY = ["tanh", "sin", "exp", "neg"]
BINARY = ["add", "mul", "sub"]


def test_gradient_by_x_never_runs_the_weights_vjp(monkeypatch):
    op = REGISTRY["matmul"]
    calls = {"W": 0}
    da, db = op.vjps

    def counted(*args, **kwargs):
        calls["W"] += 1
        return db(*args, **kwargs)

    monkeypatch.setattr(op, "vjps", (da, counted))
    rng = np.random.default_rng(0)
    W = Tensor(rng.normal(size=(3, 4)), requires_grad=True)
    x = Tensor(rng.normal(size=(5, 3)), requires_grad=True)
    (gx,) = grad((x @ W).tanh().sum(), [x])
    assert calls["W"] == 0
    expected = (1 - np.tanh(x.data @ W.data) ** 2) @ W.data.T  # closed form
    np.testing.assert_allclose(gx.data, expected, rtol=1e-12)
    # per-example gradients by vmap of grad: the weights' VJP is not batched either
    T.vmap(T.grad(lambda row: (row @ W).tanh().sum()))(x)
    assert calls["W"] == 0
    grad((x @ W).tanh().sum(), [W])
    assert calls["W"] == 1


@st.composite
def graphs(draw):
    """A random DAG over four leaves; returns a builder and the indices of the targets."""
    steps = draw(st.lists(st.tuples(st.sampled_from(UNARY + BINARY), st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=12))
    targets = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True))
    return steps, targets


@settings(max_examples=150, deadline=None)
@given(graphs(), st.booleans())
def test_a_pass_for_some_leaves_equals_the_full_pass_on_them(case, create_graph):
    steps, targets = case
    rng = np.random.default_rng(len(steps))
    leaves = [Tensor(rng.normal(size=3) * 0.5, requires_grad=True) for _ in range(4)]
    nodes = list(leaves)
    for name, i, j in steps:
        a, b = nodes[i % len(nodes)], nodes[j % len(nodes)]
        nodes.append(REGISTRY[name](a) if name in UNARY else REGISTRY[name](a, b))
    y = sum(nodes[-3:], start=Tensor(0.0)).sum() if len(nodes) > 3 else nodes[-1].sum()
    if not y.requires_grad:
        return
    full = grad(y, leaves)
    some = grad(y, [leaves[k] for k in targets], create_graph=create_graph)
    for k, g in zip(targets, some):
        np.testing.assert_allclose(g.data, full[k].data, rtol=1e-13, atol=0)
