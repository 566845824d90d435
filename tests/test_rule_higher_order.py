"""A rule of your own (`vjp NAME(params, g) = ...`) at second order: the rule is what is
differentiated, never the function's body, as PyTorch's torch.autograd.Function does
(its backward, run with create_graph). docs/language.md states it; PyTorch float64 is the
oracle here (JAX's custom_vjp under grad of grad agrees, measured by hand: it is not a
test dependency)."""
from __future__ import annotations

import json

import pytest

from .test_cli import gradcalc

torch = pytest.importorskip("torch")


def torch_second_derivative(rule, x: float) -> float:
    """d/dx of the gradient of f at x, f a torch.autograd.Function whose backward is
    rule(g, x) (x**3 forward)."""

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t**3

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return rule(g, t)

    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad(F.apply(t), t, create_graph=True)
    if not first.requires_grad:  # a rule that does not depend on x: torch calls it constant
        return 0.0
    (second,) = torch.autograd.grad(first, t)
    return float(second)


@pytest.mark.parametrize("rule_text, rule", [
    ("g * 3 * x**2", lambda g, t: g * 3 * t**2),      # the right rule: f'' = 6x
    ("g * 12", lambda g, t: g * 12.0),                 # right only at 2; its derivative is 0
    ("g * x**3", lambda g, t: g * t**3),               # wrong everywhere: its derivative 3x**2
    ("g * sin(x)", lambda g, t: g * torch.sin(t)),     # cos(x), nothing the body says
])
@pytest.mark.parametrize("x", [2.0, -0.7])
@pytest.mark.parametrize("transform", ["grad(grad(f))", "hessian(f)"])
def test_second_order_differentiates_the_rule_as_torch_does(rule_text, rule, x, transform):
    done = gradcalc("eval", "--json", f"def f(x) = x**3; vjp f(x, g) = {rule_text}; {transform}(x)", f"x={x}")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == pytest.approx(torch_second_derivative(rule, x), rel=1e-15, abs=1e-300)
