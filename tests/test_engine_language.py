"""The language on JAX and PyTorch, construct by construct: user functions, lambdas and
closures, the transformations, a vjp rule of the user's (jax.custom_vjp, torch.autograd.Function)
under grad and vmap, loops over ranges and over values, updates inside `with no_grad:`,
conditionals and unpacking. Each program's value and the gradients its report gives must be
the same on all three engines, and where it has one, the closed form's.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from gradcalc.parser import ExpressionResult, Session, compile_program
from gradcalc.parser.analysis import analyze

SETUP = "x = 0.7; w = 1.5; v = [0.5, -1.2, 2.0]; X = [[1.0, 2.0], [3.0, -4.0], [0.5, 0.25]]\n"
PROGRAMS = {
    "closure": ("f = lambda t: sin(t * w); grad(f)(x) + grad(lambda u: grad(f)(u))(x)",
                None, None),
    "def and hessian": ("def p(t) = t ** 3 * w; hessian(p)(x) + jacfwd(p)(x) + jacrev(p)(x)", None, None),
    "value_and_grad, jvp, vjp, hvp": ("def p(t) = sum(t ** 3); a, b = value_and_grad(p)(v); y, back = vjp(p, v)\n"
                                      "sum(b) + a + jvp(p, v, v)[1] + sum(back(2.0)[0]) + sum(hvp(p, v, v))", None, None),
    "rule under grad and vmap": ("def sq(t) = t * t\nvjp sq(t, g) = g * 2 * t\nsum(vmap(grad(lambda r: sum(sq(r) * w)))(X))", None, None),
    "loop accumulator": ("L = 0\nfor i in range(4): L += sum(v ** i)\nL", None, None),
    "loop over values": ("s = 0\nfor row in X: s += sum(row * row) * w\ns", None, None),
    "updates under no_grad": ("u = v\nfor k in range(3):\n    L = sum((u - 2) ** 2)\n    with no_grad:\n        u -= 0.1 * grad(L, u)\nsum(u * w)",
                              None, None),
    "conditional": ("x ** 2 if x > 0 else -x", None, None),
    "unpacking and several targets": ("a, b = split(X, [1]); gx, gw = grad(sum(v * w * x), (x, w)); sum(a) * gx + gw", None, None),
    "grad of grad by a named intermediate": ("h = x * w; y = sin(h) * h; grad(grad(y, h), h)", None, None),
}


def report(engine: str, program: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    session = Session(engine=engine)
    results = [r for r in session.run(compile_program(SETUP + program)) if isinstance(r, ExpressionResult)]
    analysis = analyze(results[-1].value, None, session.variables, session=session)
    return np.asarray(analysis.value), {k: np.asarray(g) for k, g in analysis.grads.items()}


@pytest.mark.parametrize("library", ["jax", "torch"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_construct_gives_the_tensor_engines_numbers(library, name):
    pytest.importorskip(library)
    program = PROGRAMS[name][0]
    value, grads = report("tensor", program)
    their_value, their_grads = report(library, program)
    np.testing.assert_allclose(their_value, value, rtol=1e-12, atol=1e-12)
    assert sorted(their_grads) == sorted(grads)
    for key in grads:
        np.testing.assert_allclose(their_grads[key], grads[key], rtol=1e-12, atol=1e-12, err_msg=key)


@pytest.mark.parametrize("library", ["jax", "torch"])
def test_a_closure_is_differentiated_through_as_jax_does(library):
    """grad(f)(x) for f = t -> sin(t w) is w cos(x w); its derivative by w is cos(x w) - x w sin(x w)."""
    pytest.importorskip(library)
    value, grads = report(library, "f = lambda t: sin(t * w); grad(f)(x)")
    x, w = 0.7, 1.5
    assert float(value) == pytest.approx(w * math.cos(x * w), rel=1e-15)
    assert float(grads["w"]) == pytest.approx(math.cos(x * w) - x * w * math.sin(x * w), rel=1e-14)
    assert float(grads["x"]) == pytest.approx(-w * w * math.sin(x * w), rel=1e-14)
