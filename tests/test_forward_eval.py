"""`gradcalc eval --mode forward`: the gradients found by forward mode (a tangent per
variable element, a batched pass per variable, each op's JVP rule) against the same command's reverse mode (one backward
pass, the VJPs: an independent rule per op) and against PyTorch float64."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gradcalc.cli.actions import evaluate_expression

from .test_cli import gradcalc

CASES = [
    ("sin(x) * y", ["x=1", "y=2"]),
    ("sum(W @ v)", ["W=[[1, 2], [3, 4]]", "v=[1, -1]"]),
    ("h = x * 2; h ** 2", ["x=3"]),
    ("logsumexp(x) + max(x)", ["x=[1, 3, 2]"]),
    ("cross_entropy(L, [1, 0])", ["L=[[1, 2, 0], [0.5, -1, 3]]"]),
    ("det(A) + trace(inv(A))", ["A=[[2, 1], [1, 3]]"]),
    ("sum(softmax(x) * [1, 2, 3])", ["x=[0.1, -0.2, 0.3]"]),
    ("norm(x) / prod(x)", ["x=[1, 2, 2]"]),
    ("sum(cumsum(x) ** 2)", ["x=[1, -1, 2]"]),
    ("mean(tanh(x @ W + b))", ["x=[[1, 2]]", "W=[[0.5, -1], [1, 0.25]]", "b=[0.1, -0.1]"]),
]


def run(expr: str, bindings: list[str], *flags: str) -> dict:
    done = gradcalc("eval", expr, *bindings, "--json", *flags)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(("expr", "bindings"), CASES)
def test_forward_mode_gives_reverse_modes_gradients(expr, bindings):
    forward, reverse = run(expr, bindings, "--mode", "forward"), run(expr, bindings)
    assert forward["mode"] == "forward" and "mode" not in reverse
    assert forward["value"] == reverse["value"] and forward["grads"].keys() == reverse["grads"].keys()
    for name, g in reverse["grads"].items():
        np.testing.assert_allclose(forward["grads"][name], g, rtol=1e-12, atol=1e-15)
    assert forward["tangents"] == sum(np.size(g) for g in reverse["grads"].values())
    assert forward["tangent_passes"] == len(reverse["grads"])  # (a batch of all its tangents for each variable)


@pytest.mark.parametrize(("expr", "bindings"), CASES)
def test_the_passes_said_are_the_passes_made(expr, bindings):
    """The note's count against the engine's own counter of forward passes, with every
    variable's tangents in one batch and in batches the element cap makes smaller."""
    from gradcalc.autodiff import topological_order
    from gradcalc.autodiff.backprop import PASSES
    from gradcalc.autodiff.limits import max_elements, set_max_elements

    reverse, _ = evaluate_expression(expr, bindings, "tensor", None)
    widest = max(node.size for node in topological_order(reverse.output))
    variables = len(reverse.grads)
    for cap in (None, widest):  # (a cap of the widest tensor: one tangent a pass)
        previous = max_elements()
        if cap is not None:
            set_max_elements(cap)
        try:
            before = PASSES.forward
            analysis, _ = evaluate_expression(expr, bindings, "tensor", None, "forward")
            assert analysis.tangent_passes == PASSES.forward - before
            assert analysis.tangents == sum(np.size(g) for g in analysis.grads.values())
            assert analysis.tangent_passes == (analysis.tangents if cap is not None else variables)
        finally:
            set_max_elements(previous)


def test_forward_mode_against_pytorch():
    torch = pytest.importorskip("torch")
    W = torch.tensor([[0.5, -1.0], [1.0, 0.25]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([0.1, -0.1], dtype=torch.float64, requires_grad=True)
    torch.tanh(torch.tensor([[1.0, 2.0]], dtype=torch.float64) @ W + b).mean().backward()
    expr, bindings = CASES[-1]
    got = run(expr, bindings, "--mode", "forward")["grads"]
    np.testing.assert_allclose(got["W"], W.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(got["b"], b.grad.numpy(), rtol=1e-13)


def test_the_text_says_how_many_passes_and_wrt_picks_them():
    done = gradcalc("eval", "sum(x * y)", "x=[1, 2, 3]", "y=4", "--mode", "forward", "--wrt", "x")
    assert done.returncode == 0, done.stderr
    assert "grad x: [4.0, 4.0, 4.0]" in done.stdout and "grad y" not in done.stdout
    assert "note: the gradients are by forward mode: 3 tangents, one per element of each variable, in 1 forward pass" in done.stdout


def test_an_output_of_constants_and_the_scalar_engine():
    assert "tangent_passes" not in json.dumps(run("2 * 3", [], "--mode", "forward")["grads"])
    done = gradcalc("eval", "x * 2", "x=1", "--mode", "forward", "--engine", "scalar")
    assert done.returncode == 2 and "--mode forward needs the tensor engine" in done.stderr
    assert "Traceback" not in done.stderr


UNARY = ["sin", "exp", "tanh", "sigmoid", "softplus", "sqrt", "log1p", "atan", "square"]


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.sampled_from(UNARY), min_size=1, max_size=5),
       x=st.lists(st.floats(0.1, 1.0), min_size=1, max_size=4), k=st.floats(0.1, 2) | st.floats(-2, -0.1))
def test_random_chains_agree_in_both_modes(ops, x, k):
    # Points where every value is finite: where exp overflows, a gradient of exactly 0
    # times inf passes nothing back in reverse mode (docs/engine.md, "The branch where does
    # not take") while forward mode's tangent is inf * 0 = nan, the conventions differing.
    expr = "x"
    for i, op in enumerate(ops):
        expr = f"{op}({expr})" if i % 2 == 0 else f"{op}({expr}) * k + {expr}"
    expr = f"sum({expr})"
    bindings = [f"x={x}", f"k={k}"]
    reverse, _ = evaluate_expression(expr, bindings, "tensor", None)
    assume(bool(np.all(np.isfinite(reverse.value))))  # exp(exp(exp(...))) overflows: not such a point
    forward, _ = evaluate_expression(expr, bindings, "tensor", None, "forward")
    assert forward.tangents == len(x) + (len(ops) > 1) and reverse.tangent_passes is None  # (k is used from the second op)
    assert forward.tangent_passes == 1 + (len(ops) > 1)
    for name, g in reverse.grads.items():
        np.testing.assert_allclose(forward.grads[name], g, rtol=1e-11, atol=1e-14)
